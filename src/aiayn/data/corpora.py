"""Reading parallel text: pairs of plain or gzipped files, TSV, named and synthetic datasets.

Bad input fails loudly and precisely: the error names the file and, where it applies, the line.
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
    source, target = read_lines(src_path), read_lines(tgt_path)
    if len(source) != len(target):
        raise DataError(
            f"parallel files differ in length: {src_path} has {len(source)} lines, "
            f"{tgt_path} has {len(target)} lines"
        )
    return ParallelCorpus(source, target, f"{src_path},{tgt_path}")


def read_tsv(path: str | Path) -> ParallelCorpus:
    """One pair per line: source TAB target."""
    source, target = [], []
    for number, line in enumerate(read_lines(path), start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise DataError(f"{path}:{number}: expected 2 tab-separated columns, found {len(columns)}")
        source.append(columns[0])
        target.append(columns[1])
    return ParallelCorpus(source, target, str(path))


def load_corpus(spec: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """Read the corpus that `spec` names (see DataConfig.train for the forms it takes)."""
    from aiayn.data import multi30k, synthetic  # named datasets, loaded only when used

    name, _, split = spec.partition(":")
    if name == "multi30k":
        return multi30k.load(split or "train", src_lang, tgt_lang)
    if name == "synthetic":
        task, _, part = split.partition(":")
        return synthetic.load(task, part or "train")
    if spec.endswith((".tsv", ".tsv.gz")):
        return read_tsv(spec)
    if "," in spec:
        src_path, tgt_path = spec.split(",", 1)
        return read_parallel(src_path, tgt_path)
    return read_parallel(_with_suffix(spec, src_lang), _with_suffix(spec, tgt_lang))


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
