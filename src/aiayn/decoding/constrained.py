"""Lexically constrained beam search: phrases that must appear in a sentence's translation (Post &
Vilar, 2018: dynamic beam allocation; vectorised over the batch as Hu et al., 2019 and fairseq do),
and the tokens it must begin with (a prefix, as CTranslate2's `target_prefix`).

Every live hypothesis tracks its sentence's constraints: which it has met, and how far it is into
one (`done`, `place`, `within`). A step's candidates are those of plain beam search (the 2K best
extensions), each hypothesis' own best token, and every token that advances a constraint of its
hypothesis, so a constraint is always within reach. A candidate's bank is the number of constraint
tokens it has met; the K next hypotheses are taken across the banks in turn, the bank that met most
first, best first within each (`stripes`), so hypotheses that met more constraints are not crowded
out by likelier ones that met fewer. eos is allowed only once every constraint is met. A hypothesis
that leaves a constraint half-written drops it, and may begin it again. A sentence without
constraints has one bank: its search is plain beam search. At the length limit every hypothesis must
end; one that missed a constraint then ranks after every one that met all (`MISSED`). While a
sentence's prefix lasts, its one allowed token is its prefix's next (whose log-probability counts in
the score).

`beam.beam_search(constraints=...)` runs it: the decoder step gives the log-probabilities, and the
choice is made here, eagerly.

Shapes: B sentences, R rows (hypotheses) of each, K beam size, V vocabulary, C constraints of a
sentence (padded), P tokens of the longest constraint, M candidates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from aiayn.decoding.topk import top_k

NEG_INF = float("-inf")
MISSED = 1e4  # subtracted from the score of a hypothesis that ended without meeting every constraint


@dataclass(frozen=True)
class Steer:
    """What one sentence's translation must hold beyond the search options, target ids: phrases
    anywhere in it (constraints), and the tokens it begins with (a prefix)."""

    phrases: tuple[tuple[int, ...], ...] = ()
    prefix: tuple[int, ...] = ()


class Choice(NamedTuple):
    """Beam search's choice at a step, as `beam.candidates` makes it without constraints: the
    candidates (B, 2K) in the order taken, which of the first K end (B, K), which candidates live on
    (B, K), and the live ones' scores, beams and tokens (B, K) each."""

    scores: Tensor  # (B, 2K) candidate scores
    beams: Tensor  # (B, 2K) the beam each extends
    tokens: Tensor  # (B, 2K) the token each adds
    ended: Tensor  # (B, K) bool: which of the first K end in eos
    kept: Tensor  # (B, K) the candidates that live on
    live_scores: Tensor  # (B, K)
    live_beams: Tensor  # (B, K)
    live_tokens: Tensor  # (B, K)


class Constraints:
    """The constraints and prefixes of a batch of sentences (`steers[i]`: sentence i's), and the state
    of every hypothesis as the search goes."""

    def __init__(self, steers: Sequence[Steer], device: torch.device | str = "cpu") -> None:
        c = max((len(s.phrases) for s in steers), default=0) or 1
        p = max((len(t) for s in steers for t in s.phrases), default=0) or 1
        self.tokens = torch.full((len(steers), c, p), -1, dtype=torch.long)  # (B, C, P), -1: none
        for i, steer in enumerate(steers):
            for j, phrase in enumerate(steer.phrases):
                if not phrase:
                    raise ValueError(f"sentence {i}: constraint {j} has no tokens")
                self.tokens[i, j, :len(phrase)] = torch.tensor(phrase)
        self.tokens = self.tokens.to(device)
        longest = max((len(s.prefix) for s in steers), default=0)
        self.prefixes = torch.full((len(steers), longest), -1, dtype=torch.long)  # (B, L), -1: free
        for i, steer in enumerate(steers):
            self.prefixes[i, :len(steer.prefix)] = torch.tensor(steer.prefix, dtype=torch.long)
        self.prefixes = self.prefixes.to(device)
        self._count()
        self.done = self.place = self.within = None  # State of the live hypotheses, set by `start`

    def _count(self) -> None:
        self.lengths = (self.tokens >= 0).sum(2)  # (B, C), 0: no constraint
        self.need = self.lengths.sum(1)  # (B,) constraint tokens to meet

    def start(self, sentences: int, k: int) -> None:
        """Begin a search of `sentences` (a compiled step tops the batch up with unconstrained
        copies: sentences >= the phrases given), K hypotheses each."""
        extra = sentences - self.tokens.size(0)
        if extra > 0:
            pad = [x.new_full((extra, *x.shape[1:]), -1) for x in (self.tokens, self.prefixes)]
            self.tokens, self.prefixes = torch.cat([self.tokens, pad[0]]), torch.cat([self.prefixes, pad[1]])
            self._count()
        b, c = self.lengths.shape
        device = self.tokens.device
        self.done = torch.zeros(b, k, c, dtype=torch.bool, device=device)  # constraints met
        self.place = torch.full((b, k), -1, dtype=torch.long, device=device)  # the one under way, -1: none
        self.within = torch.zeros(b, k, dtype=torch.long, device=device)  # its tokens written so far

    def met(self, done: Tensor, within: Tensor) -> Tensor:
        """Constraint tokens met: (B, X, C), (B, X) -> (B, X)."""
        return (done * self.lengths[:, None, :]).sum(2) + within

    def choose(self, log_probs: Tensor, scores: Tensor, at_limit: Tensor, only_eos: Tensor, eos_id: int,
               position: int) -> Choice:
        """Beam search's choice (as `beam.candidates`) under the constraints: log-probabilities
        (B*R, V), scores so far (B, K), the sentences at their length limit (B,) and what the limit
        allows (V,), the tokens made before this step -> the `Choice`."""
        b, k, v = scores.size(0), scores.size(1), log_probs.size(-1)
        # (B, R, V): added in one pass, then masked in place
        totals = log_probs.view(b, -1, v) + scores[:, :log_probs.size(0) // b, None]
        r = totals.size(1)
        done, place, within = self.done[:, :r], self.place[:, :r], self.within[:, :r]
        unmet = self.met(done, within) < self.need[:, None]  # (B, R)
        totals[..., eos_id].masked_fill_(unmet & ~at_limit[:, None], NEG_INF)
        if position < self.prefixes.size(1):  # a prefix's token is the only one allowed
            forced = self.prefixes[:, position]  # (B,), -1: free
            allowed = torch.arange(v, device=totals.device) == forced[:, None]  # (B, V)
            totals.masked_fill_(((forced >= 0)[:, None] & ~allowed)[:, None, :], NEG_INF)
        if at_limit.any():
            totals.add_(torch.where(at_limit[:, None, None], only_eos, 0.0))

        # Candidates: the 2K best, each row's best, and each row's tokens that advance a constraint.
        best, flat = top_k(totals, min(2 * k, r * v))  # (B, 2K)
        own, own_tokens = totals.max(dim=2)  # (B, R)
        wanted = self._wanted(done, place, within)  # (B, R, C)
        rows = torch.arange(r, device=totals.device).expand(b, -1)  # (B, R)
        beams = torch.cat([flat // v, rows, rows[:, :, None].expand_as(wanted).flatten(1)], dim=1)  # (B, M)
        tokens = torch.cat([flat % v, own_tokens, wanted.clamp(min=0).flatten(1)], dim=1)
        values = torch.cat([best, own, totals.gather(2, wanted.clamp(min=0)).masked_fill(wanted < 0, NEG_INF)
                           .flatten(1)], dim=1)
        values = values.masked_fill(_repeated(beams * v + tokens), NEG_INF)  # each (row, token) once

        state = self._after(beams, tokens, done, place, within, wanted)  # of each candidate
        order = stripes(values, self.met(state[0], state[2]), int(self.need.max()))  # (B, M)
        take = order[:, :2 * k]  # (B, 2K): the first taken
        cand_scores, cand_beams, cand_tokens = (x.gather(1, take) for x in (values, beams, tokens))
        state = [_rows(x, take) for x in state]
        ends = cand_tokens == eos_id  # (B, 2K)
        ended = ends[:, :k] & (cand_scores[:, :k] > NEG_INF)
        kept = ends.to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # the others, in the order taken
        self._next = [_rows(x, kept) for x in state]
        # only at the length limit can a hypothesis end before it has met every constraint
        missed = ended & (self.met(state[0][:, :k], state[2][:, :k]) < self.need[:, None])
        cand_scores = torch.cat([cand_scores[:, :k] - MISSED * missed, cand_scores[:, k:]], dim=1)
        return Choice(cand_scores, cand_beams, cand_tokens, ended, kept, cand_scores.gather(1, kept),
                      cand_beams.gather(1, kept), cand_tokens.gather(1, kept))

    def follow(self) -> None:
        """The live hypotheses are now those `choose` kept."""
        self.done, self.place, self.within = self._next

    def select(self, keep: Tensor) -> None:
        """Only sentences `keep` (B',) search on."""
        self.done, self.place, self.within = self.done[keep], self.place[keep], self.within[keep]
        self.tokens, self.lengths, self.need = self.tokens[keep], self.lengths[keep], self.need[keep]
        self.prefixes = self.prefixes[keep]

    def _wanted(self, done: Tensor, place: Tensor, within: Tensor) -> Tensor:
        """The token of each constraint that each row would write next (B, R, C), -1 for none: the
        next of the one under way; the first of the others not met."""
        b, r = place.shape
        c = self.lengths.size(1)
        first = self.tokens[:, None, :, 0].expand(b, r, c)  # (B, R, C)
        under_way = torch.arange(c, device=place.device) == place[:, :, None]  # (B, R, C)
        at = within[:, :, None].clamp(max=self.tokens.size(2) - 1).expand(b, r, c)
        following = self.tokens[:, None].expand(b, r, -1, -1).gather(3, at[..., None]).squeeze(3)
        return torch.where(under_way, following, torch.where(done, -1, first))

    def _after(self, beams: Tensor, tokens: Tensor, done: Tensor, place: Tensor, within: Tensor,
               wanted: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The state after each candidate (B, M): its row's, moved on by its token (`wanted`: each
        row's next token of each constraint, `_wanted`)."""
        c = done.size(2)
        done, wanted = _rows(done, beams), _rows(wanted, beams)  # (B, M, C) each
        place, within = place.gather(1, beams), within.gather(1, beams)  # (B, M)
        following = wanted.gather(2, place.clamp(min=0)[..., None]).squeeze(2)  # the one under way's next
        goes_on = (place >= 0) & (tokens == following)
        starts = (self.tokens[:, None, :, 0] == tokens[:, :, None]) & ~done  # (B, M, C)
        begins = ~goes_on & starts.any(2)
        place = torch.where(goes_on, place, torch.where(begins, starts.to(torch.uint8).argmax(2), -1))
        within = torch.where(goes_on, within + 1, begins.long())
        complete = (place >= 0) & (within == self.lengths.gather(1, place.clamp(min=0)))
        done = done | (complete[..., None] & (torch.arange(c, device=done.device) == place[..., None]))
        return done, torch.where(complete, -1, place), torch.where(complete, 0, within)


def stripes(values: Tensor, banks: Tensor, most: int) -> Tensor:
    """The order in which candidates (B, M) are taken: the best of each bank (constraint tokens met,
    0 to `most`), from the highest bank down, then the second best of each, and so on; candidates
    of score -inf last."""
    ranked = values.argsort(dim=1, descending=True, stable=True)  # (B, M)
    bank = banks.gather(1, ranked)
    seen = torch.nn.functional.one_hot(bank.clamp(0, most), most + 1).cumsum(1)  # (B, M, banks)
    rank = seen.gather(2, bank.clamp(0, most)[..., None]).squeeze(2) - 1  # within its bank
    key = (rank * (most + 1) + most - bank).float()
    key = key.masked_fill(values.gather(1, ranked) == NEG_INF, float("inf"))
    return ranked.gather(1, key.argsort(dim=1, stable=True))


def _rows(x: Tensor, index: Tensor) -> Tensor:
    """x (B, M, ...) at `index` (B, N) along its second dimension -> (B, N, ...)."""
    return x.gather(1, index.view(*index.shape, *[1] * (x.dim() - 2)).expand(-1, -1, *x.shape[2:]))


def _repeated(keys: Tensor) -> Tensor:
    """Which of each row's keys (B, M) an earlier one of the row equals."""
    order = keys.argsort(dim=1, stable=True)
    ordered = keys.gather(1, order)
    again = torch.zeros_like(keys, dtype=torch.bool)
    again.scatter_(1, order[:, 1:], ordered[:, 1:] == ordered[:, :-1])
    return again
