"""What greedy, sampling and beam search share: the length limit and one cached decoder step.

Shapes: B rows (sentences, or sentences x beams), S source length, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.model import DecoderCache, Transformer


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


def next_log_probs(model: Transformer, last_tokens: Tensor, src: Tensor, cache: DecoderCache) -> Tensor:
    """Log-probabilities of the next token after `last_tokens` (B,), one cached step. -> (B, V)

    Padding and bos are never outputs (never targets in training), so they get -inf.
    """
    hidden = model.decode(last_tokens[:, None], None, src, cache)  # (B, 1, D)
    log_probs = model.log_probs(hidden)[:, -1]  # (B, V)
    log_probs[:, [model.config.pad_id, model.config.bos_id]] = float("-inf")
    return log_probs
