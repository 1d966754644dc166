"""Writing output directories without losing anything.

    with files.replacing(out, "aiayn checkpoint", is_checkpoint, force) as tmp:
        ...write the files into tmp...

A directory is written into a hidden sibling, `.NAME.tmp-PID-N` (`sibling`: N unique within the
process, so that its threads never share one), and renamed into place only when
complete, so a crash never leaves a half-written directory where a whole one is expected. What
is already at `out` is replaced only when it is empty or of the same kind (an older checkpoint
by a newer one), or when the user passes --force; a training run directory is never replaced.
A failed write removes its temporary directory and, when the disk is full, says so. Directories
left by a process killed mid-write are cleaned up by the next write to the same place: a
temporary one is deleted, and an older output moved aside just before the kill is put back; one
that a live process, or a thread of this one, is writing is left alone.
"""

from __future__ import annotations

import errno
import itertools
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from aiayn.errors import AiaynError

RUN_FILES = ("checkpoints", "metrics.jsonl")  # what makes a directory a training run
_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<what>tmp|old)-(?P<pid>\d+)(-\d+)?$")
_numbers = itertools.count()
_live: set[str] = set()  # the names of this process's siblings in use (`sibling`), by any thread
_live_lock = threading.Lock()


class OutputError(AiaynError):
    """An output that cannot or must not be written; the message names the path."""


def is_run_dir(path: Path) -> bool:
    return any((path / name).exists() for name in RUN_FILES)


def check_out(path: str | Path, kind: str, is_kind: Callable[[Path], bool], force: bool = False) -> None:
    """Refuse to write a `kind` directory at `path` over something else: a training run (always), or a
    non-empty directory that `is_kind` does not recognise (unless `force`)."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise OutputError(f"{path}: exists and is not a directory")
    if is_run_dir(path):
        raise OutputError(f"{path} is a training run directory: write the {kind} to a new directory, "
                          f"for example {path / 'averaged'}")
    if force or is_kind(path) or not any(path.iterdir()):
        return
    raise OutputError(f"{path} is not empty and holds no {kind}: choose a new directory, or pass --force "
                      "to replace it and everything in it")


def check_writable(path: Path) -> None:
    """Fail before any work if the file `path` cannot be written."""
    if path.is_dir():
        raise OutputError(f"{path}: is a directory, not a file")
    if not path.parent.is_dir():
        raise OutputError(f"{path}: no such directory {path.parent}")
    if not os.access(path.parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise OutputError(f"{path}: permission denied")


@contextmanager
def sibling(path: Path, what: str = "tmp") -> Iterator[Path]:
    """A name beside `path` for a temporary file or directory (`what`: "tmp", or "old" for an output
    moved aside), `.NAME.WHAT-PID-N`, unique within this process: `clean_leftovers` leaves it alone
    while the block runs. The caller creates and removes what it names."""
    with _live_lock:
        name = path.parent / f".{path.name}.{what}-{os.getpid()}-{next(_numbers)}"
        _live.add(name.name)  # unique in this process, however the directory is spelled
    try:
        yield name
    finally:
        with _live_lock:
            _live.discard(name.name)


def write_atomically(path: Path, data: bytes | memoryview, mode: int = 0o666) -> None:
    """`data` as the file `path`: written beside it and renamed over it, so a crash or a full disk
    leaves the old file (or none), never half of the new one. `mode`: its permissions (less the
    umask; 0o600: this user's alone)."""
    with sibling(path) as tmp:
        try:
            with open(tmp, "wb", opener=lambda p, flags: os.open(p, flags, mode)) as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if is_disk_full(e):
                raise OutputError(f"{path}: no space left on device; nothing was written") from e
            raise


@contextmanager
def replacing(path: str | Path, kind: str, is_kind: Callable[[Path], bool], force: bool = False
              ) -> Iterator[Path]:
    """Yield a temporary directory to write a `kind` into; on success it replaces `path` atomically."""
    path = Path(path)
    check_out(path, kind, is_kind, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_leftovers(path.parent, lambda name: name == path.name)
    with sibling(path) as tmp, sibling(path, "old") as old:
        try:
            tmp.mkdir()
            yield tmp
            fsync_dir(tmp)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if is_disk_full(e):
                kept = f"; the {kind} already at {path} is intact" if path.exists() else ""
                raise OutputError(f"{path}: no space left on device while writing the {kind}; nothing was "
                                  f"written{kept}. Free some space and run again") from e
            raise
        if path.exists():
            path.rename(old)
        tmp.rename(path)
        fsync_dir(path.parent)
        shutil.rmtree(old, ignore_errors=True)


def clean_leftovers(directory: Path, belongs: Callable[[str], bool]) -> list[Path]:
    """Remove the temporary directories that killed processes left in `directory` for outputs whose
    names `belongs` accepts, and put back an output moved aside just before a kill. Returns what
    was removed."""
    removed = []
    for entry in directory.iterdir() if directory.is_dir() else []:
        m = _LEFTOVER.match(entry.name)
        if not m or not belongs(m["name"]) or not entry.is_dir() or _alive(int(m["pid"]), entry):
            continue
        target = directory / m["name"]
        if m["what"] == "old" and not target.exists():
            entry.rename(target)  # the kill came between moving the old output aside and the new in
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def is_disk_full(error: BaseException) -> bool:
    """Whether `error`, or an error it was raised from, says the disk (or the quota) is full."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(s in str(error) for s in ("No space left on device", "os error 28", "Disk quota exceeded")):
            return True
        error = error.__cause__ or error.__context__
    return False


def fsync_dir(path: Path) -> None:
    """Flush a directory's files and the directory entry itself to disk."""
    for child in path.iterdir():
        if child.is_file():
            with open(child, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _alive(pid: int, path: Path) -> bool:
    """Whether the process `pid` may still be writing `path` (this one: if a thread of it is)."""
    if pid == os.getpid():
        with _live_lock:  # if not in use, a leftover of an earlier process of this pid
            return path.name in _live
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
