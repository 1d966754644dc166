"""What greedy, sampling and beam search share: the length limit, one cached decoder step, and
`Step`, the seam through which a search runs its steps: the model's own (this module), or one
compiled by TorchInductor (`compiled.CompiledStep`, the same maths, faster).

Shapes: B rows (sentences, or sentences x beams), S source length, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from aiayn.decoding.tracing import gate
from aiayn.model import DecoderCache, Transformer

Score = Callable[..., Any]  # (log-probabilities (B, V), *tensors) -> tensors: see Step.scored
LEAVE_AT = 8  # finished sentences leave the batch once they are 1/LEAVE_AT of it (Step.rows_to_keep)


@dataclass
class Hypothesis:
    tokens: list[int]  # output ids, without bos and eos
    score: float  # what the search ranked by: log_prob / length penalty (greedy: log_prob)
    log_prob: float  # sum of the token log-probabilities, eos included when it was produced


def max_output_lengths(src: Tensor, pad_id: int, extra: int = 50, fixed: int = 0) -> Tensor:
    """Most output tokens (eos not counted) per sentence: the paper's source length + `extra`,
    or `fixed` for every sentence when it is positive. -> (B,)"""
    if fixed > 0:
        return torch.full((src.size(0),), fixed, dtype=torch.long, device=src.device)
    return (src != pad_id).sum(dim=1) + extra


def output_limits(model: Transformer, src: Tensor, extra: int = 50, fixed: int = 0) -> Tensor:
    """`max_output_lengths` for `model`: with learned positions, none beyond its table (bos takes 0)."""
    limits = max_output_lengths(src, model.config.pad_id, extra, fixed)
    if model.config.positional == "learned":
        limits = limits.clamp(max=model.config.max_positions - 1)
    return limits


def next_logits(model: Transformer, last_tokens: Tensor, src: Tensor,
                cache: DecoderCache) -> tuple[Tensor, Tensor]:
    """Scores of the next token after `last_tokens` (B,), one cached step: see `logits_and_normaliser`."""
    return logits_and_normaliser(model, model.decode(last_tokens[:, None], None, src, cache))


def next_log_probs(model: Transformer, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> Tensor:
    """Log-probabilities of the next token after `last_tokens` (B,), one cached step. -> (B, V)"""
    return log_probs(model, model.decode(last_tokens[:, None], None, src, cache))


def logits_and_normaliser(model: Transformer, hidden: Tensor) -> tuple[Tensor, Tensor]:
    """The decoder output of one step (B, 1, D) -> logits (B, V), and their log-normaliser
    logsumexp (B, 1): log-probability = logit - it. Greedy decoding needs the log-probability of
    the chosen token only, so it normalises that one."""
    logits = model.logits(hidden)[:, -1].float()  # (B, V)
    normaliser = logits.logsumexp(dim=-1, keepdim=True)  # (B, 1)
    return _never_outputs(model, logits), normaliser


def log_probs(model: Transformer, hidden: Tensor) -> Tensor:
    """The decoder output of one step (B, 1, D) -> log-probabilities (B, V). Beam search needs
    every row normalised: log_softmax does it in one fused pass over the scores."""
    return _never_outputs(model, model.logits(hidden)[:, -1].float().log_softmax(dim=-1))


def _never_outputs(model: Transformer, scores: Tensor) -> Tensor:
    """Padding and bos are never outputs (never targets in training): their scores become -inf,
    in place, after normalising over the full vocabulary, as log_softmax in training does."""
    scores[:, [model.config.pad_id, model.config.bos_id]] = float("-inf")
    return scores


def output_tokens(row: list[int], eos_id: int, pad_id: int) -> list[int]:
    """A search's output row (without bos) -> the tokens before eos, without padding."""
    if eos_id in row:
        row = row[: row.index(eos_id)]
    return [t for t in row if t != pad_id]


class Step:
    """How a search runs its decoder steps: here, the model's own cached step (`Transformer.decode`).

    A search calls `start` once, then per step `logits` (greedy, sampling) or `scored` (beam search:
    the log-probabilities and what it makes of them), `fan_out` after beam search's first step, and
    `rows_to_keep` to let finished sentences leave the batch. `compiled.CompiledStep` runs the same
    steps compiled. The model runs inside `tracing.gate.running()`: another thread may be compiling.
    """

    def __init__(self, model: Transformer) -> None:
        self.model = model

    def start(self, src: Tensor, max_lengths: Tensor, capacity: int) -> tuple[Tensor, Tensor, DecoderCache]:
        """The encoder run on src (B, S) and a cache for `capacity` positions (it grows if needed).
        -> the batch and maximum lengths (B,) to search (here unchanged), and the cache."""
        with gate.running():
            cache = self.model.init_cache(self.model.encode(src), capacity=min(capacity, 256))
        return src, max_lengths, cache

    def logits(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> tuple[Tensor, Tensor]:
        with gate.running():
            return next_logits(self.model, last_tokens, src, cache)

    def log_probs(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> Tensor:
        with gate.running():
            return next_log_probs(self.model, last_tokens, src, cache)

    def scored(self, last_tokens: Tensor, src: Tensor, cache: DecoderCache, score: Score,
               *args: Tensor) -> Any:
        """`score(log_probs, *args)` after one step: what a search makes of the log-probabilities
        (B, V), such as beam search's candidates. The compiled step runs `score` inside its graph, so
        it must be traceable: tensors in and out, and no branching on their values while
        `torch.compiler.is_compiling()`."""
        return score(self.log_probs(last_tokens, src, cache), *args)

    def fan_out(self, cache: DecoderCache, r: int) -> None:
        """Give each sentence r rows (beam search's K beams), each a copy of its one row so far."""
        cache.fan_out(r)

    def rows_to_keep(self, done: Tensor, rows_per_sentence: int = 1) -> Tensor | None:
        """The sentences (in order) that stay when finished ones leave the batch, or None while all
        stay. `done` (B,): which sentences are finished; `rows_per_sentence`: the rows of each.

        Finished rows leave a group at a time, once they are 1/LEAVE_AT of the batch: moving the
        others' cached keys and values costs more than computing a few finished rows for some steps.
        """
        return (~done).nonzero().squeeze(1) if done.sum() * LEAVE_AT >= len(done) else None
