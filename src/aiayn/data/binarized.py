"""A tokenized parallel corpus on disk, read through memory maps: corpora of any size in bounded memory.

A corpus directory holds, per side, the token ids of every sentence end to end
(`source.tokens`, `target.tokens`: uint16 when the vocabulary fits, else uint32) and where each
sentence starts (`source.offsets`, `target.offsets`: int64, one more than the pairs), plus
`corpus.json` (format, counts, the tokenizer's size). `write` encodes pairs in one streaming pass,
a chunk at a time, so its memory does not grow with the corpus; `MappedCorpus` reads the files as
memory maps, so several processes on one machine share one copy through the page cache, and it
answers what training asks of a `TokenizedCorpus`: `source[i]`, `target[i]`, `lengths()`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tqdm import tqdm

from aiayn.data.batching import summary, tokenize
from aiayn.data.readers import DataError, ParallelCorpus
from aiayn.files import replacing
from aiayn.tokenizer import Tokenizer

FORMAT = 1
META = "corpus.json"
SIDES = ("source", "target")
CHUNK = 10_000  # pairs encoded at a time


def is_corpus_dir(path: Path) -> bool:
    return (Path(path) / META).is_file()


def write(out: str | Path, pairs: Iterable[tuple[str, str]], tokenizer: Tokenizer,
          max_len: int | None = None, chunk: int = CHUNK, force: bool = False,
          progress: str | None = None) -> MappedCorpus:
    """Encode `pairs` (read once, `chunk` at a time) into the corpus directory `out`, dropping pairs
    with an empty side and pairs longer than `max_len` tokens, as `batching.tokenize` does. The
    directory appears whole or not at all. `progress`: a bar's description, or None for no bar."""
    largest = max(tokenizer.source_vocab_size, tokenizer.vocab_size)
    dtype = np.uint16 if largest <= np.iinfo(np.uint16).max + 1 else np.uint32
    counts = {"pairs": 0, "dropped_empty": 0, "dropped_long": 0, "source_tokens": 0, "target_tokens": 0}
    with replacing(out, "tokenized corpus", is_corpus_dir, force) as tmp:
        files = {f"{side}.{kind}": open(tmp / f"{side}.{kind}", "wb")
                 for side in SIDES for kind in ("tokens", "offsets")}
        try:
            for side in SIDES:
                files[f"{side}.offsets"].write(np.zeros(1, np.int64).tobytes())
            iterator = iter(pairs)
            with tqdm(desc=progress, unit=" pairs", unit_scale=True, disable=progress is None,
                      leave=False) as bar:
                while block := list(itertools.islice(iterator, chunk)):
                    _write_block(block, tokenizer, max_len, dtype, files, counts)
                    bar.update(len(block))
        finally:
            for f in files.values():
                f.close()
        meta = {"format": FORMAT, "dtype": np.dtype(dtype).name, "vocab_size": tokenizer.vocab_size,
                "source_vocab_size": tokenizer.source_vocab_size, "max_len": max_len, **counts}
        (tmp / META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    return MappedCorpus(out)


def _write_block(block: list[tuple[str, str]], tokenizer: Tokenizer, max_len: int | None, dtype: type,
                 files: dict, counts: dict[str, int]) -> None:
    kept = tokenize(ParallelCorpus([s for s, _ in block], [t for _, t in block], "block"), tokenizer, max_len)
    counts["pairs"] += len(kept)
    counts["dropped_empty"] += kept.dropped_empty
    counts["dropped_long"] += kept.dropped_long
    for side in SIDES:
        rows = getattr(kept, side)
        if not rows:
            continue
        lengths = np.fromiter(map(len, rows), np.int64, len(rows))
        offsets = counts[f"{side}_tokens"] + np.cumsum(lengths)
        files[f"{side}.tokens"].write(np.fromiter(itertools.chain.from_iterable(rows), dtype).tobytes())
        files[f"{side}.offsets"].write(offsets.tobytes())
        counts[f"{side}_tokens"] = int(offsets[-1])


class TokenStore:
    """One side of a corpus: `store[i]` is sentence i's token ids (a list); `lengths()` all lengths.
    `rows`, when given, picks the sentences shown (by their index on disk), in that order."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray, rows: np.ndarray | None = None) -> None:
        self.tokens, self.offsets, self.rows = tokens, offsets, rows  # (N tokens,), (pairs + 1,), (kept,)

    def __len__(self) -> int:
        return len(self.offsets) - 1 if self.rows is None else len(self.rows)

    def __getitem__(self, i: int) -> list[int]:
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        if self.rows is not None:
            i = self.rows[i]
        return self.tokens[self.offsets[i]:self.offsets[i + 1]].tolist()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        lengths = np.diff(self.offsets)
        return lengths if self.rows is None else lengths[self.rows]


class MappedCorpus:
    """A corpus directory written by `write`, read through memory maps; with `max_len`, without the
    pairs longer than that on a side (when it was written with a higher limit, or none)."""

    def __init__(self, path: str | Path, max_len: int | None = None) -> None:
        self.path = Path(path)
        meta_path = self.path / META
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{self.path}: not a tokenized corpus (no {META}): make one with "
                            "`aiayn prepare --out`") from None
        except (OSError, ValueError) as e:
            raise DataError(f"{meta_path}: cannot read: {e}") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise DataError(f"{meta_path}: not a corpus of format {FORMAT}")
        self.meta = meta
        self.dropped_empty, self.dropped_long = meta["dropped_empty"], meta["dropped_long"]
        stores = []
        for side in SIDES:
            tokens = self._map(f"{side}.tokens", np.dtype(meta["dtype"]), meta[f"{side}_tokens"])
            offsets = self._map(f"{side}.offsets", np.dtype(np.int64), meta["pairs"] + 1)
            if offsets[-1] != len(tokens):
                raise DataError(f"{self.path / (side + '.offsets')}: damaged (its last offset is "
                                f"{offsets[-1]:,}, the tokens {len(tokens):,})")
            stores.append(TokenStore(tokens, offsets))
        self.source, self.target = stores
        written_limit = meta.get("max_len")
        if max_len is not None and (written_limit is None or written_limit > max_len):
            self._limit(max_len)

    def _limit(self, max_len: int) -> None:
        src, tgt = self.source.lengths(), self.target.lengths()
        rows = np.flatnonzero((src <= max_len) & (tgt <= max_len))
        if len(rows) < len(src):
            self.dropped_long += len(src) - len(rows)
            self.source = TokenStore(self.source.tokens, self.source.offsets, rows)
            self.target = TokenStore(self.target.tokens, self.target.offsets, rows)

    def _map(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        path = self.path / name
        size = path.stat().st_size if path.exists() else None
        if size != count * dtype.itemsize:
            found = "missing" if size is None else f"{size:,} bytes"
            raise DataError(f"{path}: damaged or cut short ({found}, expected {count * dtype.itemsize:,} "
                            f"bytes); write the corpus again")
        if count == 0:
            return np.zeros(0, dtype)
        return np.memmap(path, dtype=dtype, mode="r", shape=(count,))

    def __len__(self) -> int:
        return len(self.source)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """Padded-length contributions, as `TokenizedCorpus.lengths`: source + eos, target + bos."""
        return self.source.lengths() + 1, self.target.lengths() + 1

    def summary(self, name: str) -> str:
        return summary(name, len(self), self.dropped_empty, self.dropped_long)
