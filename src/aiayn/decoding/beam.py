"""Beam search over a whole batch of sentences (section 6.1: beam size 4, length penalty 0.6).

Every sentence keeps K live hypotheses. One step expands each by every token and keeps the 2K
best candidates (`candidates`, `beam_step`). Candidates that end in eos and rank among the first
K become finished hypotheses, scored with the length penalty; the best K others stay live
(`choose`; a compiled step does all this in its own graph). A sentence is done when it has K
finished hypotheses (as in fairseq and Marian) or reaches its maximum length, where eos is forced.
Done sentences leave the batch, so the work shrinks as they end; the loop stops when none is left.

Shapes: B sentences, K beam size, V vocabulary, L tokens so far (bos included), S source length.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.decoding.constrained import Constraints
from aiayn.decoding.repetition import OFF, Repetition
from aiayn.decoding.steps import Hypothesis, Step, max_output_lengths, output_tokens
from aiayn.decoding.topk import top_k
from aiayn.model import DecoderCache, Transformer

NEG_INF = float("-inf")


def length_penalty(length: Tensor | int, alpha: float, form: str = "gnmt") -> Tensor:
    """lp(|Y|) that divides a hypothesis' log-probability; |Y| counts its tokens with eos.

    "gnmt": ((5 + |Y|) / 6)^alpha (Wu et al., 2016, used by the paper with alpha 0.6);
    "plain": |Y|^alpha (fairseq, Marian, HuggingFace). alpha = 0 turns either off.
    """
    length = torch.as_tensor(length, dtype=torch.float32)
    if form == "gnmt":
        return ((5.0 + length) / 6.0) ** alpha
    if form == "plain":
        return length**alpha
    raise ValueError(f"unknown length penalty {form!r}; use gnmt or plain")


@functools.lru_cache(maxsize=4096)
def _penalty(length: int, alpha: float, form: str) -> float:
    """`length_penalty` of one length as a number, computed once: a search divides by it every step."""
    return float(length_penalty(length, alpha, form))


def candidates(log_probs: Tensor, scores: Tensor, at_limit: Tensor, only_eos: Tensor) -> tuple[Tensor, ...]:
    """What one step offers and what becomes of it: log-probabilities (B*R, V) of the next token of
    each sentence's R live hypotheses (R = 1 at the first step, whose K beams are equal), their
    scores so far (B, K), the sentences that must end now (B,) and what they add (V,: 0 for eos,
    -inf for every other token) -> the 2K best extensions of each sentence (`beam_step`: scores,
    beams, tokens, each (B, 2K)), and which of them end and which live on (`choose`: five more).
    Run by `Step.scored`: a compiled step computes it all in its graph, in the passes that
    normalise the log-probabilities, where eagerly it takes two dozen small operations."""
    b, v = scores.size(0), log_probs.size(-1)
    totals = log_probs.view(b, -1, v) + scores[:, :, None]  # (B, K, V): score so far + next token's
    if torch.compiler.is_compiling() or at_limit.any():  # compiled, branch-free: in the same pass
        totals = totals + torch.where(at_limit[:, None, None], only_eos, 0.0)
    found = beam_step(totals)
    return (*found, *choose(*found, only_eos))


@functools.cache
def candidates_no_repeat(ngram: int) -> Callable[..., tuple[Tensor, ...]]:
    """`candidates` under the rule that no n-gram of `ngram` tokens occurs twice in a hypothesis
    (repetition.py), as a score function a compiled step runs in its graph (`Step.scored`): its
    last input `tokens` (B, R, L) holds each row's hypothesis, the decoder's start token first. A
    function for each n, named for it: a compiled step's graph is known by its score function's name."""
    rule = Repetition(ngram=ngram)

    def score(log_probs: Tensor, scores: Tensor, at_limit: Tensor, only_eos: Tensor, tokens: Tensor
              ) -> tuple[Tensor, ...]:
        log_probs = rule.ban(log_probs, tokens.flatten(0, 1), first=1)  # (B*R, V)
        return candidates(log_probs, scores, at_limit, only_eos)

    score.__name__ = score.__qualname__ = f"{NO_REPEAT}{ngram}"
    return score


NO_REPEAT = "candidates_no_repeat_"


def __getattr__(name: str) -> Any:
    """`candidates_no_repeat_N`: `candidates_no_repeat(N)` by its name, so that it pickles by reference
    (the processes that compile steps alongside are given it: `cache.alongside`)."""
    if name.startswith(NO_REPEAT) and name[len(NO_REPEAT):].isdigit():
        return candidates_no_repeat(int(name[len(NO_REPEAT):]))
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

def choose(cand_scores: Tensor, cand_beams: Tensor, cand_tokens: Tensor, only_eos: Tensor
           ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Of each sentence's 2K candidates (B, 2K each, best first): which of the first K end in eos
    (the token `only_eos` lets through) and so are finished hypotheses (B, K); and the best K that
    do not end, the next live hypotheses: which candidates they are, their scores, the beams they
    extend and their tokens, each (B, K)."""
    k = cand_scores.size(1) // 2
    ends = only_eos[cand_tokens] == 0  # (B, 2K)
    ended = ends[:, :k] & (cand_scores[:, :k] > NEG_INF)  # (B, K)
    kept = ends.to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # (B, K): the others, in rank order
    return ended, kept, cand_scores.gather(1, kept), cand_beams.gather(1, kept), cand_tokens.gather(1, kept)


def beam_step(totals: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The 2K best one-token extensions of each sentence's K hypotheses.

    totals (B, K, V): score of each hypothesis so far + log-probability of each next token.
    -> candidate scores, the beam each extends, and its token, each (B, 2K), best first.
    """
    v = totals.size(2)
    top_scores, flat = top_k(totals, 2 * totals.size(1))  # (B, 2K)
    return top_scores, flat // v, flat % v


@dataclass
class BeamStep:
    """What one step of beam search did, for a watcher (`beam_search(watch=...)`, aiayn explain):
    each searching sentence's 2K candidates, best first, and what became of them."""

    position: int  # tokens made before this step (bos not counted)
    sentences: Tensor  # (B,) the sentences of the batch these rows are
    scores: Tensor  # (B, 2K) each candidate's log-probability so far (-inf: not a candidate)
    beams: Tensor  # (B, 2K) the live hypothesis it extends
    tokens: Tensor  # (B, 2K) its new token
    finished: Tensor  # (B, K) whether each of the first K ended in eos: a finished hypothesis
    kept: Tensor  # (B, K) which candidates (indices of the 2K) are the next live hypotheses
    penalty: float  # the length penalty dividing the score of a hypothesis finished here


@torch.inference_mode()
def beam_search(model: Transformer, src: Tensor, beam_size: int = 4, nbest: int = 1, alpha: float = 0.6,
                penalty: str = "gnmt", max_lengths: Tensor | None = None, step: Step | None = None,
                watch: Callable[[BeamStep], None] | None = None, start: int | None = None,
                constraints: Constraints | None = None, repetition: Repetition = OFF
                ) -> list[list[Hypothesis]]:
    """The `nbest` best hypotheses (best first) for each of the B sentences of `src` (B, S).

    `step`: how the decoder steps run (default: the model's own; `compiled.CompiledStep`).
    `watch`: called after every step with what it did (`BeamStep`).
    `start`: the decoder's first token (default: bos; a multilingual model's target language).
    `constraints`: phrases each sentence's translation must contain, and tokens it must begin with
    (constrained.py). `repetition`: the rules against repetition loops (repetition.py)."""
    if not 1 <= nbest <= beam_size:
        raise ValueError(f"nbest={nbest} must be between 1 and the beam size {beam_size}")
    c, k, n, step = model.config, beam_size, src.size(0), step or Step(model)
    max_lengths = max_output_lengths(src, c.pad_id) if max_lengths is None else max_lengths
    width = int(max_lengths.max()) + 2  # bos, at most max_lengths tokens, eos
    only_eos = torch.full((c.vocab_size,), NEG_INF, device=src.device)  # added at the length limit
    only_eos[c.eos_id] = 0.0
    # The encoder and the cross-attention keys and values: once per sentence, shared by its K beams.
    # The K beams start equal (bos), so the first step runs one row per sentence, then fans out.
    src, limits, cache = step.start(src, max_lengths, capacity=width)
    live = _Live.start(src, limits, k, c.bos_id if start is None else start)
    if constraints is not None:
        constraints.start(src.size(0), k)
    final = Finished(src.size(0), k, width, c.pad_id, src.device)

    for position in range(width - 1):
        at_limit = live.at_limit(position)  # (B,): eos must follow
        cand_scores, cand_beams, cand_tokens, ended, kept, scores, beams, new = _choose(
            step, live.last, live.src, cache, live.tokens, live.scores, at_limit, only_eos, position,
            constraints, repetition)
        # Candidates ending in eos among the first K ranks are finished; the best K others live on.
        lp = _penalty(position + 1, alpha, penalty)
        finished = final.add(live.active, live.tokens, cand_beams[:, :k], cand_scores[:, :k], ended, lp,
                             c.eos_id)
        live.extend(scores, beams, new)
        if watch is not None:
            watch(BeamStep(position, live.active, cand_scores, cand_beams, cand_tokens, ended, kept, lp))
        if position == 0:
            step.fan_out(cache, k)  # every beam continues bos: each starts as a copy of its sentence's row
        else:
            cache.reorder((live.beam_rows + beams).flatten())  # (B*K,)
        if finished or position >= live.first_limit:  # which are done changes only then
            done = final.full(live.active) | at_limit  # (B,)
            if done.all():
                break
            live.leave(done, step.rows_to_keep(done, k), cache, constraints)
        live.go_on()
    return final.best(nbest, c.eos_id, c.pad_id)[:n]


def _choose(step: Step, last: Tensor, src: Tensor, cache: DecoderCache, tokens: Tensor, scores: Tensor,
            at_limit: Tensor, only_eos: Tensor, position: int, constraints: Constraints | None,
            repetition: Repetition) -> tuple[Tensor, ...]:
    """One step of the search after the rows' `last` tokens (B*R,), their hypotheses `tokens` (B, K,
    L): the candidates and what becomes of them (`candidates`' eight tensors). Without constraints
    and a repetition penalty, in the step's own graph (compiled: `Step.scored`), the n-gram rule too."""
    if constraints is None and repetition.penalty == 1.0:
        if not repetition.ngram:
            return step.scored(last, src, cache, candidates, scores, at_limit, only_eos)
        rows = tokens[:, :1 if position == 0 else tokens.size(1)].contiguous()  # (B, R, L)
        return step.scored(last, src, cache, candidates_no_repeat(repetition.ngram), scores, at_limit,
                           only_eos, rows)
    if repetition.off:
        log_probs = step.log_probs(last, src, cache)  # (B*R, V)
    else:  # the rules act on the logits of each row, given the tokens of its hypothesis
        logits, _ = step.logits(last, src, cache)  # (B*R, V)
        rows = logits.size(0) // tokens.size(0)  # R
        produced = tokens[:, :rows, 1:].flatten(0, 1)  # (B*R, L - 1): without the start token
        log_probs = repetition.penalise(logits, produced, step.model.config.pad_id).log_softmax(dim=-1)
        log_probs = repetition.ban(log_probs, produced)
    if constraints is None:
        return candidates(log_probs, scores, at_limit, only_eos)
    chosen = constraints.choose(log_probs, scores, at_limit, only_eos, step.model.config.eos_id, position)
    constraints.follow()
    return chosen


@dataclass
class _Live:
    """The sentences still searching, their K live hypotheses each, and what follows them when
    finished sentences leave the batch. Which sentences are done changes only when a hypothesis
    finishes or a sentence reaches its limit: between such steps, nothing is checked (a lone
    sentence's search is mostly such steps)."""

    active: Tensor  # (B,) the sentences of the batch these are
    src: Tensor  # (B, S)
    limits: Tensor  # (B,) each sentence's most output tokens
    scores: Tensor  # (B, K) each live hypothesis' log-probability
    tokens: Tensor  # (B, K, L) the live hypotheses, the start token first
    new: Tensor  # (B, K) each one's last token
    beam_rows: Tensor  # (B, 1) each sentence's first decoder row
    first_limit: int  # the first step at which a sentence must end
    never: Tensor  # (B,) all False: `at_limit` before that step
    done: Tensor  # (B,) which sentences are done (and stay in the batch: nothing they make is kept)
    stay_done: bool = False  # whether any done sentence stays in the batch

    @classmethod
    def start(cls, src: Tensor, limits: Tensor, k: int, first: int) -> _Live:
        """K beams of each sentence of `src` (B, S), equal (the `first` token): only the first is
        expanded, the others score -inf until they differ."""
        b, device = src.size(0), src.device
        scores = torch.full((b, k), NEG_INF, device=device)
        scores[:, 0] = 0.0
        tokens = torch.full((b, k, 1), first, dtype=torch.long, device=device)
        never = torch.zeros(b, dtype=torch.bool, device=device)
        return cls(torch.arange(b, device=device), src, limits, scores, tokens, tokens[:, :1, 0],
                   torch.arange(b, device=device)[:, None] * k, int(limits.min()), never, never)

    @property
    def last(self) -> Tensor:
        """(B*R,): each decoder row's last token (R = 1 at the first step, K after)."""
        return self.new.flatten()

    def at_limit(self, position: int) -> Tensor:
        """(B,): the sentences whose next token must be eos."""
        return self.limits <= position if position >= self.first_limit else self.never

    def extend(self, scores: Tensor, beams: Tensor, new: Tensor) -> None:
        """The next live hypotheses: each extends the live one `beams` (B, K) names by its token `new`
        (B, K), scoring `scores` (B, K)."""
        kept = self.tokens.gather(1, beams[:, :, None].expand(-1, -1, self.tokens.size(2)))  # (B, K, L)
        self.scores, self.new = scores, new
        self.tokens = torch.cat([kept, new[:, :, None]], dim=2)  # (B, K, L + 1)

    def leave(self, done: Tensor, keep: Tensor | None, cache: DecoderCache,
              constraints: Constraints | None) -> None:
        """After `done` (B,) changed: the sentences `keep` (B',) names stay, the others leave the batch
        (None: all stay)."""
        if keep is not None:
            self.active, self.limits, self.scores, self.tokens, self.new, done = (
                x[keep] for x in (self.active, self.limits, self.scores, self.tokens, self.new, done))
            self.src, self.beam_rows = self.src.index_select(0, keep), self.beam_rows[:len(keep)]
            cache.select(keep)
            if constraints is not None:
                constraints.select(keep)
            self.first_limit, self.never = int(self.limits.min()), self.never[keep]
        self.done, self.stay_done = done, bool(done.any())

    def go_on(self) -> None:
        """Before the next step: the done sentences that stay make nothing that is kept."""
        if self.stay_done:
            self.scores.masked_fill_(self.done[:, None], NEG_INF)

class Finished:
    """The K best finished hypotheses of every sentence, kept sorted, best first."""

    def __init__(self, n: int, k: int, width: int, pad_id: int, device: torch.device) -> None:
        self.scores = torch.full((n, k), NEG_INF, device=device)  # with length penalty
        self.log_probs = torch.full((n, k), NEG_INF, device=device)
        self.tokens = torch.full((n, k, width), pad_id, dtype=torch.long, device=device)  # bos..eos
        self.pad_id = pad_id

    def add(self, sentences: Tensor, tokens: Tensor, beams: Tensor, log_probs: Tensor, ended: Tensor,
            penalty: float, eos_id: int) -> bool:
        """Merge candidates (B, K) of `sentences` (B,) where `ended`: each the live hypothesis `beams`
        (B, K) names in `tokens` (B, K, L, without eos), ending in eos. -> whether any ended."""
        if not ended.any():
            return False
        parents = tokens.gather(1, beams[:, :, None].expand(-1, -1, tokens.size(2)))  # (B, K, L)
        b, k, length = parents.shape
        scores = torch.where(ended, log_probs / penalty, NEG_INF)  # (B, K)
        candidates = self.tokens.new_full((b, k, self.tokens.size(2)), self.pad_id)
        candidates[:, :, :length] = parents
        candidates[:, :, length] = eos_id
        merged = torch.cat([self.scores[sentences], scores], dim=1)  # (B, 2K)
        best, order = merged.topk(k, dim=1)
        self.scores[sentences] = best
        self.log_probs[sentences] = torch.cat([self.log_probs[sentences], log_probs], 1).gather(1, order)
        all_tokens = torch.cat([self.tokens[sentences], candidates], dim=1)  # (B, 2K, width + 1)
        self.tokens[sentences] = all_tokens.gather(1, order[:, :, None].expand(-1, -1, all_tokens.size(2)))
        return True

    def full(self, sentences: Tensor) -> Tensor:
        """Which of `sentences` have K finished hypotheses. -> (B,)"""
        return self.scores[sentences, -1] > NEG_INF

    def best(self, nbest: int, eos_id: int, pad_id: int) -> list[list[Hypothesis]]:
        results = []
        for scores, log_probs, tokens in zip(self.scores.tolist(), self.log_probs.tolist(),
                                             self.tokens.tolist(), strict=True):
            results.append([Hypothesis(output_tokens(row[1:], eos_id, pad_id), s, lp)  # row[0]: the start
                            for s, lp, row in zip(scores[:nbest], log_probs[:nbest], tokens, strict=False)
                            if s > NEG_INF])
        return results

