"""A prepared data directory: what `aiayn prepare` writes and `aiayn train --data` reads.

    DATA_DIR/
      tokenizer.model   the joint SentencePiece model, learned on a bounded random sample of pairs
      data.json         the languages, the specs the corpora came from, the length limit
      train/            the tokenized training corpus (`binarized.MappedCorpus`)
      valid/            the tokenized validation corpus, when there is one

Everything is read and written in one streaming pass per corpus, in memory that does not grow
with the corpus; the directory appears whole or not at all.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from aiayn.data import binarized
from aiayn.data.corpora import default_valid, iter_pairs, sample_pairs
from aiayn.data.readers import DataError
from aiayn.files import replacing
from aiayn.tokenizer import Tokenizer

FORMAT = 1
META = "data.json"
TOKENIZER = "tokenizer.model"


@dataclass(frozen=True)
class PreparedData:
    path: Path
    src_lang: str
    tgt_lang: str
    train: str  # the spec the training corpus was read from
    valid: str  # the spec of the validation corpus; "" when there is none
    max_len: int  # pairs with more tokens than this on a side were left out

    def data_options(self) -> dict[str, str]:
        """The DataConfig fields that `--data` stands for."""
        return {"train": str(self.path / "train"),
                "valid": str(self.path / "valid") if self.valid else "",
                "tokenizer": str(self.path), "src_lang": self.src_lang, "tgt_lang": self.tgt_lang}


def is_data_dir(path: Path) -> bool:
    """A directory `prepare` wrote (or an older tokenizer-only one, which it may replace)."""
    return (path / META).is_file() or (path / TOKENIZER).is_file()


def learn_tokenizer(spec: str, src_lang: str, tgt_lang: str, vocab_size: int, seed: int,
                    sample_size: int, src_vocab_size: int | None = None) -> tuple[Tokenizer, str]:
    """A tokenizer learned on a uniform random sample of at most `sample_size` pairs of `spec`, and
    what it was learned from, in words: one joint vocabulary of `vocab_size` pieces, or with
    `src_vocab_size` separate ones (that many source pieces, `vocab_size` target pieces)."""
    pairs, total = sample_pairs(iter_pairs(spec, src_lang, tgt_lang), sample_size, seed)
    source, target = [s for s, _ in pairs], [t for _, t in pairs]
    if not any(source) and not any(target):
        raise DataError(f"{spec}: no text to learn a tokenizer from ({total:,} empty pairs)")
    read = (f"{total:,} pairs" if len(pairs) == total
            else f"a random sample of {len(pairs):,} of {total:,} pairs")
    return Tokenizer.learn(source, target, vocab_size, seed, src_vocab_size), read


def prepare(out: str | Path, train: str, valid: str | None, src_lang: str, tgt_lang: str,
            tokenizer: Tokenizer, max_len: int, force: bool = False) -> PreparedData:
    """Write `tokenizer` and the tokenized `train` (and `valid`; None: the named dataset's own
    validation split, if any) corpora into the data directory `out`."""
    valid = default_valid(train) if valid is None else valid
    prepared = PreparedData(Path(out), src_lang, tgt_lang, train, valid, max_len)
    with replacing(out, "prepared data directory", is_data_dir, force) as tmp:
        tokenizer.save(tmp)
        binarized.write(tmp / "train", iter_pairs(train, src_lang, tgt_lang), tokenizer, max_len,
                        progress=f"encoding {train}")
        if valid:
            binarized.write(tmp / "valid", iter_pairs(valid, src_lang, tgt_lang), tokenizer, None,
                            progress=f"encoding {valid}")
        meta = {"format": FORMAT, **asdict(prepared)}
        del meta["path"]
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return prepared


def load(path: str | Path) -> PreparedData:
    """The data directory at `path`, checked; a DataError names what is wrong."""
    path = Path(path)
    meta_path = path / META
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        hint = " (it holds only a tokenizer: pass it as --tokenizer)" if (path / TOKENIZER).is_file() else ""
        raise DataError(f"{path}: not a prepared data directory, no {META}{hint}; make one with "
                        "`aiayn prepare --train SPEC --out DIR`") from None
    except (OSError, ValueError) as e:
        raise DataError(f"{meta_path}: cannot read: {e}") from None
    fields = ("src_lang", "tgt_lang", "train", "valid", "max_len")
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not all(k in meta for k in fields):
        raise DataError(f"{meta_path}: not a data directory description of format {FORMAT}")
    prepared = PreparedData(path, *(meta[k] for k in fields))
    for corpus in ("train", "valid") if prepared.valid else ("train",):
        if not binarized.is_corpus_dir(path / corpus):
            raise DataError(f"{path / corpus}: missing or damaged; run `aiayn prepare` again")
    return prepared
