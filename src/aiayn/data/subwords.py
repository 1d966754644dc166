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
seeded that way: its generators are seeded once per thread.) Batches are formed from the usual
lengths; drawn sentences are longer (about a fifth at P = 0.1 on Multi30k), so batches hold that many
more tokens than --batch-tokens. A draw longer than the run's --max-len keeps the usual pieces.
"""

from __future__ import annotations

import random
from typing import Any

from sentencepiece import sentencepiece_model_pb2 as spm_model

from aiayn.config import ConfigError
from aiayn.tokenizer import Tokenizer

SIDES = ("source", "target")
NORMAL = spm_model.ModelProto.SentencePiece.Type.NORMAL


class Merges:
    """One SentencePiece BPE vocabulary as merges: which two pieces make which, and how early."""

    def __init__(self, proto: bytes) -> None:
        model = spm_model.ModelProto()
        model.ParseFromString(proto)
        self.pieces = [p.piece for p in model.pieces]
        self.plain = [p.type == NORMAL for p in model.pieces]
        ids = {p.piece: i for i, p in enumerate(model.pieces) if p.type == NORMAL}
        self.chars = {piece: i for piece, i in ids.items() if len(piece) == 1}
        self.merged: dict[tuple[int, int], tuple[float, int]] = {}  # (left, right) -> (score, piece)
        for i, p in enumerate(model.pieces):
            if p.type != NORMAL:
                continue
            for cut in range(1, len(p.piece)):
                left, right = ids.get(p.piece[:cut]), ids.get(p.piece[cut:])
                if left is not None and right is not None:
                    self.merged[left, right] = (p.score, i)
        self._word_chars: dict[str, list[int] | None] = {}  # a word's text -> its characters' ids

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
        if len(usual) == 0:
            return usual
        text = "".join(self.pieces[i] for i in usual)
        if text not in self._word_chars:
            chars = [self.chars.get(c) for c in text]
            self._word_chars[text] = None if None in chars else chars
        symbols = self._word_chars[text]
        if symbols is None:  # a character outside the vocabulary: its bytes stay as they were cut
            return usual
        merged = self.merged
        while len(symbols) > 1:
            best, at, piece = float("-inf"), -1, 0
            for j in range(len(symbols) - 1):
                merge = merged.get((symbols[j], symbols[j + 1]))
                if merge is not None and merge[0] > best and rng.random() >= p:  # dropped with p
                    best, at, piece = merge[0], j, merge[1]
            if at < 0:
                break
            symbols = [*symbols[:at], piece, *symbols[at + 2:]]
        return symbols


class Resampler:
    """Draws a sentence's pieces with BPE-dropout `p`, reproducibly from (seed, epoch, pair, side)."""

    def __init__(self, tokenizer: Tokenizer, p: float, seed: int, max_len: int) -> None:
        if tokenizer.vocab is not None or not tokenizer.is_bpe():
            raise ConfigError(f"--bpe-dropout {p:g} drops BPE merges, and this tokenizer is not a BPE "
                              "model (OPUS-MT's are unigram models): train without --bpe-dropout")
        self.p, self.seed, self.max_len = p, seed, max_len
        merges = {proto: Merges(proto) for proto in {tokenizer.model_proto(side) for side in SIDES}}
        self.merges = {side: merges[tokenizer.model_proto(side)] for side in SIDES}

    def row(self, ids: list[int], side: str, epoch: int, pair: int) -> list[int]:
        """The pieces of pair `pair`'s sentence on `side` in `epoch`."""
        rng = random.Random(hash((self.seed, epoch, pair, SIDES.index(side))))  # ints hash alike everywhere
        drawn = self.merges[side].sentence(ids, self.p, rng)
        return ids if len(drawn) > self.max_len else drawn

    def epoch(self, corpus: Any, epoch: int) -> Sampled:
        """`corpus` (anything with `source[i]` and `target[i]`) as `epoch` draws its pieces."""
        return Sampled(self, corpus, epoch)


class _Side:
    def __init__(self, resampler: Resampler, rows: Any, side: str, epoch: int) -> None:
        self.resampler, self.rows, self.side, self.epoch = resampler, rows, side, epoch

    def __getitem__(self, i: int) -> list[int]:
        return self.resampler.row(list(self.rows[i]), self.side, self.epoch, int(i))


class Sampled:
    """A corpus whose `source[i]` and `target[i]` are pair i's pieces as drawn in one epoch
    (what `batching.collate` reads)."""

    def __init__(self, resampler: Resampler, corpus: Any, epoch: int) -> None:
        self.source = _Side(resampler, corpus.source, "source", epoch)
        self.target = _Side(resampler, corpus.target, "target", epoch)
