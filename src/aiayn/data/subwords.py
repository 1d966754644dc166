"""BPE-dropout (Provilkov et al., 2020): each training sentence's pieces sampled afresh every epoch.

    aiayn train --bpe-dropout 0.1 ...

A BPE tokenizer always cuts a word the same way, so the model never sees the smaller pieces a
frequent word is made of. BPE-dropout cuts a word as BPE does, from its characters up, merging at
each step the two neighbours whose merge is earliest in the vocabulary, except that every merge
on offer is dropped with probability P at each step: "▁blue" comes as "▁b l u e" now and then, the
same text in pieces of the same vocabulary. The model learns how words are spelled, which helps
most on small corpora. Validation and translation always cut the usual way.

The merges are read from the tokenizer's SentencePiece BPE model (a piece is the merge of any two
pieces it splits into; the higher its score, the earlier); with P = 0 this gives SentencePiece's own
pieces exactly. A sentence is cut again from its usual pieces, word by word (a word begins with
"▁"), so any corpus can be sampled: lists of ids, a data directory of `aiayn prepare` read through
memory maps, a parent's tokenizer with `--init-from`. Words with pieces that are not plain text (a
byte of a character the vocabulary lacks, a piece such as `>>fr<<` that tells a multilingual model
its target language) keep their usual pieces.

The draws are Python's generator, seeded from (the run's seed, the epoch, the pair, the side): the
same sentence gets the same pieces in a run resumed at any update, on every rank of a distributed
run, whatever batch it falls into, and new pieces every epoch. (SentencePiece's own sampling cannot be
seeded that way: its generators are seeded once per thread.) An epoch's pieces are drawn when it
begins, all at once (`Resampler.drawn`: a few seconds for Multi30k, kept end to end in two arrays),
so that its batches are made from the drawn lengths: a batch holds --batch-tokens tokens as drawn,
with as little padding as usual (batches made from the usual lengths were a third padding).
Drawn sentences are longer (about a fifth at P = 0.1 on Multi30k). A draw longer than the run's
--max-len keeps the usual pieces.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from sentencepiece import sentencepiece_model_pb2 as spm_model

from aiayn.config import ConfigError
from aiayn.data.binarized import TokenStore
from aiayn.tokenizer import Tokenizer

SIDES = ("source", "target")
NORMAL = spm_model.ModelProto.SentencePiece.Type.NORMAL
NONE = float("-inf")
CHUNK = 10_000  # pairs drawn at a time
WORDS = 1_000_000  # words whose usual cut is remembered (Multi30k has about 30,000)


class Merges:
    """One SentencePiece BPE vocabulary as merges: which two pieces make which, and how early."""

    def __init__(self, proto: bytes) -> None:
        model = spm_model.ModelProto()
        model.ParseFromString(proto)
        self.pieces = [p.piece for p in model.pieces]
        self.plain = [p.type == NORMAL for p in model.pieces]
        ids = {p.piece: i for i, p in enumerate(model.pieces) if p.type == NORMAL}
        self.chars = {piece: i for piece, i in ids.items() if len(piece) == 1}
        self.size = len(model.pieces)
        self.merged: dict[int, tuple[float, int]] = {}  # left * size + right -> (score, the merged piece)
        for i, p in enumerate(model.pieces):
            if p.type != NORMAL:
                continue
            for cut in range(1, len(p.piece)):
                left, right = ids.get(p.piece[:cut]), ids.get(p.piece[cut:])
                if left is not None and right is not None:
                    self.merged[left * self.size + right] = (p.score, i)
        self._words: dict[str, tuple[list[int], list[tuple[int, int]]] | None] = {}  # `_usual`'s

    def sentence(self, ids: list[int], p: float, rng: random.Random) -> list[int]:
        """A sentence's usual pieces `ids`, each word cut again with dropout `p`."""
        out: list[int] = []
        word: list[int] = []
        for i in [*ids, -1]:  # -1: the end
            if i < 0 or not self.plain[i] or self.pieces[i].startswith("▁"):
                out += self._word(word, p, rng)
                word = []
            if i >= 0 and not self.plain[i]:
                out.append(i)  # a control, byte or user-defined piece stays as it is
            elif i >= 0:
                word.append(i)
        return out

    def _word(self, usual: list[int], p: float, rng: random.Random) -> list[int]:
        """One word's usual pieces `usual`, cut again from its characters with dropout `p`.

        Dropping each merge on offer with p and taking the best one left is taking them best first
        (the leftmost of equals first) until one is not dropped. So while the best is not dropped,
        the word is cut as usual: one draw per usual merge, and the usual pieces if none is dropped;
        from the first that is, the rest is drawn step by step."""
        if not usual:
            return usual
        known = self._usual(usual)
        if known is None:  # a character outside the vocabulary: its bytes stay as they were cut
            return usual
        chars, path = known
        rand = rng.random
        for k, _ in enumerate(path):
            if rand() < p:  # step k's best merge is dropped
                symbols = list(chars)
                for at, piece in path[:k]:
                    symbols[at:at + 2] = [piece]
                return self._drawn(symbols, p, rand, dropped=1)
        return usual

    def _usual(self, usual: list[int]) -> tuple[list[int], list[tuple[int, int]]] | None:
        """A word's characters (ids) and the merges that cut it as usual, (where, piece) in order; None
        when a character has no piece. Remembered for the words seen (up to `WORDS` of them)."""
        text = "".join(self.pieces[i] for i in usual)
        if text in self._words:
            return self._words[text]
        chars = [self.chars.get(c) for c in text]
        known = None
        if None not in chars:
            path: list[tuple[int, int]] = []
            symbols = list(chars)
            self._drawn(symbols, 0.0, lambda: 1.0, path=path)
            known = (chars, path)
        if len(self._words) < WORDS:
            self._words[text] = known
        return known

    def _drawn(self, symbols: list[int], p: float, rand: Callable[[], float], dropped: int = 0,
               path: list[tuple[int, int]] | None = None) -> list[int]:
        """Merge `symbols` (in place) step by step, each step's merges best first until one is not
        dropped; the first step's `dropped` best ones are dropped already. `path`: the merges made."""
        get, size = self.merged.get, self.size
        merges = [get(a * size + b) for a, b in zip(symbols, symbols[1:], strict=False)]
        while True:
            at, best = -1, NONE
            if not dropped:  # the best (the leftmost of equals), mostly not dropped
                for j, merge in enumerate(merges):
                    if merge is not None and merge[0] > best:
                        at, best = j, merge[0]
            if at < 0 or rand() < p:  # none, or dropped: the next best in turn
                offered = sorted((j for j, m in enumerate(merges) if m is not None),
                                 key=lambda j: -merges[j][0])
                at = next((j for j in offered[max(dropped, at >= 0):] if rand() >= p), -1)
            dropped = 0
            if at < 0:
                return symbols
            piece = merges[at][1]
            if path is not None:
                path.append((at, piece))
            symbols[at:at + 2] = [piece]
            del merges[at]
            if at > 0:
                merges[at - 1] = get(symbols[at - 1] * size + symbols[at])
            if at < len(merges):
                merges[at] = get(symbols[at] * size + symbols[at + 1])

class Resampler:
    """Draws a sentence's pieces with BPE-dropout `p`, reproducibly from (seed, epoch, pair, side)."""

    def __init__(self, tokenizer: Tokenizer, p: float, seed: int, max_len: int) -> None:
        if tokenizer.vocab is not None or not tokenizer.is_bpe():
            raise ConfigError(f"--bpe-dropout {p:g} drops BPE merges, and this tokenizer is not a BPE "
                              "model (OPUS-MT's are unigram models): train without --bpe-dropout")
        self.p, self.seed, self.max_len = p, seed, max_len
        self._last: tuple[tuple[int, int], Drawn] | None = None  # ((corpus, epoch), its pieces)
        merges = {proto: Merges(proto) for proto in {tokenizer.model_proto(side) for side in SIDES}}
        self.merges = {side: merges[tokenizer.model_proto(side)] for side in SIDES}

    def row(self, ids: list[int], side: str, epoch: int, pair: int) -> list[int]:
        """The pieces of pair `pair`'s sentence on `side` in `epoch`."""
        rng = random.Random(hash((self.seed, epoch, pair, SIDES.index(side))))  # ints hash alike everywhere
        drawn = self.merges[side].sentence(ids, self.p, rng)
        return ids if len(drawn) > self.max_len else drawn

    def drawn(self, corpus: Any, epoch: int) -> Drawn:
        """`corpus` (anything with `source[i]`, `target[i]` and a length) with every pair's pieces as
        `epoch` draws them; the last epoch drawn is kept, so asking again costs nothing."""
        key = (id(corpus), epoch)
        if self._last is None or self._last[0] != key:
            self._last = (key, Drawn(*(self._side(getattr(corpus, side), side, epoch, len(corpus))
                                       for side in SIDES)))
        return self._last[1]

    def _side(self, rows: Any, side: str, epoch: int, n: int) -> TokenStore:
        """One side's pieces as `epoch` draws them, end to end (`TokenStore`), a chunk at a time."""
        tokens, lengths = [], []
        for start in range(0, n, CHUNK):
            drawn = [self.row(list(rows[i]), side, epoch, i) for i in range(start, min(start + CHUNK, n))]
            lengths.append(np.fromiter(map(len, drawn), np.int64, len(drawn)))
            tokens.append(np.fromiter(itertools.chain.from_iterable(drawn), np.int32))
        offsets = np.concatenate([[0], np.cumsum(np.concatenate(lengths))]) if n else np.zeros(1, np.int64)
        return TokenStore(np.concatenate(tokens) if n else np.zeros(0, np.int32), offsets)


@dataclass
class Drawn:
    """A corpus's pieces as one epoch draws them: `source[i]` and `target[i]` (what `batching.collate`
    reads), and their lengths (what batches are made from)."""

    source: TokenStore
    target: TokenStore

    def __len__(self) -> int:
        return len(self.source)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Padded-length contributions, as `TokenizedCorpus.lengths`: source + eos, target + bos."""
        return self.source.lengths() + 1, self.target.lengths() + 1
