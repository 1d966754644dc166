"""A lone sentence's whole beam search compiled as one graph (`--compile`, one sentence at a time).

A sentence searched alone (a request, an application's call) spends a quarter of its time outside
its compiled steps: the encoder eagerly, and Python choosing the beams, merging the finished
hypotheses and moving the histories, every step (benchmarks/detail/decode_speed.md). Here the whole
search is one AOTInductor graph: the encoder, the cross-attention keys and values, and the search's
loop (`while_loop`) of the model's own decoder layers and beam.py's `candidates`, kept on disk as the
steps are (`packages`), one per model and beam size.

A graph's loop carries tensors of fixed shapes, so the search here is beam.py's written for them:
- the K beams are K rows from the first step on (beam.py runs one until they fan out; the others
  start at -inf, so they are never chosen before they differ);
- each layer's keys and values fill buffers of a fixed width, and self-attention reads the filled
  positions only (a mask). The loop copies its buffers every step, so they are kept short (`room`);
  a search that outgrows them is searched again in its whole width. When beams take over others'
  hypotheses, their buffers' rows are copied too;
- the live token histories are (K, width), the finished hypotheses K of the same width, merged
  with each step's finished candidates whether any ended or not (`Finished.add`'s maths, no branch);
- the loop ends when K hypotheses are finished or the sentence reaches its length limit, as
  beam.py's does; the length penalty of each length comes in as a table (`penalties`), computed as
  beam.py computes it, so the graph holds no setting of the search but its beam size;
- the rule that no n-gram occurs twice (`no_repeat_ngram_size`, repetition.py) bans tokens from the
  histories' buffers, whose positions past the step's are left out: a graph per n.
Its results are beam.py's, in another order of floating-point operations (as the compiled steps';
the width of the buffers changes that order too).
Not here: batches, constraints and prefixes, a watcher, sampling, the repetition penalty, relative
positions (their self-attention reads its positions from the keys' length), int8 models (faster on
their steps): those search with the steps.

Shapes: K beams, S source length, C the graph's width (`room`, or less: bos, at most the limit's
tokens, eos), V vocabulary, H heads, d d_k, D d_model.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn
from torch._higher_order_ops import while_loop
from torch.export import Dim

from aiayn.decoding import kernels, packages, step_graph
from aiayn.decoding.beam import NEG_INF, _penalty, candidates
from aiayn.decoding.cache import compiling, store
from aiayn.decoding.cache.verdict import Unloadable
from aiayn.decoding.repetition import Repetition
from aiayn.decoding.steps import Hypothesis, output_tokens
from aiayn.decoding.tracing import gate
from aiayn.model import Transformer
from aiayn.model.masks import padding_mask

OUTPUT = "whole-beam"  # `store.Kind.output` of the graph: a lone sentence's whole beam search


def takes(model: Transformer, src: Tensor, beam_size: int, limits: Tensor) -> bool:
    """Whether the whole search as one graph serves this search: one sentence (B = 1) of 2 to
    `compiling.LARGEST` tokens and a width (its limit (1,) + 2) within it too, beam search, on a CPU,
    a model with absolute positions and float weights whose search compiled. An int8 model's lone
    sentences are faster on its compiled steps (13.1-14.7 against 16.7-17.4 ms a sentence,
    benchmarks/detail/decode_speed.md). Nor where packed weights are faster at its rows on this machine
    (`kernels`): its graph runs plain products (Inductor packs none inside its loop), the steps pack."""
    return (src.size(0) == 1 and 2 <= src.size(1) <= compiling.LARGEST and beam_size > 1
            and src.device.type == "cpu" and not model.config.relative_positions and model not in _refused
            and not _int8(model)
            and int(limits[0]) + 2 <= compiling.LARGEST  # read last: a batch's searches never need them
            and not kernels.packed(model, beam_size))


def _int8(model: Transformer) -> bool:
    """Whether the model's linear maps hold int8 weights (`inference.quantize_int8`)."""
    if model not in _int8_models:
        _int8_models[model] = any(b.dtype == torch.int8 for b in model.buffers())
    return _int8_models[model]


def search(model: Transformer, src: Tensor, limit: int, beam_size: int, nbest: int, alpha: float,
           penalty: str, start: int, ngram: int = 0) -> list[list[Hypothesis]] | None:
    """beam.beam_search of one sentence src (1, S), of at most `limit` output tokens, by the graph
    (`takes` says which): the `nbest` best hypotheses, best first; None where the model's search does
    not export or compile as one graph (said once: the caller then searches on the compiled steps).
    `ngram`: no n-gram of this many tokens twice in a hypothesis (repetition.py; 0: off).
    The search runs in `room` positions, and again in its whole width if it outgrows them."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest={nbest} must be between 1 and the beam size {beam_size}")
    c, full, graph = model.config, limit + 2, _graph(model, ngram)
    scores = torch.full((beam_size,), NEG_INF, device=src.device)
    scores[0] = 0.0
    for width in sorted({min(full, room(src.size(1))), full}):
        with gate.running():  # the model's attributes are read through `nn.Module.__getattr__`; the
            table = model.positions(max(width - 1, src.size(1)), 0,  # loop reads positions < width - 1
                                    model.tgt_embed.weight.dtype, src.device)
        inputs = (src, table, _penalties(width, alpha, penalty), scores, torch.tensor(limit),
                  torch.tensor(start))
        loaded = _kind(graph.module, inputs) in graph.kinds()  # then an error is a bug, not a refusal
        try:
            *found, done = graph(*inputs)
        except (Unloadable, packages.NotCompiledYet):  # the caller searches eagerly (for now)
            raise
        except Exception as e:  # a model whose search does not export or compile as one graph
            if loaded:
                raise
            _refused[model] = True
            store.notice(f"aiayn: the whole search of one sentence did not compile ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}); searching with compiled steps")
            return None
        if done:
            break
    best = []
    for s, lp, row in zip(*(t.tolist() for t in found), strict=True):
        if s > NEG_INF and len(best) < nbest:
            best.append(Hypothesis(output_tokens(row[1:], c.eos_id, c.pad_id), s, lp))
    return [best]


def room(source_length: int) -> int:
    """The positions (bos included) that the graph's buffers hold at first for a source of this
    length (eos included): a search's whole width (the limit's tokens, by default 50 more than the
    source's) is mostly never reached, and the loop copies its buffers every step, so they are cut to
    twice the source and 8 more. Of test_2016_flickr's 1,000 sentences (quickstart model, beam 4),
    13 outgrow them and are searched again in their whole width; the others' searches take a
    fifteenth less time."""
    return 2 * source_length + 8


@functools.lru_cache(maxsize=64)
def _penalties(width: int, alpha: float, form: str) -> Tensor:
    """(C,): the length penalty dividing a hypothesis finished at each position, as beam.py's."""
    return torch.tensor([_penalty(p + 1, alpha, form) for p in range(width)], dtype=torch.float32)


class WholeBeam(nn.Module):
    """The traced search. The model is a submodule, so that freezing sees its weights as constants."""

    def __init__(self, model: Transformer, ngram: int = 0) -> None:
        super().__init__()
        self.model, self.rule = model, Repetition(ngram=ngram)
        self.output = OUTPUT + (f"-no-repeat-{ngram}" if ngram else "")

    def forward(self, src: Tensor, table: Tensor, penalties: Tensor, scores: Tensor, limit: Tensor,
                start: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """src (1, S); position encodings (max(C, S), D); penalties (C,); the beams' first scores (K,):
        0 and -inf; limit (): most output tokens; start (): the decoder's first token
        -> the K best finished hypotheses, best first: scores (K,), log-probabilities (K,), tokens
        (K, C) from the start token to eos, padded (score -inf: none); and () whether the search
        ended (K finished, or the limit reached), not stopped at the C positions it had."""
        m, c = self.model, self.model.config
        k, width, v = scores.size(0), penalties.size(0), c.vocab_size
        mask = padding_mask(src, c.pad_id)  # (1, 1, 1, S)
        x = m.embed(src, m.src_embed, encodings=table[:src.size(1)])  # (1, S, D)
        memory = m.encoder(x, mask, False, None)[0]  # a lone sentence has no padding to leave out
        cross = [tuple(t.clone() for t in layer.cross_attn.project_kv(memory))  # (1, H, S, d) each;
                 for layer in m.decoder.layers]  # not views of one tensor: a loop's inputs may not alias
        # Tensors the loop reads, made outside it (its body may make no constants).
        positions = torch.arange(width, device=src.device)  # (C,)
        only_eos = torch.full((v,), NEG_INF, device=src.device).index_fill(
            0, torch.tensor([c.eos_id], device=src.device), 0.0)  # (V,): added at the length limit
        never = torch.zeros(v, dtype=torch.bool, device=src.device).index_fill(
            0, torch.tensor([c.pad_id, c.bos_id], device=src.device), True)  # (V,): never an output
        eos, pad = torch.full_like(positions, c.eos_id), torch.full_like(positions, c.pad_id)
        n = len(m.decoder.layers)

        def go_on(i: Tensor, done: Tensor, *_: Tensor) -> Tensor:
            return ~done & (i < width - 1)

        def step(i: Tensor, done: Tensor, live: Tensor, last: Tensor, tokens: Tensor, final: Tensor,
                 final_lp: Tensor, final_tokens: Tensor, *kv: Tensor) -> tuple[Tensor, ...]:
            slots = _Slots([_Slot(kv[j], kv[n + j], i) for j in range(n)])
            position = table.index_select(0, i.reshape(1))  # (1, D)
            x = m.embed(last[:, None], m.tgt_embed, encodings=position)  # (K, 1, D)
            filled = (positions <= i)[None, None, None, :]  # (1, 1, 1, C): the positions written
            hidden, _ = m.decoder(x, filled, cross, mask, slots, need_weights=True)  # (K, 1, D)
            log_probs = m.logits(hidden)[:, -1].float().log_softmax(-1).masked_fill(never, NEG_INF)  # (K, V)
            log_probs = self.rule.ban(log_probs, tokens, length=i + 1, first=1)  # no n-gram twice
            at_limit = (i >= limit).reshape(1)
            cand_scores, cand_beams, _, ended, _, live, beams, new = candidates(
                log_probs, live, at_limit, only_eos)  # (1, 2K) x 3, (1, K) x 5
            at_next = positions == i + 1  # (C,): where this step's tokens go
            final, final_lp, final_tokens = _finish(
                (final, final_lp, final_tokens), cand_scores[0, :k], cand_beams[0, :k], ended[0], tokens,
                penalties.index_select(0, i.reshape(1)), at_next, eos)
            tokens = torch.where(at_next, new[0, :, None], tokens.index_select(0, beams[0]))  # (K, C)
            keys = [s.k.index_select(0, beams[0]) for s in slots.self_attn]  # each beam's history
            values = [s.v.index_select(0, beams[0]) for s in slots.self_attn]
            done = (final[-1] > NEG_INF) | at_limit[0]  # K finished, or the limit reached
            carried = (i + 1, done, live, new[0], tokens, final, final_lp, final_tokens, *keys, *values)
            return tuple(t.clone() for t in carried)  # a loop's outputs may not alias its inputs

        history = torch.where(positions == 0, start, pad)  # (C,): the start token, then padding
        out = while_loop(go_on, step, _begin(scores, pad, history, memory, c.n_heads, n))
        return out[5], out[6], out[7], out[1]


def _finish(finished: tuple[Tensor, Tensor, Tensor], scores: Tensor, beams: Tensor, ended: Tensor,
            tokens: Tensor, penalty: Tensor, at_next: Tensor, eos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """beam.py's `Finished.add`, without a branch: the first K candidates (their log-probabilities
    `scores` (K,), the live hypotheses `beams` (K,) they extend, of `tokens` (K, C)) that `ended` (K,)
    in eos, divided by the length `penalty` (1,), merged with the K `finished` ones (scores,
    log-probabilities (K,) and tokens (K, C), best first); as they were where none ended. `at_next`
    (C,): where this step's token goes; `eos` (C,): eos everywhere."""
    final, final_lp, final_tokens = finished
    k = final.size(0)
    ended_scores = torch.where(ended, scores / penalty, NEG_INF)  # (K,)
    ending = torch.where(at_next, eos, tokens.index_select(0, beams))  # (K, C)
    merged, order = torch.cat([final, ended_scores]).topk(k)  # (K,)
    merging = ended.any()
    return (torch.where(merging, merged, final),
            torch.where(merging, torch.cat([final_lp, scores])[order], final_lp),
            torch.where(merging, torch.cat([final_tokens, ending])[order], final_tokens))


def _begin(scores: Tensor, pad: Tensor, history: Tensor, memory: Tensor, heads: int, layers: int
           ) -> tuple[Tensor, ...]:
    """What the loop carries at first, given the beams' first scores (K,), padding (C,) and a
    history (C,) of the start token then padding: the position (0), done (False), the live scores
    (1, K) and last tokens (K,), the live histories (K, C), the finished hypotheses' scores,
    log-probabilities (K,: none) and tokens (K, C: padding), each layer's keys, then values (K, H, C, d)."""
    k, (width,), device = scores.size(0), pad.shape, memory.device
    d_k = memory.size(-1) // heads
    return (torch.zeros((), dtype=torch.long, device=device),
            torch.zeros((), dtype=torch.bool, device=device), scores[None].clone(),
            history[:1].expand(k).clone(), history.expand(k, -1).clone(),
            torch.full((k,), NEG_INF, device=device), torch.full((k,), NEG_INF, device=device),
            pad.expand(k, -1).clone(), *[memory.new_zeros(k, heads, width, d_k) for _ in range(2 * layers)])


@dataclass
class _Slot:
    """One layer's history as the loop carries it: `append` returns new full-width buffers."""

    k: Tensor  # (K, H, C, d)
    v: Tensor
    i: Tensor  # () the position written

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:  # (K, H, 1, d) each
        at = self.i.reshape(1)
        self.k, self.v = self.k.index_copy(2, at, k), self.v.index_copy(2, at, v)
        return self.k, self.v


@dataclass
class _Slots:
    self_attn: list[_Slot]  # what `Decoder.forward` reads of a cache


_graphs: WeakKeyDictionary[Transformer, dict[int, tuple[tuple[int, ...], packages.Packages]]] = \
    WeakKeyDictionary()  # by the n-gram rule's n
_refused: WeakKeyDictionary[Transformer, bool] = WeakKeyDictionary()  # whose search did not compile
_int8_models: WeakKeyDictionary[Transformer, bool] = WeakKeyDictionary()  # `_int8`'s answers


def graphs(model: Transformer) -> list[store.Kind]:
    """The whole searches this process holds for the model's current weights (one per beam size and
    n-gram rule)."""
    return [kind for _, graph in _graphs.get(model, {}).values() for kind in graph.kinds()]


def _graph(model: Transformer, ngram: int = 0) -> packages.Packages:
    """The model's whole search under the n-gram rule of `ngram` (0: none), compiled for its current
    weights (anew once they change in place, as the steps are), sharing the loaded weights with its
    compiled steps."""
    with gate.running():
        versions = step_graph.weight_versions(model)
    graphs = _graphs.setdefault(model, {})
    known = graphs.get(ngram)
    if known is None or known[0] != versions:
        known = graphs[ngram] = (versions, packages.Packages(
            WholeBeam(model, ngram), _kind, _dynamic_shapes,
            weights=step_graph.weights_loaded(model, versions), example=_example))
    return known[1]


def _kind(module: WholeBeam, inputs: tuple) -> store.Kind:
    """One graph per beam size (the scores' length) and n-gram rule, its weights plain (a few rows)."""
    k = inputs[3].size(0)
    return store.Kind(k, module.output, traced=False, beams=k, packed=False)


def _example(module: WholeBeam, kind: store.Kind, inputs: tuple) -> tuple:
    """Inputs to export from: a source length and width that no other size has (export might take two
    equal sizes for one), the call's values otherwise."""
    src, table, penalties, scores, limit, start = inputs
    c = module.model.config
    taken = {1, scores.size(0), c.d_model, c.n_heads, c.d_model // c.n_heads, c.vocab_size}
    length = next(n for n in itertools.count(3) if n not in taken)
    width = next(n for n in itertools.count(length + 1) if n not in taken)
    return (src.new_full((1, length), c.eos_id), table.new_zeros(width, table.size(1)),
            penalties.new_ones(width), scores, limit.new_tensor(width - 2), start)


def _dynamic_shapes(inputs: tuple) -> tuple:
    """The source length and the width (positions of the table and the penalties: export ties them),
    dynamic from 2 to `compiling.LARGEST`; the beams static."""
    source, table, width = (Dim.DYNAMIC(min=2, max=compiling.LARGEST) for _ in range(3))
    return ({1: source}, {0: table}, {0: width}, None, None, None)
