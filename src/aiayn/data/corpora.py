"""Reading parallel text: pairs of plain or gzipped files, TSV, named and synthetic datasets.

Bad input fails loudly and precisely: the error names the file and, where it applies, the line.
"""

from __future__ import annotations

import gzip
import random
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import AiaynError


class DataError(AiaynError, ValueError):
    """Input text that cannot be used; the message names the file (and line)."""


@dataclass
class ParallelCorpus:
    source: list[str]
    target: list[str]
    name: str

    def __len__(self) -> int:
        return len(self.source)


def read_lines(path: str | Path) -> list[str]:
    """All lines of a UTF-8 text file (plain, or gzip when the name ends in .gz), without newlines."""
    return list(iter_lines(path))


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (plain, or gzip when the name ends in .gz), read as they are
    needed; each without its newline, and without the carriage return of a CRLF ending."""
    path = Path(path)
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            yield from decode_lines(f, str(path))
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, not a text file") from None
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(f"{path}: cannot read: {e}") from e


def decode_lines(stream: Iterable[bytes], name: str) -> Iterator[str]:
    """Lines of bytes (a binary file, standard input's buffer) as text, checked: invalid UTF-8 is a
    DataError naming `name` and the line. Only "\n" ends a line (str.splitlines would also split on
    U+2028 and friends and break the alignment of parallel files); a "\r" before it is dropped."""
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{name}:{number}: invalid UTF-8 ({e.reason})") from None
        yield line.removesuffix("\n").removesuffix("\r")


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> ParallelCorpus:
    """Two files aligned line by line."""
    return _collect(iter_parallel(src_path, tgt_path), f"{src_path},{tgt_path}")


def iter_parallel(src_path: str | Path, tgt_path: str | Path) -> Iterator[tuple[str, str]]:
    """The pairs of two files aligned line by line, read as they are needed; files of different
    lengths are a DataError (raised when the shorter one ends, with both counts)."""
    source, target = iter_lines(src_path), iter_lines(tgt_path)
    count, done = 0, object()
    while True:
        s, t = next(source, done), next(target, done)
        if s is done or t is done:
            break
        count += 1
        yield s, t
    rest_src = (s is not done) + sum(1 for _ in source)
    rest_tgt = (t is not done) + sum(1 for _ in target)
    if rest_src or rest_tgt:
        raise DataError(f"parallel files differ in length: {src_path} has {count + rest_src} lines, "
                        f"{tgt_path} has {count + rest_tgt} lines")


def read_tsv(path: str | Path) -> ParallelCorpus:
    """One pair per line: source TAB target."""
    return _collect(iter_tsv(path), str(path))


def iter_tsv(path: str | Path) -> Iterator[tuple[str, str]]:
    """The pairs of a TSV file (source TAB target), read as they are needed."""
    for number, line in enumerate(iter_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{path}:{number}: expected 2 tab-separated columns, found {len(columns)}")
        yield columns[0], columns[1]


def _collect(pairs: Iterable[tuple[str, str]], name: str) -> ParallelCorpus:
    source, target = [], []
    for s, t in pairs:
        source.append(s)
        target.append(t)
    return ParallelCorpus(source, target, name)


def load_corpus(spec: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """Read the corpus that `spec` names (see DataConfig.train for the forms it takes)."""
    from aiayn.data import multi30k, synthetic  # named datasets, loaded only when used

    name, _, split = spec.partition(":")
    if name == "hf":
        return _collect(iter_pairs(spec, src_lang, tgt_lang), spec)
    if name == "multi30k":
        return multi30k.load(split or "train", src_lang, tgt_lang)
    if name == "synthetic":
        task, _, part = split.partition(":")
        return synthetic.load(task, part or "train")
    return _collect(*_file_pairs(spec, src_lang, tgt_lang))


def iter_pairs(spec: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
    """The pairs `spec` names, read as they are needed: files of any size in bounded memory (named
    datasets, which are small, are read whole)."""
    name, _, rest = spec.partition(":")
    if name == "hf":
        from aiayn.data import hf  # needs HuggingFace datasets, imported only when used

        return hf.iter_pairs(rest, src_lang, tgt_lang)
    if name in ("multi30k", "synthetic"):
        corpus = load_corpus(spec, src_lang, tgt_lang)
        return zip(corpus.source, corpus.target, strict=True)
    return _file_pairs(spec, src_lang, tgt_lang)[0]


def _file_pairs(spec: str, src_lang: str, tgt_lang: str) -> tuple[Iterator[tuple[str, str]], str]:
    """The pairs of the files `spec` names (TSV, SRC_FILE,TGT_FILE or PREFIX), and their name."""
    if spec.endswith((".tsv", ".tsv.gz")):
        return iter_tsv(spec), spec
    if "," in spec:
        src_path, tgt_path = spec.split(",", 1)
    else:
        src_path, tgt_path = _with_suffix(spec, src_lang), _with_suffix(spec, tgt_lang)
    return iter_parallel(src_path, tgt_path), f"{src_path},{tgt_path}"


def sample_pairs(pairs: Iterable[tuple[str, str]], k: int, seed: int = 1
                 ) -> tuple[list[tuple[str, str]], int]:
    """A uniform random sample of at most `k` pairs, read in one pass in bounded memory (reservoir
    sampling); -> (the sample, how many pairs were read). With `k` or fewer pairs, all of them, in
    order."""
    rng, sample, seen = random.Random(seed), [], 0
    for seen, pair in enumerate(pairs, start=1):
        if len(sample) < k:
            sample.append(pair)
        elif (j := rng.randrange(seen)) < k:
            sample[j] = pair
    return sample, seen


def _with_suffix(prefix: str, lang: str) -> Path:
    for candidate in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if candidate.exists():
            return candidate
    raise DataError(f"{prefix}.{lang}: no such file (nor {prefix}.{lang}.gz)")


def default_valid(train_spec: str) -> str:
    """The validation set that goes with a named training set ('' when there is none)."""
    name, _, split = train_spec.partition(":")
    if name == "multi30k":
        return "multi30k:val"
    if name == "synthetic":
        return f"synthetic:{split.partition(':')[0]}:val"
    return ""
