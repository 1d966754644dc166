"""A thin SentencePiece BPE wrapper: one joint vocabulary for source and target.

Fixed special ids: <pad>=0, <unk>=1, <s>=2 (bos), </s>=3 (eos). No text normalisation and
byte fallback for unseen characters, so `decode(encode(s)) == s` for any sentence without
leading, trailing or repeated spaces.
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3


class Tokenizer:
    def __init__(self, model_proto: bytes) -> None:
        self.model_proto = model_proto
        self.sp = spm.SentencePieceProcessor(model_proto=model_proto)
        self.pad_id, self.unk_id = self.sp.pad_id(), self.sp.unk_id()
        self.bos_id, self.eos_id = self.sp.bos_id(), self.sp.eos_id()

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, seed: int = 1) -> Tokenizer:
        """Learn a BPE vocabulary of at most `vocab_size` pieces from `sentences` (source + target)."""
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            hard_vocab_limit=False,  # a small corpus may support fewer pieces than asked
            character_coverage=1.0,
            byte_fallback=True,
            normalization_rule_name="identity",
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,
            num_threads=2,
            minloglevel=2,
        )
        return cls(model.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        return cls(Path(path).read_bytes())

    def save(self, path: str | Path) -> None:
        Path(path).write_bytes(self.model_proto)

    @property
    def vocab_size(self) -> int:
        return self.sp.get_piece_size()

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Sentences -> subword ids, without bos/eos."""
        return self.sp.encode(texts)

    def decode(self, ids: list[int]) -> str:
        """Ids -> text; stops at the first eos and skips pad and bos."""
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        return self.sp.decode([i for i in ids if i not in (self.pad_id, self.bos_id)])

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.sp.id_to_piece(i) for i in ids]
