"""A compiled decoder step for greedy decoding and sampling (opt-in: `--compile`).

In eager PyTorch, a small model's decoder step is mostly spent dispatching about a hundred small
operations one after another. TorchInductor compiles the whole step (embedding, every decoder
layer, the output layer and the log-normaliser) into a few fused kernels, with the weights
folded in as constants ("freezing") and, for a fixed row count, packed once for MKL's matmul.
For the `small` model on a 2-core CPU at 32 rows the step is about 1.2x faster than the eager
step on packed weights, whole greedy searches 1.07-1.16x; on a GPU, where the eager step is bound
by kernel launches, 1.55x (benchmarks/RESULTS.md). Beam search does not use it: at 4x the rows,
its compiled step was only 1.03x faster.

A compiled graph is for fixed shapes. Here:
- the rows are fixed per graph: a step is compiled once per power-of-two row count
  (`row_bucket`), and greedy search pads its batch to one;
- the source length and the cache capacity are dynamic dimensions: new batches reuse the graph;
- the cache keeps one shape as the output grows: each step writes its keys and values into the
  preallocated buffers at a position given as a tensor, and attends over the whole capacity
  with a mask of the positions filled so far (so the buffers must hold finite numbers there:
  `KVCache` keeps them zero).
The layers are the model's own (`Decoder.forward`), so the step computes what
`steps.next_logits` does, in another order of floating-point operations. The weights are read
when a graph is compiled: if they change later (training goes on), the step is compiled anew.
The cross-attention keys and values must be laid out as when the graph was compiled: greedy
search always passes them through `DecoderCache.select`, which makes them contiguous.

Shapes: B rows, S source length, C cache capacity, H heads, K d_k, D d_model, V vocabulary.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import torch
import torch._dynamo
from torch import Tensor, nn
from torch._dynamo import config as dynamo_config
from torch._inductor import config as inductor_config

from aiayn.decoding.steps import never_outputs
from aiayn.model import DecoderCache, Transformer
from aiayn.model.masks import padding_mask

StepFn = Callable[[Transformer, Tensor, Tensor, DecoderCache], tuple[Tensor, Tensor]]  # as steps.next_logits
GRAPHS = 64  # compiled graphs kept per step function (TorchDynamo's default, 8, is too few for the
# row buckets of several models)


def row_bucket(rows: int) -> int:
    """The row count a step is compiled for: the next power of two."""
    return 1 << max(rows - 1, 0).bit_length()


def compiled_step(model: Transformer) -> StepFn:
    """`steps.next_logits(model, ...)`, compiled: logits (B, V) of the next token after `last_tokens`
    (B,), and their logsumexp (B, 1). One row per sentence; the cache's capacity must hold the new
    position. Get it once per search: it checks whether the weights changed since the last compile."""
    return functools.partial(_next_logits, _compiled(model))


def _next_logits(step: nn.Module, model: Transformer, last_tokens: Tensor, src: Tensor,
                 cache: DecoderCache) -> tuple[Tensor, Tensor]:
    if cache.rows_per_sentence != 1:
        raise ValueError("the compiled step decodes one row per sentence (greedy search, sampling)")
    layers = cache.self_attn
    position, capacity = layers[0].length, layers[0].k.size(1)
    if position >= capacity:
        raise ValueError(f"the cache holds {capacity} positions; the compiled step cannot grow it")
    table = model.positions(capacity, 0, layers[0].k.dtype, layers[0].k.device)  # (C, D)
    inputs = (last_tokens, torch.tensor(position, device=last_tokens.device), table,
              [kv.k for kv in layers], [kv.v for kv in layers], cache.cross_attn,
              padding_mask(src, model.config.pad_id))
    _mark_shapes(*inputs)
    with _compiling():
        logits, normaliser = step(*inputs)
    for kv in layers:
        kv.length += 1
    return logits, normaliser


class _Step(nn.Module):
    """The traced step. The model is a submodule, so that freezing sees its weights as constants."""

    def __init__(self, model: Transformer) -> None:
        super().__init__()
        self.model = model

    def forward(self, last_tokens: Tensor, position: Tensor, table: Tensor, keys: list[Tensor],
                values: list[Tensor], cross_attn: list[tuple[Tensor, Tensor]], memory_mask: Tensor,
                ) -> tuple[Tensor, Tensor]:
        """tokens (B,), position (), position table (C, D), per layer the cache buffers (B, C, H, K)
        and cross-attention keys and values (B, H, S, K), mask (B, 1, 1, S)."""
        m = self.model
        x = m.tgt_embed(last_tokens[:, None])  # (B, 1, D)
        x = m.embed_dropout(x + table.index_select(0, position.view(1)))
        filled = torch.arange(table.size(0), device=position.device) <= position  # (C,)
        slots = _Slots([_Slot(k, v, position) for k, v in zip(keys, values, strict=True)])
        hidden, _ = m.decoder(x, filled.view(1, 1, 1, -1), cross_attn, memory_mask, slots)  # (B, 1, D)
        logits = m.logits(hidden)[:, -1].float()  # (B, V)
        normaliser = logits.logsumexp(dim=-1, keepdim=True)  # (B, 1), over the whole vocabulary
        return never_outputs(m, logits), normaliser


@dataclass
class _Slot:
    """One layer's cache buffers as the traced step sees them: `append` writes at `position` and
    returns the whole capacity, whose unfilled positions the mask hides."""

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


_steps: WeakKeyDictionary[Transformer, tuple[tuple[int, ...], nn.Module]] = WeakKeyDictionary()


def _compiled(model: Transformer) -> nn.Module:
    """The model's compiled step. TorchDynamo tells models apart by their weight tensors, not by
    the numbers in them: once a weight has changed in place, the step is compiled for a copy."""
    versions = tuple(p._version for p in model.parameters())
    known = _steps.get(model)
    if known is None or known[0] != versions:
        step = _Step(model if known is None else copy.deepcopy(model))
        known = _steps[model] = (versions, torch.compile(step, dynamic=False))
    return known[1]


@contextlib.contextmanager
def _compiling() -> Iterator[None]:
    """TorchInductor's options while a step runs (and compiles, at a new row count): weights frozen
    into the graph (only the process-wide option does it), and room for a graph per row bucket.
    Set and restored directly: `config.patch` costs several times more, at every step."""
    saved = inductor_config.freezing, dynamo_config.recompile_limit
    inductor_config.freezing, dynamo_config.recompile_limit = True, GRAPHS
    try:
        yield
    finally:
        inductor_config.freezing, dynamo_config.recompile_limit = saved


def _mark_shapes(last_tokens: Tensor, position: Tensor, table: Tensor, keys: list[Tensor],
                 values: list[Tensor], cross_attn: list[tuple[Tensor, Tensor]], memory_mask: Tensor) -> None:
    """Rows static (MKL packs weights for one row count), capacity and source length dynamic."""
    torch._dynamo.maybe_mark_dynamic(table, 0)
    for buffer in (*keys, *values):
        torch._dynamo.maybe_mark_dynamic(buffer, 1)
    for k, v in cross_attn:
        torch._dynamo.maybe_mark_dynamic(k, 2)
        torch._dynamo.maybe_mark_dynamic(v, 2)
    torch._dynamo.maybe_mark_dynamic(memory_mask, 3)
