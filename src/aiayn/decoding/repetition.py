"""Keeping a search out of repetition loops ("salad salad salad ..."), which a weak model falls
into: two rules on the scores of the next token, with CTranslate2's and HuggingFace's names and
meanings.

- `repetition_penalty` p (Keskar et al., 2019, "CTRL"): the logit of every token the hypothesis
  has already produced is divided by p where positive and multiplied by p where negative, so
  p > 1 makes each such token less likely; 1 leaves the scores as they are.
- `no_repeat_ngram_size` n: no n-gram occurs twice in a hypothesis: a token that would complete an
  n-gram already in it gets probability 0; 0 turns the rule off.

Both act on the logits, before they are normalised into the log-probabilities the search adds up,
so a hypothesis' score is the log-probability under the rules. Every search applies them in one
place, `Repetition.logits`, on the model's own step or a compiled one.

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

    def logits(self, logits: Tensor, produced: Tensor, pad_id: int) -> Tensor:
        """logits (B, V) of the next token after the tokens each row has produced, `produced` (B, L:
        without the decoder's start token; `pad_id` where a row has none) -> the logits under both
        rules (a new tensor)."""
        if self.penalty != 1.0 and produced.size(1):
            seen = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, produced, True)  # (B, V)
            seen[:, pad_id] = False
            penalised = torch.where(logits < 0, logits * self.penalty, logits / self.penalty)
            logits = torch.where(seen, penalised, logits)
        if self.ngram and produced.size(1) >= self.ngram:
            logits = logits.masked_fill(self.banned(produced, pad_id, logits.size(1)), float("-inf"))
        return logits

    def banned(self, produced: Tensor, pad_id: int, v: int) -> Tensor:
        """Which of the V next tokens would complete an n-gram already produced: those that followed
        an earlier occurrence of the row's last n - 1 tokens. produced (B, L), L >= n -> (B, V) bool."""
        n = self.ngram
        grams = produced.unfold(1, n, 1)  # (B, L - n + 1, n): every n-gram so far
        tail = produced[:, produced.size(1) - n + 1:]  # (B, n - 1): what the next token would follow
        follows = (grams[:, :, :-1] == tail[:, None, :]).all(dim=2)  # (B, L - n + 1)
        follows &= (grams != pad_id).all(dim=2)  # padding is no n-gram
        banned = torch.zeros(produced.size(0), v, dtype=torch.bool, device=produced.device)
        # the n-grams that do not follow write False to padding, never one of the tokens banned
        return banned.scatter_(1, torch.where(follows, grams[:, :, -1], pad_id), follows)


OFF = Repetition()  # neither rule: the searches' default
