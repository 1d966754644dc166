"""From sentences to padded batches of ids, by token count.

Pairs are tokenised once; empty pairs and pairs over the length limit are dropped and counted.
A batch holds as many pairs as fit a token budget counted with padding, on each side. Pairs of
similar length are grouped (sorted by target length, then source length, after a seeded
shuffle that breaks ties differently each epoch) so little padding is needed, and the batches
are then visited in a seeded random order. Everything is a pure function of (seed, epoch), so
a resumed run sees exactly the batches it would have seen.

Shapes: B pairs in a batch, S source length (+ eos), T target length (+ bos or eos).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from aiayn.data.readers import ParallelCorpus
from aiayn.tokenizer import Tokenizer


@dataclass
class TokenizedCorpus:
    source: list[list[int]]  # subword ids, no specials
    target: list[list[int]]
    dropped_empty: int = 0
    dropped_long: int = 0

    def __len__(self) -> int:
        return len(self.source)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Padded-length contributions: source + eos, target + bos (or eos)."""
        return (np.fromiter((len(s) + 1 for s in self.source), np.int64, len(self)),
                np.fromiter((len(t) + 1 for t in self.target), np.int64, len(self)))

    def summary(self, name: str) -> str:
        return summary(name, len(self), self.dropped_empty, self.dropped_long)


def summary(name: str, kept: int, dropped_empty: int, dropped_long: int) -> str:
    """What tokenising a corpus kept and dropped, in one line."""
    return (f"{name}: {kept:,} of {kept + dropped_empty + dropped_long:,} pairs kept; dropped "
            f"{dropped_empty:,} with an empty side and {dropped_long:,} over the length limit")


def tokenize(corpus: ParallelCorpus, tokenizer: Tokenizer, max_len: int | None = None) -> TokenizedCorpus:
    """Tokenise both sides; drop pairs with an empty side, and pairs longer than `max_len` tokens."""
    source, target = tokenizer.encode(corpus.source), tokenizer.encode(corpus.target, "target")
    kept = TokenizedCorpus([], [])
    for s, t in zip(source, target, strict=True):
        if not s or not t:
            kept.dropped_empty += 1
        elif max_len is not None and max(len(s), len(t)) > max_len:
            kept.dropped_long += 1
        else:
            kept.source.append(s)
            kept.target.append(t)
    return kept


def make_batches(src_lens: np.ndarray, tgt_lens: np.ndarray, batch_tokens: int, seed: int = 0,
                 epoch: int = 0, shuffle: bool = True, subset: np.ndarray | None = None) -> list[np.ndarray]:
    """Group pair indices into batches of at most `batch_tokens` padded tokens per side; with
    `subset`, only those pairs (an index may repeat: that pair is batched as often).

    A pair longer than the budget on its own still gets a batch of one.
    """
    if subset is not None:
        batches = make_batches(src_lens[subset], tgt_lens[subset], batch_tokens, seed, epoch, shuffle)
        return [subset[b] for b in batches]
    rng = np.random.default_rng([seed, epoch])
    order = rng.permutation(len(src_lens)) if shuffle else np.arange(len(src_lens))
    order = order[np.lexsort((src_lens[order], tgt_lens[order]))]  # stable: by target, then source
    batches, start, max_src, max_tgt = [], 0, 0, 0
    for end, i in enumerate(order):
        new_src, new_tgt = max(max_src, src_lens[i]), max(max_tgt, tgt_lens[i])
        if end > start and max(new_src, new_tgt) * (end - start + 1) > batch_tokens:
            batches.append(order[start:end])
            start, new_src, new_tgt = end, src_lens[i], tgt_lens[i]
        max_src, max_tgt = new_src, new_tgt
    if start < len(order):
        batches.append(order[start:])
    if shuffle:
        batches = [batches[j] for j in rng.permutation(len(batches))]
    return batches


def padding_fraction(batches: list[np.ndarray], lengths: np.ndarray) -> float:
    """Share of padded positions among all positions of these batches, for one side."""
    real = sum(int(lengths[b].sum()) for b in batches)
    padded = sum(int(lengths[b].max()) * len(b) for b in batches)
    return 1.0 - real / padded if padded else 0.0


@dataclass
class Batch:
    src: Tensor  # (B, S) source ids + eos, padded
    tgt_in: Tensor  # (B, T) bos + target ids, padded: the decoder's input
    tgt_out: Tensor  # (B, T) target ids + eos, padded: what it must predict
    n_tgt_tokens: int  # real (non-pad) positions of tgt_out

    def to(self, device: torch.device | str) -> Batch:
        return Batch(self.src.to(device, non_blocking=True), self.tgt_in.to(device, non_blocking=True),
                     self.tgt_out.to(device, non_blocking=True), self.n_tgt_tokens)


def collate(indices: np.ndarray, corpus: TokenizedCorpus, pad_id: int, bos_id: int | None, eos_id: int
            ) -> Batch:
    """Pad the pairs `indices` into one batch. `bos_id` None: each target's first token is the
    decoder's start instead (a multilingual target language, data/multilingual.py), not predicted."""
    sources = [corpus.source[i] + [eos_id] for i in indices]
    targets = [corpus.target[i] for i in indices]
    src = pad(sources, pad_id)
    if bos_id is None:
        starts, targets = [t[:1] for t in targets], [t[1:] for t in targets]
    else:
        starts = [[bos_id]] * len(targets)
    tgt_in = pad([s + t for s, t in zip(starts, targets, strict=True)], pad_id)
    tgt_out = pad([t + [eos_id] for t in targets], pad_id)
    return Batch(src, tgt_in, tgt_out, sum(len(t) + 1 for t in targets))


def pad(rows: list[list[int]], pad_id: int) -> Tensor:
    """Token id rows of different lengths -> one (B, max length) tensor, padded on the right."""
    out = np.full((len(rows), max(map(len, rows))), pad_id, dtype=np.int64)  # (B, max length)
    for r, row in enumerate(rows):
        out[r, : len(row)] = row
    return torch.from_numpy(out)
