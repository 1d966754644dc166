"""Several training corpora in one run, each sampled as often as its weight says.

    aiayn train --init-from PARENT --train mine.tsv --train multi30k --train-weights 3,1

A fine-tune that keeps some of its parent's data in the mix forgets less of what the parent knew; a
small corpus of one's own can be seen more often than its size alone would have it. An epoch holds
as many pairs as all the corpora together (N = n_1 + ... + n_c); corpus i gets the share p_i = w_i /
(w_1 + ... + w_c) of it, k_i = round(p_i * N) pairs. Those are read from a stream of seeded
permutations of the corpus, epoch after epoch: a corpus sampled below its size is seen whole over
several epochs before any pair repeats, one sampled above its size is repeated as evenly as it can
be. Instead of weights, a sampling temperature T weighs each corpus by its size to the power 1/T
(fairseq's multilingual sampling): T = 1 is in proportion to size, a larger T brings the shares
closer to equal, so that small corpora are not starved. Without weights, or at T = 1, every pair is
seen once an epoch, and the batches are those of one corpus (`make_batches`). Everything is a pure
function of (seed, epoch), so every rank of a distributed run draws the same sample, and a resumed
run continues it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from aiayn.data.batching import TokenizedCorpus, make_batches


class _Joined:
    """The token id rows of several corpora, one after the other: row i of the whole."""

    def __init__(self, parts: Sequence, starts: np.ndarray) -> None:
        self.parts, self.starts = parts, starts  # starts: the first row of each part, then the total

    def __len__(self) -> int:
        return int(self.starts[-1])

    def __getitem__(self, i: int) -> list[int]:
        part = int(np.searchsorted(self.starts, i, side="right")) - 1
        return self.parts[part][i - int(self.starts[part])]

    def __iter__(self):
        for part in self.parts:
            yield from part


class Mix:
    """The training data of a run: one corpus, or several sampled by weight. It answers what
    training asks of a corpus (`source[i]`, `target[i]`, `lengths()`), and `batches(epoch)`."""

    def __init__(self, corpora: Sequence[tuple[str, TokenizedCorpus]], weights: Sequence[float] = (),
                 temperature: float = 1.0) -> None:
        if weights and len(weights) != len(corpora):
            raise ValueError(f"{len(weights)} weights for {len(corpora)} corpora")
        if weights and temperature != 1.0:
            raise ValueError("give weights or a sampling temperature, not both")
        self.names = [name for name, _ in corpora]
        parts = [corpus for _, corpus in corpora]
        self.sizes = np.array([len(c) for c in parts], np.int64)
        if not self.sizes.all():
            raise ValueError(f"{self.names[int(np.argmin(self.sizes))]}: no pairs to sample")
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])
        if len(parts) == 1:
            self.source, self.target = parts[0].source, parts[0].target
        else:
            self.source = _Joined([c.source for c in parts], self.starts)
            self.target = _Joined([c.target for c in parts], self.starts)
        lengths = [c.lengths() for c in parts]  # (source, target) of each
        self._lengths = (np.concatenate([s for s, _ in lengths]), np.concatenate([t for _, t in lengths]))
        self.temperature = temperature
        if temperature != 1.0:
            weights = self.sizes.astype(float) ** (1.0 / temperature)
        self.weighted = len(weights) > 0 and len(parts) > 1  # one corpus: every pair once, weight or not
        # pairs of each corpus in an epoch
        self.per_epoch = _apportion(np.asarray(weights, float), len(self)) if self.weighted else self.sizes

    def __len__(self) -> int:
        return int(self.starts[-1])

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        return self._lengths

    def sample(self, seed: int, epoch: int) -> np.ndarray | None:
        """The pairs (indices into the whole, each corpus's in a row) of `epoch`; None: every pair once."""
        if not self.weighted:
            return None
        drawn = [self.starts[i] + _stream(int(n), int(k), seed, i, epoch)
                 for i, (n, k) in enumerate(zip(self.sizes, self.per_epoch, strict=True))]
        return np.concatenate(drawn)

    def batches(self, batch_tokens: int, seed: int, epoch: int) -> list[np.ndarray]:
        """The batches of `epoch`, in the order training visits them (`make_batches`)."""
        return make_batches(*self.lengths(), batch_tokens, seed, epoch, subset=self.sample(seed, epoch))

    def report(self) -> list[str]:
        """What each epoch holds, one line per corpus (nothing for a single corpus)."""
        if len(self.names) == 1:
            return []
        total = int(self.per_epoch.sum())
        lines = [f"mixing {len(self.names)} corpora: {total:,} pairs an epoch"
                 + (f" (sampling temperature {self.temperature:g})" if self.temperature != 1.0 else
                    "" if self.weighted else " (no --train-weights: each pair once)")]
        for name, n, k in zip(self.names, self.sizes, self.per_epoch, strict=True):
            lines.append(f"  {name}: {int(n):,} pairs, {k / total:.1%} of each epoch "
                         f"({k / n:.2f} times its size)")
        return lines


def _apportion(weights: np.ndarray, total: int) -> np.ndarray:
    """`total` pairs shared in proportion to `weights` (largest remainders), at least one each."""
    exact = weights / weights.sum() * total
    counts = np.floor(exact).astype(np.int64)
    counts[np.argsort(counts - exact, kind="stable")[: total - int(counts.sum())]] += 1
    return np.maximum(counts, 1)


def _stream(n: int, k: int, seed: int, corpus: int, epoch: int) -> np.ndarray:
    """Rows epoch*k .. (epoch+1)*k - 1 of the endless stream of seeded permutations of range(n)."""
    start, end = epoch * k, (epoch + 1) * k
    cycles = range(start // n, (end - 1) // n + 1)
    stream = np.concatenate([np.random.default_rng([seed, corpus, c]).permutation(n) for c in cycles])
    offset = cycles[0] * n
    return stream[start - offset: end - offset]
