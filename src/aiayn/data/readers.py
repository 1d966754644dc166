"""Reading parallel text from files: pairs of plain or gzipped files aligned by line, and TSV.

Bad input fails loudly and precisely: the error names the file and, where it applies, the line.
The named datasets (`aiayn.data.corpora`) read their files through these functions.
"""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import AiaynError


class DataError(AiaynError, ValueError):
    """Input text that cannot be used; the message names the file (and line)."""


@dataclass
class ParallelCorpus:
    """Sentences aligned by index: `source[i]` translates to `target[i]`."""

    source: list[str]
    target: list[str]
    name: str

    def __len__(self) -> int:
        return len(self.source)

    def pairs(self) -> Iterator[tuple[str, str]]:
        return zip(self.source, self.target, strict=True)


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
    return collect(iter_parallel(src_path, tgt_path), f"{src_path},{tgt_path}")


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
    return collect(iter_tsv(path), str(path))


def iter_tsv(path: str | Path) -> Iterator[tuple[str, str]]:
    """The pairs of a TSV file (source TAB target), read as they are needed."""
    for number, line in enumerate(iter_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{path}:{number}: expected 2 tab-separated columns, found {len(columns)}")
        yield columns[0], columns[1]


def collect(pairs: Iterable[tuple[str, str]], name: str) -> ParallelCorpus:
    """The pairs, read whole, as a corpus called `name`."""
    source, target = [], []
    for s, t in pairs:
        source.append(s)
        target.append(t)
    return ParallelCorpus(source, target, name)
