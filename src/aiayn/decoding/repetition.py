"""Keeping a search out of repetition loops ("salad salad salad ..."), which a weak model falls
into: two rules on the scores of the next token, with CTranslate2's and HuggingFace's names and
meanings.

- `repetition_penalty` p (Keskar et al., 2019, "CTRL"): the logit of every token the hypothesis
  has already produced is divided by p where positive and multiplied by p where negative, so
  p > 1 makes each such token less likely; 1 leaves the scores as they are. It acts on the logits,
  before they are normalised (`penalise`): a hypothesis' log-probability is then under the penalty.
- `no_repeat_ngram_size` n: no n-gram occurs twice in a hypothesis: a token that would complete an
  n-gram already in it is never chosen (its score -inf, `ban`); the others keep their scores, so
  a hypothesis' log-probability is the model's own (as HuggingFace's beam search has it); 0: off.
  The ban writes to the few tokens banned only, not over the vocabulary: a compiled search runs it
  in its graph at almost no cost (benchmarks/detail/repetition.md).

Shapes: B rows (sentences, or sentences x beams), L tokens produced so far, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Repetition:
    penalty: float = 1.0  # repetition_penalty: > 1 discourages tokens already produced
    ngram: int = 0  # no_repeat_ngram_size: no n-gram of this many tokens twice; 0: off

    def __post_init__(self) -> None:
        if self.penalty <= 0:
            raise ValueError(f"repetition_penalty must be positive, got {self.penalty}")
        if self.ngram < 0:
            raise ValueError(f"no_repeat_ngram_size must be 0 (off) or more, got {self.ngram}")

    @property
    def off(self) -> bool:
        return self.penalty == 1.0 and self.ngram == 0

    def penalise(self, logits: Tensor, produced: Tensor, pad_id: int) -> Tensor:
        """logits (B, V) of the next token after the tokens each row has produced, `produced` (B, L:
        without the decoder's start token; `pad_id` where a row has none) -> the logits under the
        penalty (a new tensor; `logits` itself where the penalty is off)."""
        if self.penalty == 1.0 or not produced.size(1):
            return logits
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, produced, True)  # (B, V)
        seen[:, pad_id] = False
        penalised = torch.where(logits < 0, logits * self.penalty, logits / self.penalty)
        return torch.where(seen, penalised, logits)

    def ban(self, scores: Tensor, produced: Tensor, length: Tensor | int | None = None,
            first: int = 0) -> Tensor:
        """scores (B, V) of the next token (logits or log-probabilities) -> -inf for the tokens that
        would complete an n-gram already produced, the others' as they are (a new tensor; `scores`
        itself where the rule is off). produced (B, L): of each row, the tokens from position `first`
        (1 where the decoder's start token leads) up to `length` (a number, or a () tensor; default
        L) are those produced so far (`following`)."""
        if not self.ngram or not produced.size(1):
            return scores
        tokens, follows = self.following(produced, length, first)  # (B, L) each
        return scores.scatter_add(1, tokens, torch.where(follows, float("-inf"), 0.0))  # x + 0 is x

    def following(self, produced: Tensor, length: Tensor | int | None = None, first: int = 0
                  ) -> tuple[Tensor, Tensor]:
        """The n-grams produced whose first n - 1 tokens are the row's last n - 1: their last tokens
        are those banned. produced (B, L), L >= 1 (see `ban`) -> each position's n-gram's last token
        (B, L), and whether that n-gram is such a one (B, L). Written for fixed shapes (no size depends
        on `length` or `first`: export makes a size of 1 a constant), so that a compiled search runs
        it on its buffers (decoding/whole.py) or a step's history."""
        n, (b, width) = self.ngram, produced.shape
        length = width if length is None else length
        # the n-gram starting at each position p: its d-th token is produced[:, p + d], `produced`
        # shifted left by d (what wraps around starts too late to be complete)
        grams = [produced.roll(-d, 1) for d in range(n)]  # n x (B, L)
        starts = torch.arange(width, device=produced.device)  # (L,)
        complete = (starts >= first) & (starts + n <= length)  # (L,)
        tail_at = (torch.arange(n - 1, device=produced.device) + (length - n + 1)).clamp(min=0)
        tail = produced.index_select(1, tail_at)  # (B, n - 1): what the next token would follow
        follows = complete.expand(b, -1)  # (B, L)
        for d in range(n - 1):
            follows = follows & (grams[d] == tail[:, d:d + 1])
        return grams[-1], follows

OFF = Repetition()  # neither rule: the searches' default
