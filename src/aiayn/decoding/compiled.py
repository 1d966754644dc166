"""A compiled decoder step for greedy decoding and sampling (opt-in: `greedy_search(compiled=True)`).

In eager PyTorch, a small model's decoder step is mostly spent dispatching about a hundred small
operations, one after another. TorchInductor compiles the whole step into fused C++ kernels:
the embedding, every decoder layer, the output layer and the log-normaliser. On a 2-core CPU
this made greedy decoding of the `small` model about 1.3x faster (benchmarks/RESULTS.md).

A compiled graph is for fixed shapes, and the eager cache grows by one position per step, so
here the step keeps one shape as the output grows. It writes each step's keys and values into
the cache's preallocated buffers at a position given as a tensor (`_Slot`). It then attends over
the whole capacity, with a mask of the positions filled so far. Batch size, source length and
capacity are dynamic dimensions: rows leaving the batch and new batches reuse the one compiled
step, after a compilation of about 10 s. The layers themselves are the model's own
(`Decoder.forward`), so the step computes what `steps.next_logits` does, in another order of
floating-point operations.

Shapes: B rows, S source length, C cache capacity, H heads, K d_k, V vocabulary.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import torch
from torch import Tensor

from aiayn.decoding.steps import never_outputs
from aiayn.model import DecoderCache, Transformer
from aiayn.model.masks import padding_mask

# TorchInductor options: weights as constants (laid out once for the matmul kernels), and a C++
# wrapper around the kernels instead of Python.
OPTIONS = {"freezing": True, "cpp_wrapper": True}

_steps: WeakKeyDictionary[Transformer, object] = WeakKeyDictionary()


def next_logits_compiled(model: Transformer, last_tokens: Tensor, src: Tensor,
                         cache: DecoderCache) -> tuple[Tensor, Tensor]:
    """`steps.next_logits`, compiled: logits (B, V) of the next token after `last_tokens` (B,),
    and their logsumexp (B, 1). The cache's capacity must hold the new position."""
    if cache.rows_per_sentence != 1:
        raise ValueError("the compiled step decodes one row per sentence (greedy search, sampling)")
    layers = cache.self_attn
    position, capacity = layers[0].length, layers[0].k.size(1)
    if position >= capacity:
        raise ValueError(f"the cache holds {capacity} positions; the compiled step cannot grow it")
    step = _steps.get(model)
    if step is None:
        step = _steps[model] = torch.compile(functools.partial(_step, model), dynamic=True, options=OPTIONS)
    table = model.positions(capacity, 0, layers[0].k.dtype, layers[0].k.device)  # (C, D)
    logits, normaliser = step(last_tokens, torch.tensor(position, device=last_tokens.device), table,
                              [kv.k for kv in layers], [kv.v for kv in layers], cache.cross_attn,
                              padding_mask(src, model.config.pad_id))
    for kv in layers:
        kv.length += 1
    return logits, normaliser


def _step(model: Transformer, last_tokens: Tensor, position: Tensor, table: Tensor, keys: list[Tensor],
          values: list[Tensor], cross_attn: list[tuple[Tensor, Tensor]], memory_mask: Tensor,
          ) -> tuple[Tensor, Tensor]:
    """The traced step: tokens (B,), position (), position table (C, D), per layer the cache
    buffers (B, C, H, K), cross-attention keys and values (B, H, S, K), mask (B, 1, 1, S)."""
    x = model.tgt_embed(last_tokens[:, None])  # (B, 1, D)
    x = model.embed_dropout(x + table.index_select(0, position.view(1)))
    filled = torch.arange(table.size(0), device=position.device) <= position  # (C,)
    slots = _Slots([_Slot(k, v, position) for k, v in zip(keys, values, strict=True)])
    hidden, _ = model.decoder(x, filled.view(1, 1, 1, -1), cross_attn, memory_mask, slots)  # (B, 1, D)
    logits = model.logits(hidden)[:, -1].float()  # (B, V)
    normaliser = logits.logsumexp(dim=-1, keepdim=True)  # (B, 1), over the whole vocabulary
    return never_outputs(model, logits), normaliser


@dataclass
class _Slot:
    """One layer's cache buffers as the traced step sees them: `append` writes at `position` and
    returns the whole capacity, whose unfilled positions the mask hides (they hold zeros)."""

    k: Tensor  # (B, C, H, K)
    v: Tensor
    position: Tensor  # ()

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """(B, H, 1, K) new keys and values -> all C positions, each (B, H, C, K)."""
        self.k.index_copy_(1, self.position.view(1), k.transpose(1, 2))
        self.v.index_copy_(1, self.position.view(1), v.transpose(1, 2))
        return self.k.transpose(1, 2), self.v.transpose(1, 2)


@dataclass
class _Slots:
    self_attn: list[_Slot]  # what `Decoder.forward` reads of a cache
