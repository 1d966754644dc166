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
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn
from torch.export import Dim

from aiayn.decoding import kernels, packages
from aiayn.decoding.cache import compiling, store
from aiayn.decoding.steps import (
    LEAVE_AT,
    Score,
    Step,
    log_probs,
    logits_and_normaliser,
    next_log_probs,
    next_logits,
)
from aiayn.decoding.tracing import gate
from aiayn.model import DecoderCache, Transformer
from aiayn.model.masks import padding_mask

ANY_COUNT_FROM = 8  # rows from which one compiled step takes every row count (`any_rows`); below, steps
# of fixed rows, their weights packed or plain as timed on the machine (`kernels`)
FIRST_STEP_ROWS = 2  # rows up to which a search's first step is compiled too (see the module's text)
FEWEST_ROWS = 2  # a compiled step runs at, at least: the rows of the cache's buffers are a dynamic
# dimension of the step, which export cannot take one long. A beam search's last sentence steps on
# alone at K rows (faster than at 2K: benchmarks/detail/decode_speed.md)


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
            step = _compiled(self.model, output, self._versions)
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


def row_bucket(sentences: int, rows_per_sentence: int = 1) -> int:
    """How many sentences a compiled step runs at for this many (times the rows of each sentence: the
    step's row count): as many, from `ANY_COUNT_FROM` rows on (one step takes every count
    there, `any_rows`); below, the next power of two, enough for `FEWEST_ROWS` rows (a step of its own
    each: a lone sentence's)."""
    least = any_rows(rows_per_sentence)
    if sentences >= least:
        return sentences
    fewest = -(-FEWEST_ROWS // rows_per_sentence)
    return min(least, max(fewest, 1 << max(sentences - 1, 0).bit_length()))


def any_rows(rows_per_sentence: int = 1) -> int:
    """The sentences from which one compiled step takes any count: `ANY_COUNT_FROM` rows."""
    return -(-ANY_COUNT_FROM // rows_per_sentence)


def row_buckets(most: int) -> list[int]:
    """A count of sentences for each compiled step a batch of up to `most` sentences starts at (a beam
    search's batch may then shrink to one sentence): the small counts, and one from `any_rows` on."""
    return sorted({min(row_bucket(n), any_rows()) for n in range(1, most + 1)})


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


Output = str | Score  # what a compiled step returns: "logits" (and their normaliser), "log_probs",
# or what a score function makes of the log-probabilities (`Step.scored`)


class _Step(nn.Module):
    """The traced step. The model is a submodule, so that freezing sees its weights as constants."""

    def __init__(self, model: Transformer, output: Output) -> None:
        super().__init__()
        self.model, self.output = model, output
        self.output_name = output if isinstance(output, str) else f"{output.__module__}.{output.__qualname__}"

    def forward(self, last_tokens: Tensor, table: Tensor, keys: list[Tensor], values: list[Tensor],
                ancestors: Tensor | None, cross_attn: list[tuple[Tensor, Tensor]], memory_mask: Tensor,
                *args: Tensor) -> Any:
        """tokens (B,), position table (L, D), per layer the cache buffers (B, C, H, K), the rows
        holding each row's history (B, C) or None, per layer the cross-attention keys and values
        (B/R, H, S, K), mask (B/R, 1, 1, S), a score function's other inputs
        -> logits (B, V) and their logsumexp (B, 1), log-probabilities (B, V), or what the score
        function makes of them."""
        m, n = self.model, table.size(0)
        x = m.embed(last_tokens[:, None], m.tgt_embed, encodings=table[n - 1:n])  # (B, 1, D)
        if ancestors is not None:  # (B, n), (n,): where each position of each history lies
            ancestors = ancestors[:, :n], torch.arange(n, device=ancestors.device)
        slots = _Slots([_Slot(k, v, n, ancestors) for k, v in zip(keys, values, strict=True)])
        # attention as the reference (asking for its weights): see the module's text
        hidden, _ = m.decoder(x, None, cross_attn, memory_mask, slots, need_weights=True)  # (B, 1, D)
        if self.output == "logits":
            return logits_and_normaliser(m, hidden)
        scores = log_probs(m, hidden)  # (B, V)
        return scores if self.output == "log_probs" else self.output(scores, *args)


@dataclass
class _Slot:
    """One layer's cache buffers as the traced step sees them: `append` writes position n - 1."""

    k: Tensor  # (B, C, H, K)
    v: Tensor
    n: int  # positions filled after this step (a symbolic size when traced)
    ancestors: tuple[Tensor, Tensor] | None  # rows (B, n) and positions (n,) of each history

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """(B, H, 1, K) new keys and values -> each row's history of n positions, each (B, H, n, K):
        its own filled positions, or those its `ancestors` name (read where attention reads them:
        Inductor fuses the gather into the attention kernel). Row i writes in buffer row i: with
        ancestors, the buffers may have more rows than the step (`TracedCache.select`)."""
        b = k.size(0)
        self.k[:b, self.n - 1:self.n] = k.transpose(1, 2)
        self.v[:b, self.n - 1:self.n] = v.transpose(1, 2)
        if self.ancestors is None:
            return self.k[:b, :self.n].transpose(1, 2), self.v[:b, :self.n].transpose(1, 2)
        return self.k[self.ancestors].transpose(1, 2), self.v[self.ancestors].transpose(1, 2)


@dataclass
class _Slots:
    self_attn: list[_Slot]  # what `Decoder.forward` reads of a cache


_steps: WeakKeyDictionary[Transformer, dict[Output, tuple[tuple[int, ...], packages.Packages]]] = \
    WeakKeyDictionary()


def _compiled(model: Transformer, output: Output, versions: tuple[int, ...]) -> packages.Packages:
    """The model's compiled step, kept on disk (`packages`). A package holds the weights as they were
    when it was compiled: once a weight has changed in place (its `versions`, `weight_versions`), the step
    is compiled anew (an entry of its own, keyed by the new weights)."""
    steps = _steps.setdefault(model, {})
    known = steps.get(output)
    if known is None or known[0] != versions:
        known = steps[output] = (versions, packages.Packages(
            _Step(model, output), _kind, _dynamic_shapes, weights=weights_loaded(model, versions),
            ahead=_ahead, example=_example))
    return known[1]


_weights: WeakKeyDictionary[Transformer, tuple[tuple[int, ...], dict]] = WeakKeyDictionary()


def weights_loaded(model: Transformer, versions: tuple[int, ...]) -> dict:
    """The table of the weights loaded with the compiled graphs of these weights of the model (its
    steps, greedy's and beam search's alike, and its whole search, `whole`): they share it, so that
    they keep one copy of the weights between them (`Packages._share`)."""
    known = _weights.get(model)
    if known is None or known[0] != versions:
        known = _weights[model] = (versions, {})
    return known[1]


def weight_versions(module: nn.Module) -> tuple[int, ...]:
    """The version counter of every parameter (each in-place change bumps it), a shared one once per
    module that holds it. A walk of the module tree: `module.parameters()` cost a third of a
    millisecond per search, a search of one sentence a hundredth of its time."""
    versions: list[int] = []
    stack = [module]
    while stack:
        m = stack.pop()
        versions.extend(p._version for p in m._parameters.values() if p is not None)
        stack.extend(child for child in m._modules.values() if child is not None)
    return tuple(versions)


def compiled_before(model: Transformer) -> bool:
    """Whether the cache holds a step compiled for this model (its weights, dtype and device) on this
    machine: translation then uses the compiled step without being asked (`translation.prepare`)."""
    if not store.entries():  # the common case, without hashing the weights
        return False
    with gate.running():  # the weights read as they are, not as another thread's export fakes them
        table = model.tgt_embed.weight  # the step's activations, and so its cache, are in its dtype
        weights = store.weights_digest(_Step(model, "log_probs"))
    return store.stored(weights, table.dtype, table.device)


def graphs(model: Transformer) -> list[store.Kind]:
    """The compiled steps this process holds for the model's current weights."""
    return [kind for _, step in _steps.get(model, {}).values() for kind in step.kinds()]


def _kind(step: _Step, inputs: tuple) -> store.Kind:
    """The graph that `step`'s inputs run on: their rows, whether they trace histories (beam search),
    whether it is a search's first step (one position), and a score function's beam size (its
    scores (B/K, K))."""
    last_tokens, table, _, _, ancestors, _, _, *args = inputs
    scores = args[0] if args else None
    beams = scores.size(1) if isinstance(scores, Tensor) and scores.dim() == 2 else 0
    rows, first = last_tokens.size(0), table.size(0) == 1
    rows = 0 if _takes_any_count(rows, first) else rows
    return store.Kind(rows, step.output_name, ancestors is not None, first, beams, _packed(step.model, rows))


def _packed(model: Transformer, rows: int) -> bool:
    """Whether a step of `rows` rows (0: any count) packs its weights for oneDNN (`store.Kind.packed`)
    or runs plain matmuls: whichever `kernels.packed` timed faster on this machine."""
    return kernels.packed(model, rows)


def _takes_any_count(rows: int, first: bool) -> bool:
    """Whether a step of `rows` rows runs on the step for every row count (`Kind.rows` 0): not a
    search's first (its rows are few, and fixed per package)."""
    return not first and rows >= ANY_COUNT_FROM


def _example(step: _Step, kind: store.Kind, inputs: tuple) -> tuple:
    """The inputs to export `kind` from: a step for every row count, from inputs of a count no other
    size has (`_with_rows`: export might take two equal sizes for one); another, the call's own."""
    if kind.rows:
        return inputs
    r = inputs[0].size(0) // inputs[5][0][0].size(0)  # rows / sentences
    return _with_rows(inputs, _example_count(step, r), r, kind.traced)


def _example_count(step: _Step, r: int) -> int:
    """The sentences of example inputs for the step that takes any count of `r` rows each: in its
    range, and none of the sizes the inputs have besides (the beams, the vocabulary)."""
    return next(n for n in itertools.count(any_rows(r) + 1) if n not in (r, step.model.config.vocab_size))


def _ahead(step: _Step, kind: store.Kind, inputs: tuple) -> list[tuple[store.Kind, Callable]]:
    """The steps a search running `kind` reaches as its sentences finish: the same step at each smaller
    `row_bucket`, each with a function making example inputs of its rows (`_with_rows`). After a
    search's first step (one or two sentences, one row each), the later steps of one and of two
    sentences, a beam search's beams fanned out. None where a score function's input cannot be told
    by its rows."""
    sentences, args = inputs[5][0][0].size(0), inputs[7:]  # the cross-attention keys' rows: (B/R, ...)
    if any(not isinstance(a, Tensor) or a.dim() and a.size(0) == sentences == step.model.config.vocab_size
           for a in args):
        return []
    if kind.first:  # R after it: a beam search's K beams (traced), or greedy decoding's one row
        later, r = replace(kind, first=False, traced=kind.beams > 0), max(kind.beams, 1)
        counts = {row_bucket(n, r) for n in range(1, sentences + 1)}
    else:
        later, r = kind, inputs[0].size(0) // sentences
        counts = {row_bucket(n, r) for n in range(1, sentences)} - {sentences}
    least = any_rows(r)  # one step for all the counts from it on, exported from inputs of another count
    counts = {min(n, least) for n in counts} - ({least} if not kind.first and not kind.rows else set())
    example = {n: _example_count(step, r) if n == least else n for n in counts}
    rows = {n: 0 if n == least else n * r for n in counts}
    return [(replace(later, rows=rows[n], packed=_packed(step.model, rows[n])),
             functools.partial(_with_rows, inputs, example[n], r, later.traced))
            for n in sorted(counts, reverse=True)]


def _with_rows(inputs: tuple, sentences: int, r: int, traced: bool) -> tuple:
    """Example inputs of a later step for `sentences` x `r` rows, shaped as another step's `inputs` (a
    first step's too: its one position becomes several, and with `traced`, the rows get a table of
    where their histories lie); their values unset: export traces shapes. A score function's inputs
    of a row per sentence are those whose first size is the sentences' (`_ahead` made sure the
    vocabulary's differs). Positions, source and the cache's capacity are made short, of lengths
    that no other size has (export might take two equal sizes for one)."""
    last_tokens, table, keys, values, _, cross_attn, mask, *args = inputs
    b, old, taken = sentences * r, cross_attn[0][0].size(0), {sentences * r, sentences}
    positions = table.size(0) if table.size(0) > 1 else next(n for n in itertools.count(2) if n not in taken)
    source = next(n for n in itertools.count(2) if n not in taken | {positions})
    capacity = next(n for n in itertools.count(positions + 1) if n not in taken | {source})

    def like(x: Tensor, *shape: int, dtype: torch.dtype | None = None) -> Tensor:
        return torch.empty(shape, dtype=dtype or x.dtype, device=x.device)

    def cross(x: Tensor) -> Tensor:  # (B/R, H, S, K)
        return like(x, sentences, x.size(1), source, x.size(3))

    return (like(last_tokens, b), like(table, positions, table.size(1)),
            [like(k, b, capacity, *k.shape[2:]) for k in keys],
            [like(v, b, capacity, *v.shape[2:]) for v in values],
            like(last_tokens, b, capacity, dtype=torch.long) if traced else None,  # (B, C)
            [(cross(k), cross(v)) for k, v in cross_attn],
            like(mask, sentences, 1, 1, source),
            *[like(a, sentences, *a.shape[1:]) if a.dim() and a.size(0) == old else a for a in args])


def _dynamic_shapes(inputs: tuple) -> tuple:
    """The step's inputs' dynamic dimensions, for `torch.export`: rows static, but on the step for
    every row count (`_takes_any_count`), where the sentences are a named dimension and the rows R
    times them (a score function's inputs of a row per sentence follow; the others are static);
    positions decoded (static at a search's first step: one), cache capacity and source length
    dynamic (from 2 to `compiling.LARGEST`). Those are hints, not named dimensions: export works out
    which are equal, and keeps as checks the conditions it cannot prove for every size in the range
    (torch 2.11 cannot prove min(4 S, 16 S) = 4 S, and refuses a named dimension for it)."""
    last_tokens, table, keys, values, ancestors, cross_attn, memory_mask, *args = inputs
    # One hint for every dynamic dimension: unlike a named dimension, a hint ties no two together.
    positions = capacity = source = buffers = Dim.DYNAMIC(min=2, max=compiling.LARGEST)
    n = Dim.STATIC if table.size(0) == 1 else positions
    cache = {0: buffers, 1: capacity}  # the buffers' rows: the step's, or more (`TracedCache.select`)
    rows = sentences = None  # static; or R (a beam search's K beams, greedy's one row) x the sentences
    b, s = last_tokens.size(0), cross_attn[0][0].size(0)
    if _takes_any_count(b, table.size(0) == 1):
        r = b // s
        sentences = Dim("sentences", min=any_rows(r), max=compiling.LARGEST // r)
        rows = sentences * r if r > 1 else sentences

    def dims(**by_axis: Any) -> dict[int, Any] | None:  # {axis: dimension}, the static ones left out
        return {int(axis[1:]): d for axis, d in by_axis.items() if d is not None} or None

    cross = dims(a0=sentences, a2=source)
    shapes = (dims(a0=rows), {0: n}, [cache] * len(keys), [cache] * len(values),
              None if ancestors is None else dims(a0=rows, a1=capacity), [(cross, cross)] * len(cross_attn),
              dims(a0=sentences, a3=source))
    if not args:
        return shapes
    per_sentence = [dims(a0=sentences) if isinstance(a, Tensor) and a.dim() and a.size(0) == s else None
                    for a in args]  # a score function's inputs of a row per sentence
    return (*shapes, tuple(per_sentence))  # *args: one element, a tuple
