"""The compiled decoder step's graph (decoding/compiled.py runs it): the traced step (`_Step`: the
model's own layers over the cache's buffers, read through a table of ancestors in beam search), the
row counts it is compiled for (`row_bucket`), its kinds and dynamic shapes, and the packages that
hold it on disk, compiled anew when the weights change (`packages_for`).

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
from aiayn.decoding.steps import Score, log_probs, logits_and_normaliser
from aiayn.decoding.tracing import gate
from aiayn.model import Transformer

ANY_COUNT_FROM = 8  # rows from which one compiled step takes every row count (`any_rows`); below, steps
# of fixed rows, their weights packed or plain as timed on the machine (`kernels`)
FEWEST_ROWS = 2  # a compiled step runs at, at least: the rows of the cache's buffers are a dynamic
# dimension of the step, which export cannot take one long. A beam search's last sentence steps on
# alone at K rows (faster than at 2K: benchmarks/detail/decode_speed.md)


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


def packages_for(model: Transformer, output: Output, versions: tuple[int, ...]) -> packages.Packages:
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
    vocabulary's differs), hypotheses' tokens those of three dimensions (`_arg_like`). Positions,
    source and the cache's capacity are made short, of lengths that no other size has (export might
    take two equal sizes for one)."""
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
            *[_arg_like(a, like, sentences, r, positions, old) for a in args])


def _arg_like(arg: Any, like: Callable, sentences: int, r: int, positions: int, old: int) -> Any:
    """A score function's input for `_with_rows`: hypotheses' tokens (three dimensions: B/R, R, L) for
    its sentences, rows and positions, another input of a row per sentence for its sentences, others
    as they are."""
    if isinstance(arg, Tensor) and arg.dim() == 3:
        return like(arg, sentences, r, positions)
    return like(arg, sentences, *arg.shape[1:]) if isinstance(arg, Tensor) and arg.dim() and \
        arg.size(0) == old else arg


def _dynamic_shapes(inputs: tuple) -> tuple:
    """The step's inputs' dynamic dimensions, for `torch.export`: rows static, but on the step for
    every row count (`_takes_any_count`), where the sentences are a named dimension and the rows R
    times them (a score function's inputs of a row per sentence follow, and hypotheses' tokens
    (B/R, R, L) have the step's positions; the others are static);
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
    def arg_dims(a: Any) -> dict[int, Any] | None:  # a score function's input: of a row per sentence,
        if not isinstance(a, Tensor) or not a.dim():  # and hypotheses' tokens (B/R, R, L) of L positions
            return None
        return dims(a0=sentences if a.size(0) == s else None, a2=n if a.dim() == 3 else None)

    return (*shapes, tuple(arg_dims(a) for a in args))  # *args: one element, a tuple

