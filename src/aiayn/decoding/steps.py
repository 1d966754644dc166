"""What greedy, sampling and beam search share: the length limit and one cached decoder step.

Shapes: B rows (sentences, or sentences x beams), S source length, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.model import DecoderCache, Transformer

LEAVE_AT = 8  # finished sentences leave the batch once they are 1/LEAVE_AT of it (rows_to_keep)
FEWEST_ROWS = 8  # sentences a compiled step runs at, at least (row_bucket): each row count is a
# compilation of 7-10 s (small preset, 2-core CPU), and a step at 8 sentences costs little more
# than at 1 (greedy 1.58 against 1.22 ms, beam 4 2.99 against 1.46 ms): 3 compilations fewer


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


def row_bucket(rows: int) -> int:
    """The row count a compiled step runs at (compiled.py): the next power of two, and at least
    `FEWEST_ROWS`."""
    return max(FEWEST_ROWS, 1 << max(rows - 1, 0).bit_length())


def rows_to_keep(done: Tensor, compiled: bool) -> Tensor | None:
    """The rows (in order) that stay when finished ones leave the batch, or None while all stay.

    Finished rows leave a group at a time, once they are 1/LEAVE_AT of the batch: moving the others'
    cached keys and values costs more than computing a few finished rows for some steps. With a
    compiled step, whose row counts are powers of two, they leave once the unfinished rows fit a
    smaller one, which finished rows top up.
    """
    if compiled:
        rows = row_bucket(int((~done).sum()))
        return None if rows >= len(done) else done.int().argsort(stable=True)[:rows]
    return (~done).nonzero().squeeze(1) if done.sum() * LEAVE_AT >= len(done) else None
