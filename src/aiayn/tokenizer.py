"""A thin SentencePiece wrapper: text to the model's ids and back.

aiayn's own models use one joint BPE model for source and target whose ids are the model's ids,
with fixed special ids <pad>=0, <unk>=1, <s>=2 (bos), </s>=3 (eos). It has no text normalisation
and byte fallback for unseen characters, so `decode(encode(s)) == s` for any sentence without
leading, trailing or repeated spaces. It is saved as `tokenizer.model`. With separate
vocabularies, one such model per language, each with its own ids (the source's for the encoder,
the target's for the decoder), saved as `source.model` and `target.model`.

A multilingual model's vocabulary holds one piece per language, `>>fr<<` (OPUS-MT's form), that
tells the model which language to translate into (`learn_languages`, `language_id`).

Models converted from Marian (OPUS-MT) keep their own files: a source and a target SentencePiece
model whose pieces map to ids through a vocabulary (`source.spm`, `target.spm`, `vocab.json`, and
`target_vocab.json` when the target has its own); there the decoder starts from <pad> when the
vocabulary has no <s>.
"""

from __future__ import annotations

import io
import json
import random
import re
from collections.abc import Iterable
from pathlib import Path

import sentencepiece as spm

from aiayn.errors import AiaynError

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
JOINT_FILE = "tokenizer.model"
SEPARATE_FILES = ("source.model", "target.model")
MARIAN_FILES = ("source.spm", "target.spm", "vocab.json")
MARIAN_TARGET_VOCAB = "target_vocab.json"  # Marian's separate vocabularies
FEWEST_PIECES = 4 + 256 + 1  # the special pieces, one per byte (byte fallback), at least one character
# SentencePiece encodes a list of texts on a pool of threads it starts for the call, which costs many
# times the encoding of one sentence and is repaid from about this many texts on 2 cores (a server's
# request holds one or a few; benchmarks/detail/serve_load.md). Fewer are encoded one by one.
POOLED_FROM = 128
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(?:_[A-Za-z]+)?")  # fr, fra, zho_Hans
LANGUAGE_PIECE = re.compile(rf">>({LANGUAGE_CODE.pattern})<<")  # >>fr<<: asks for a target language


def language_piece(lang: str) -> str:
    """The piece that names a target language: >>fr<<."""
    return f">>{lang}<<"


class TokenizerError(AiaynError, ValueError):
    """A tokenizer that cannot be learned or read; the message says why, and names the file."""


class Tokenizer:
    def __init__(self, source: bytes, target: bytes | None = None, vocab: list[str] | None = None,
                 target_vocab: list[str] | None = None) -> None:
        """`source`/`target`: serialised SentencePiece models (one joint model when `target` is None);
        `vocab`: the piece of each model id, when ids are not the SentencePiece ids (Marian's);
        `target_vocab`: the target's, when it has its own (Marian's separate vocabularies)."""
        self.source_proto, self.target_proto = source, target
        self.vocab, self.target_vocab = vocab, target_vocab if vocab is not None else None
        self.source_sp = spm.SentencePieceProcessor(model_proto=source)
        self.target_sp = self.source_sp if target is None else spm.SentencePieceProcessor(model_proto=target)
        self._vocabs = {"source": vocab, "target": self.target_vocab or vocab}
        if vocab is None:
            sp = self.source_sp
            self.pad_id, self.unk_id = sp.pad_id(), sp.unk_id()
            self.bos_id, self.eos_id = sp.bos_id(), sp.eos_id()
            return
        self._ids = {side: {piece: i for i, piece in enumerate(pieces)}
                     for side, pieces in self._vocabs.items()}
        ids = self._ids["source"]
        self.pad_id, self.unk_id, self.eos_id = ids["<pad>"], ids["<unk>"], ids["</s>"]
        self.bos_id = ids.get("<s>", self.pad_id)
        target = self._ids["target"]
        if any(target.get(piece) != i for piece, i in (("<pad>", self.pad_id), ("</s>", self.eos_id))):
            raise TokenizerError("the target vocabulary's <pad> and </s> ids differ from the source's")

    @classmethod
    def train(cls, sentences: Iterable[str], vocab_size: int, seed: int = 1) -> Tokenizer:
        """Learn a joint BPE vocabulary of at most `vocab_size` pieces from source + target sentences."""
        return cls(cls._learn(sentences, vocab_size, seed))

    @classmethod
    def learn(cls, source: list[str], target: list[str], vocab_size: int, seed: int = 1,
              src_vocab_size: int | None = None) -> Tokenizer:
        """One joint BPE vocabulary of `vocab_size` pieces from both sides, or with `src_vocab_size`
        one per language (that many source pieces, `vocab_size` target pieces)."""
        if src_vocab_size:
            return cls.train_separate(source, target, src_vocab_size, vocab_size, seed)
        return cls.train(source + target, vocab_size, seed)

    @classmethod
    def learn_languages(cls, texts: dict[str, list[str]], vocab_size: int, seed: int = 1) -> Tokenizer:
        """One joint BPE vocabulary for several languages (`texts`: the sentences of each), learned
        on as many sentences of each (a seeded sample of the larger ones down to the smallest), so
        that no language is starved; with one piece per language, `>>fr<<`, kept whole."""
        fewest = min(len(sentences) for sentences in texts.values())
        rng = random.Random(seed)
        balanced = [s for lang in sorted(texts) for s in
                    (texts[lang] if len(texts[lang]) == fewest else rng.sample(texts[lang], fewest))]
        return cls(cls._learn(balanced, vocab_size, seed, [language_piece(lang) for lang in sorted(texts)]))

    def language_id(self, lang: str) -> int | None:
        """The id of the piece `>>lang<<` in the source vocabulary, or None when it has none."""
        piece = language_piece(lang)
        if self.vocab is not None:
            return self._ids["source"].get(piece)
        i = self.source_sp.piece_to_id(piece)
        return i if self.source_sp.id_to_piece(i) == piece and i != self.unk_id else None

    def languages(self) -> list[str]:
        """The languages the vocabulary has a `>>xx<<` piece for, in id order."""
        pieces = self._vocabs["source"] or [self.source_sp.id_to_piece(i)
                                            for i in range(self.source_sp.get_piece_size())]
        return [m[1] for piece in pieces if (m := LANGUAGE_PIECE.fullmatch(piece))]

    @classmethod
    def train_separate(cls, source: Iterable[str], target: Iterable[str], source_size: int, target_size: int,
                       seed: int = 1) -> Tokenizer:
        """Learn one BPE vocabulary per language: `source_size` pieces from the source sentences,
        `target_size` from the target sentences."""
        return cls(cls._learn(source, source_size, seed), cls._learn(target, target_size, seed))

    @classmethod
    def _learn(cls, sentences: Iterable[str], vocab_size: int, seed: int, symbols: list[str] = ()) -> bytes:
        if vocab_size < FEWEST_PIECES:
            raise TokenizerError(f"vocab_size={vocab_size} is too small: a tokenizer needs at least "
                                 f"{FEWEST_PIECES} pieces (4 special, 256 bytes, then characters and merges)")
        model = io.BytesIO()
        try:
            cls._train(sentences, vocab_size, seed, model, symbols)
        except RuntimeError as e:
            needed = re.search(r"smaller than required_chars\. \d+ vs (\d+)", str(e))
            if needed:
                raise TokenizerError(f"vocab_size={vocab_size} is too small for this text: it needs at "
                                     f"least {needed[1]} pieces (special, byte and character)") from None
            raise TokenizerError(f"cannot learn a tokenizer: {str(e).strip().splitlines()[-1]}") from None
        return model.getvalue()

    @staticmethod
    def _train(sentences: Iterable[str], vocab_size: int, seed: int, model: io.BytesIO,
               symbols: list[str] = ()) -> None:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(sentences),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            hard_vocab_limit=False,  # a small corpus may support fewer pieces than asked
            character_coverage=1.0,
            byte_fallback=True,
            normalization_rule_name="identity",
            user_defined_symbols=list(symbols),  # pieces kept whole wherever they occur
            pad_id=PAD_ID, unk_id=UNK_ID, bos_id=BOS_ID, eos_id=EOS_ID,
            input_sentence_size=2_000_000, shuffle_input_sentence=True,
            num_threads=2,
            minloglevel=2,
        )

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """From a directory holding tokenizer.model (or Marian's files), or a SentencePiece model file."""
        path = Path(path)
        if path.is_file():
            return cls(_model_bytes(path))
        if (path / JOINT_FILE).exists():
            return cls(_model_bytes(path / JOINT_FILE))
        if all((path / name).exists() for name in SEPARATE_FILES):
            return cls(*(_model_bytes(path / name) for name in SEPARATE_FILES))
        if all((path / name).exists() for name in MARIAN_FILES):
            target_vocab = path / MARIAN_TARGET_VOCAB
            return cls(_model_bytes(path / "source.spm"), _model_bytes(path / "target.spm"),
                       _marian_vocab(path / "vocab.json"),
                       _marian_vocab(target_vocab) if target_vocab.exists() else None)
        raise TokenizerError(f"{path}: no tokenizer there (no {JOINT_FILE}, nor "
                             f"{' and '.join(SEPARATE_FILES)}, nor {', '.join(MARIAN_FILES)})")

    def save(self, directory: str | Path) -> None:
        """Write the tokenizer's files into `directory`."""
        directory = Path(directory)
        if self.vocab is None and self.target_proto is None:
            (directory / JOINT_FILE).write_bytes(self.source_proto)
            return
        if self.vocab is None:  # aiayn's separate vocabularies
            for name, proto in zip(SEPARATE_FILES, (self.source_proto, self.target_proto), strict=True):
                (directory / name).write_bytes(proto)
            return
        (directory / "source.spm").write_bytes(self.source_proto)
        (directory / "target.spm").write_bytes(self.target_proto or self.source_proto)
        for name, vocab in (("vocab.json", self.vocab), (MARIAN_TARGET_VOCAB, self.target_vocab)):
            if vocab is not None:
                ids = {piece: i for i, piece in enumerate(vocab)}
                text = json.dumps(ids, ensure_ascii=False, indent=1)
                (directory / name).write_text(text, encoding="utf-8")

    def __eq__(self, other: object) -> bool:
        """The same pieces with the same ids on both sides."""
        if not isinstance(other, Tokenizer):
            return NotImplemented
        return self._key() == other._key()

    def _key(self) -> tuple:
        return self.source_proto, self.target_proto, self.vocab, self.target_vocab

    @property
    def separate(self) -> bool:
        """Source and target ids are apart: one vocabulary per language."""
        return (self.vocab is None and self.target_proto is not None) or self.target_vocab is not None

    @property
    def vocab_size(self) -> int:
        """Ids of the target side (all ids, with one joint vocabulary)."""
        return self._size("target")

    @property
    def source_vocab_size(self) -> int:
        return self._size("source")

    def _size(self, side: str) -> int:
        vocab = self._vocabs[side]
        return len(vocab) if vocab is not None else self._sp(side).get_piece_size()

    def _sp(self, side: str) -> spm.SentencePieceProcessor:
        return self.source_sp if side == "source" else self.target_sp

    def encode(self, texts: list[str], side: str = "source") -> list[list[int]]:
        """Sentences of one side -> subword ids, without bos/eos."""
        sp = self._sp(side)
        out_type = int if self.vocab is None else str
        if len(texts) >= POOLED_FROM:
            encoded = sp.encode(texts, out_type=out_type)
        else:
            encoded = [sp.encode(text, out_type=out_type) for text in texts]
        if self.vocab is None:
            return encoded
        ids = self._ids[side]
        return [[ids.get(piece, self.unk_id) for piece in pieces] for pieces in encoded]

    def model_proto(self, side: str = "source") -> bytes:
        """The serialised SentencePiece model of one side (the joint one for both)."""
        return self.source_proto if side == "source" or self.target_proto is None else self.target_proto

    def is_bpe(self) -> bool:
        """Whether every SentencePiece model here is a BPE one (BPE-dropout's premise); Marian's
        (OPUS-MT) are unigram models."""
        return all(_model_type(proto) == "BPE" for proto in (self.source_proto, self.target_proto) if proto)

    def decode(self, ids: list[int]) -> str:
        """Target ids -> text; stops at the first eos and skips pad and bos."""
        if self.eos_id in ids:
            ids = ids[: ids.index(self.eos_id)]
        ids = [i for i in ids if i not in (self.pad_id, self.bos_id)]
        if self.vocab is None:
            return self.target_sp.decode(ids)
        return self.target_sp.decode_pieces(self.pieces(ids))

    def pieces(self, ids: list[int], side: str = "target") -> list[str]:
        """The pieces of ids of one side."""
        vocab = self._vocabs[side]
        return [vocab[i] for i in ids] if vocab is not None else [self._sp(side).id_to_piece(i) for i in ids]


def _model_bytes(path: Path) -> bytes:
    """A serialised SentencePiece model, checked."""
    data = path.read_bytes()
    try:
        if not data:
            raise RuntimeError("the file is empty")
        spm.SentencePieceProcessor(model_proto=data)
    except RuntimeError as e:
        reason = "it does not parse" if "Parse" in str(e) or not str(e).strip() else str(e).strip()
        raise TokenizerError(f"{path}: not a SentencePiece model ({reason})") from None
    return data


def _model_type(proto: bytes) -> str:
    """UNIGRAM, BPE, WORD or CHAR: how a serialised SentencePiece model cuts text."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(proto)
    return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(model.trainer_spec.model_type)


def _marian_vocab(path: Path) -> list[str]:
    """Marian's vocab.json (piece -> id) as the piece of each id."""
    try:
        ids = json.loads(path.read_bytes())
        vocab = [""] * (max(ids.values()) + 1)
        for piece, i in ids.items():
            vocab[i] = piece
    except (ValueError, TypeError, AttributeError, IndexError) as e:
        raise TokenizerError(f"{path}: not a vocabulary of piece -> id ({e})") from None
    for piece in ("<pad>", "<unk>", "</s>"):
        if piece not in ids:
            raise TokenizerError(f"{path}: the vocabulary has no {piece}")
    return vocab
