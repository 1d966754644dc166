"""A compiled decoder step for greedy decoding, sampling and beam search (`--compile`):
`CompiledStep`, which the searches take in place of the model's own `steps.Step`.

In eager PyTorch, a small model's decoder step is mostly spent dispatching about a hundred small
operations one after another. TorchInductor compiles the whole step (embedding, every decoder
layer, the output layer and the normalisation) into a few fused kernels, with the weights folded
in as constants ("freezing") and, for batches of `ANY_COUNT_FROM` rows or more, packed once for
oneDNN's matmul (benchmarks/detail/decode_speed.md has the measurements). It is compiled ahead of
time (torch.export and AOTInductor) and kept on disk, so a model is compiled once per machine
(`packages`).

A compiled graph is for fixed shapes, but for the dimensions it is told are dynamic. Here:
- from `ANY_COUNT_FROM` rows (8: two sentences of beam 4, eight of greedy decoding) one step
  takes every row count, the sentences a dynamic dimension and the rows R times them (`Kind.rows`
  0): a model's beam search compiles once for batches of any size, its step as fast as one
  compiled for each count, within the machine's noise (benchmarks/detail/decode_speed.md).
  Below, the rows are fixed per graph, at powers of two (`row_bucket`), of `FEWEST_ROWS` rows at
  least (one sentence of a beam search, two of greedy decoding); the searches top their batches up
  to such a count, and a batch's last sentences, searching on alone, run at these counts. Finished
  sentences leave once they are an eighth of the batch (as from the model's own step), or fit a
  smaller count;
- the number of positions decoded, the cache capacity and the source length are dynamic
  dimensions: one graph serves every step and every batch of its row count. The step reads
  the positions decoded so far from the length of the position table it is given, writes its
  keys and values into the cache's preallocated buffers, and attends over the filled positions
  only, as the eager step does;
- a search's first step (one position) runs eagerly, but for a search of one or two sentences
  (`FIRST_STEP_ROWS`, a request's): a graph of its own, since export cannot take a one-long
  dimension as a dynamic one. Eagerly such a first step costs what several compiled steps do, much
  of a lone sentence's search; in batches, a small part of their search, not worth a graph for each
  batch size (benchmarks/detail/decode_speed.md).
Attention is the model's written-out reference (`model.attention_reference`, asked for by
requesting the weights, which the graph then drops), so Inductor fuses it with the cache reads,
where the fused kernel would be an opaque call; and on a GPU, PyTorch picks the fused kernel by the
lengths (exported on CUDA, it made the graph refuse more than 127 positions or source tokens).
In beam search, a row's history stays where it was written: the cache traces which row holds
each position (`TracedCache`) and the step reads through that table, so beams that change rows
move no keys or values, nor do finished sentences that leave the batch (the buffers keep their
rows; their row count is a dynamic dimension of the step).
The layers are the model's own (`Decoder.forward`), so the step computes what
`steps.next_logits` and `steps.next_log_probs` do, in another order of floating-point
operations. The weights are read when a graph is compiled: if they change later (training goes
on), the step is compiled anew. The cross-attention keys and values must be laid out as when the
graph was compiled: the searches pass every batch through `top_up`, which makes them contiguous.

Shapes: B rows (sentences x R rows each), S source length, C cache capacity, L positions decoded
(this step's included), H heads, K d_k, D d_model, V vocabulary.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.decoding import packages
from aiayn.decoding.cache import compiling
from aiayn.decoding.step_graph import Output, packages_for, row_bucket, weight_versions
from aiayn.decoding.steps import LEAVE_AT, Score, Step, next_log_probs, next_logits
from aiayn.decoding.tracing import gate
from aiayn.model import DecoderCache, Transformer
from aiayn.model.masks import padding_mask

FIRST_STEP_ROWS = 2  # rows up to which a search's first step is compiled too (see the module's text)



class CompiledStep(Step):
    """The searches' decoder steps compiled (see the module's text); the same maths as `Step`, in
    another order of floating-point operations. Make one per search: it checks whether the model's
    weights changed since they were compiled."""

    def __init__(self, model: Transformer) -> None:
        super().__init__(model)
        with gate.running():  # an export on another thread puts fakes in the model's weights meanwhile
            self._versions = weight_versions(model)  # the weights this search runs with
        self._outputs: dict[Output, Callable] = {}

    def start(self, src: Tensor, max_lengths: Tensor, capacity: int) -> tuple[Tensor, Tensor, DecoderCache]:
        """As `Step.start`, with a cache of full capacity (the compiled step cannot grow one) that can
        trace its rows' histories, and the batch topped up to a count of sentences a compiled step
        runs at (`row_bucket`)."""
        with gate.running():
            cache = self.model.init_cache(self.model.encode(src), capacity=capacity)
        cache = TracedCache(cache.self_attn, cache.cross_attn, cache.rows_per_sentence)
        src, max_lengths = top_up(src, max_lengths, cache)
        return src, max_lengths, cache

    def logits(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> tuple[Tensor, Tensor]:
        return self._run("logits")(self.model, last_tokens, src, cache)

    def log_probs(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> Tensor:
        return self._run("log_probs")(self.model, last_tokens, src, cache)

    def scored(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache, score: Score,
               *args: Tensor) -> Any:
        """As `Step.scored`, with `score` compiled into the step's graph (beam search's candidates are
        then found in the pass that normalises the scores, not in a dozen operations after it)."""
        return self._run(score)(self.model, last_tokens, src, cache, *args)

    def _run(self, output: Output) -> Callable:
        """The step making `output`, compiled for the weights of this search, with its eager twin for
        the steps the graph does not take (`_run` there); made once per search and output."""
        run = self._outputs.get(output)
        if run is None:
            step = packages_for(self.model, output, self._versions)
            eager = {"logits": next_logits, "log_probs": next_log_probs}.get(output) or \
                functools.partial(_then, output)
            run = self._outputs[output] = functools.partial(_run, step, eager)
        return run

    def fan_out(self, cache: TracedCache, r: int) -> None:
        """As `Step.fan_out`; from then on the beams' histories stay where they are (`TracedCache`),
        unless the batch's sizes are beyond the compiled step (its steps then run eagerly, and the
        model's own step reads each row's history in its row)."""
        cache.fan_out(r)
        if _compiled_sizes(cache):
            cache.trace_ancestors()

    def rows_to_keep(self, done: Tensor, rows_per_sentence: int = 1) -> Tensor | None:
        """Finished sentences leave once they are 1/LEAVE_AT of the batch (as from the model's own
        step), or once the unfinished ones fit a smaller `row_bucket`, which finished ones top up (the
        unfinished first, in order)."""
        left = int((~done).sum())
        sentences = row_bucket(left, rows_per_sentence)
        if sentences >= len(done) or (sentences == left and (len(done) - left) * LEAVE_AT < len(done)):
            return None
        return done.int().argsort(stable=True)[:sentences]


@dataclass
class TracedCache(DecoderCache):
    """A decoder cache whose beams move no keys or values when they take over another's hypothesis.

    Once `trace_ancestors` is called, `ancestors` (B*R, capacity) names, for each row and position,
    the row whose buffers hold that position's keys and values (the same for every layer): `reorder`
    updates only that table. Only a step that reads histories through the table may use it: the
    compiled step does (`_Slot.append`); the model's own step (`Transformer.decode`) does not.
    """

    ancestors: Tensor | None = None
    mask: Tensor | None = None  # the source's padding mask (B/R, 1, 1, S), made once per source tensor
    mask_of: Tensor | None = None  # ... the source it was made for (`_run`)

    def trace_ancestors(self) -> None:
        """From now on, keep the table instead of moving keys and values: each row's own positions."""
        rows, capacity = self.self_attn[0].k.shape[:2]
        self.ancestors = torch.arange(rows, device=self.self_attn[0].k.device)[:, None].repeat(1, capacity)

    def reorder(self, rows: Tensor) -> None:
        if self.ancestors is None:
            return super().reorder(rows)
        n = self.length
        self.ancestors[:, :n] = self.ancestors[rows, :n]  # positions from n on stay the row's own

    def select(self, sentences: Tensor) -> None:
        """As `DecoderCache.select`; once the ancestors are traced, no keys or values move: the
        buffers keep their rows (more than the batch's from now on), the table names where the kept
        rows' histories lie, and kept row i writes its next positions in buffer row i, whose
        positions from the cache's length on nobody has written."""
        if self.ancestors is None:
            return super().select(sentences)
        rows = self.rows_of(sentences)  # (B'*R,)
        self.ancestors = self.ancestors[rows]  # (B'*R, C): buffer rows, as before
        self.ancestors[:, self.length:] = torch.arange(len(rows), device=rows.device)[:, None]
        self.select_sentences(sentences)


def top_up(src: Tensor, max_lengths: Tensor, cache: DecoderCache) -> tuple[Tensor, Tensor]:
    """A new batch topped up to a count of sentences a compiled step runs at (`row_bucket`) with
    copies of its first, which may output nothing (maximum length 0): (B, S) source, (B,) maximum
    lengths -> the same for B' >= B. The cache follows; its `select` also lays the cross-attention
    keys and values out contiguously, as every batch of a compiled step must have them."""
    n = src.size(0)
    rows = torch.cat([torch.arange(n, device=src.device), src.new_zeros(row_bucket(n) - n)])  # (B',)
    cache.select(rows)
    return src[rows], torch.cat([max_lengths, max_lengths.new_zeros(len(rows) - n)])


def _then(score: Score, model: Transformer, last_tokens: Tensor, src: Tensor, cache: DecoderCache,
          *args: Tensor) -> Any:
    """`Step.scored`'s eager step."""
    return score(next_log_probs(model, last_tokens, src, cache), *args)


def _run(step: packages.Packages, eager: Callable, model: Transformer, last_tokens: Tensor, src: Tensor,
         cache: TracedCache, *args: Tensor):
    """One step after `last_tokens` (B,), given the step's other inputs `args`: compiled, or eager
    for sizes beyond what the compiled step takes (`_compiled_sizes`) and for a first step of more
    than `FIRST_STEP_ROWS` rows."""
    layers = cache.self_attn
    position, capacity = layers[0].length, layers[0].k.size(1)
    if not _compiled_sizes(cache) or (position == 0 and len(last_tokens) > FIRST_STEP_ROWS):
        with gate.running():
            return eager(model, last_tokens, src, cache, *args)
    if position >= capacity:
        raise ValueError(f"the cache holds {capacity} positions; the compiled step cannot grow it")
    with gate.running():  # the model's attributes are read through `nn.Module.__getattr__`
        table = model.positions(position + 1, 0, layers[0].k.dtype, layers[0].k.device)  # (L, D)
    if cache.mask_of is not src:  # the same source every step, until sentences leave the batch
        cache.mask, cache.mask_of = padding_mask(src, model.config.pad_id), src
    # not gated: it may compile (`tracing`); a compiled step's call is no module call
    out = step(last_tokens.contiguous(), table, [kv.k for kv in layers], [kv.v for kv in layers],
               cache.ancestors, cache.cross_attn, cache.mask, *args)
    for kv in layers:
        kv.length += 1
    return out


def _compiled_sizes(cache: DecoderCache) -> bool:
    """Whether the compiled step takes a batch with this cache: its buffers' rows, its capacity and
    the source length from 2 to `compiling.LARGEST` (`_dynamic_shapes`)."""
    (rows, capacity), source = cache.self_attn[0].k.shape[:2], cache.cross_attn[0][0].size(2)
    return 2 <= source and max(rows, capacity, source) <= compiling.LARGEST
