"""The cache's entries and where they lie (`aiayn cache info|clear|prune`).

An entry is a directory named by a hash of everything that changes the compiled code
(`entry_fields`): the weights, aiayn's own code, torch's version, the CPU's kernels and features (or
the GPU), and the step's `Kind` (row count, what it returns, whether it reads traced histories,
whether it is a search's first step). Beside the step's library (CPU) or package (GPU), `entry.json`
holds those fields, the file's sha256 and its inode, size and change time when stored: a file whose
status differs (written to, replaced, copied) is hashed in full before it is used, one untouched
since is not read twice (`check`). Nothing is ever written into a stored entry (running processes
have its library mapped); a discarded one is renamed away first.

The cache lives in `$AIAYN_CACHE_DIR/steps`, by default `~/.cache/aiayn/steps` (`cache_dir`). A step
is a shared library that aiayn loads, so whoever can write the cache runs code in every process that
uses it: the directory and its entries are made this user's alone (0700), and a cache directory
that is not is refused for a private temporary one (`steps_dir`).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

import aiayn
from aiayn import files

PACKAGE = "step.pt2"  # what AOTInductor makes, kept whole for a GPU
LIBRARY = "step.so"  # on the CPU, the package's shared library alone (the weights are inside it)
ENTRY = "entry.json"


def cache_dir() -> Path:
    """Where compiled steps are kept: $AIAYN_CACHE_DIR/steps (default ~/.cache/aiayn/steps)."""
    root = os.environ.get("AIAYN_CACHE_DIR") or Path.home() / ".cache" / "aiayn"
    return Path(root) / "steps"


_private: dict[Path, Path] = {}  # a cache others may write -> this process's private one instead
_private_lock = threading.Lock()


def steps_dir() -> Path:
    """Where this process finds and keeps compiled steps: `cache_dir()`, made yours alone (0700) if
    new, unless another user owns it or others may write it. A step is a shared library that aiayn
    loads: whoever can write the directory runs code in every process that uses it. Such a cache is
    refused with a one-line notice, and the process compiles into a private temporary one instead."""
    wanted = cache_dir()
    if wanted in _private or (problem := not_ours_alone(wanted, create=True)) is None:
        return _private.get(wanted, wanted)
    with _private_lock:
        if wanted not in _private:
            private = Path(tempfile.mkdtemp(prefix="aiayn-steps-"))  # removed at exit
            notice(f"aiayn: not using the compiled-step cache {wanted}: {problem}, and whoever can write "
                    f"it runs code in this process; compiling into {private} for this process instead "
                    f"(to use the cache, make it and the directories above it yours alone, or set "
                    f"AIAYN_CACHE_DIR to such a directory)")
            _private[wanted] = private
    return _private[wanted]


def _remove_private() -> None:
    """At exit, this process's private caches go. Registered as this module loads, before
    `alongside` (which imports it) registers its stop: exit handlers run last first, so the
    processes compiling alongside end before (they would make the directory again)."""
    for private in _private.values():
        shutil.rmtree(private, ignore_errors=True)


atexit.register(_remove_private)


def current_dir() -> Path:
    """The directory this process keeps steps in as far as it knows, neither made nor checked
    (`steps_dir` does both): for reading what may be there."""
    return _private.get(cache_dir(), cache_dir())


def not_ours_alone(path: Path, create: bool = False) -> str | None:
    """Why `path` (a directory, created 0700 if `create` and absent, or a file) is not this user's
    alone: owned by another user, or writable by the group or others, or one of the directories
    above it is (owned by neither this user nor root, or writable by others, who could move `path`
    away and put their own in its place), up to one owned by root with the sticky bit, such as /tmp
    (as OpenSSH's StrictModes checks); None if it is, or cannot be seen (the writes then say what is
    wrong), or on a system without users' ids."""
    if not hasattr(os, "getuid"):
        return None
    try:
        if create:  # each directory made here this user's alone, whatever the umask
            for missing in [p for p in (*reversed(path.parents), path) if not p.exists()]:
                missing.mkdir(mode=0o700, exist_ok=True)
                missing.chmod(0o700)
        path = path.resolve()
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"others may write {path} (mode {stat.filemode(st.st_mode)})"
    for above in path.parents:
        try:
            st = above.stat()
        except OSError:
            return None
        if st.st_uid == 0 and st.st_mode & stat.S_ISVTX:
            break  # a root-owned sticky directory: no one renames another's entries in it
        if st.st_uid not in (0, os.getuid()):
            return f"{above}, a directory above it, belongs to another user (uid {st.st_uid})"
        if st.st_mode & 0o022:
            return f"others may write {above}, a directory above it (mode {stat.filemode(st.st_mode)})"
    return None


@dataclass(frozen=True)
class Kind:
    """What a compiled step is for, besides its model: these make separate graphs."""

    rows: int  # B, fixed per graph; 0: any count from `step_graph.ANY_COUNT_FROM` on (a dynamic dimension)
    output: str  # logits and their normaliser, log-probabilities, or a score function's (`Step.scored`)
    traced: bool  # reads beams' histories through a table (beam search), or its own rows (greedy)
    first: bool = False  # a search's first step: one position (static), where the others take 2 or more
    beams: int = 0  # the beam size of a score function's inputs (scores (B/K, K), static), 0 without
    packed: bool = True  # on a CPU, its weights packed for oneDNN's matmul; else plain (MKL's): faster
    # for a few rows (`step_graph.ANY_COUNT_FROM`), where oneDNN's fixed cost a call exceeds the matmul


def entry_fields(weights: str, kind: Kind, sample: Tensor) -> dict[str, Any]:
    """Everything that changes a compiled step, as the entry records it."""
    return {"weights": weights, "code": code_digest(), "torch": torch.__version__,
            "machine": machine(sample.device), "dtype": str(sample.dtype), "rows": kind.rows,
            "output": kind.output, "traced": kind.traced, "first": kind.first, "beams": kind.beams,
            "packed": kind.packed}


def describe(fields: dict[str, Any]) -> str:
    """What an entry's step is for, in words: '16 rows, beam search of beam 4', '2 rows, greedy, a
    search's first step'."""
    output = str(fields.get("output"))
    ngram = re.search(r"no[-_]repeat[-_](\d+)$", output)  # the n-gram rule's (beam.candidates_no_repeat)
    rule = f", no {ngram[1]}-gram twice" if ngram else ""
    if output.startswith("whole-beam"):  # decoding/whole.py
        return f"one sentence's whole beam search of beam {fields.get('beams')}{rule}"
    search = "greedy"
    if fields.get("traced") or ".candidates" in output:
        search = f"beam search of beam {fields['beams']}" if fields.get("beams") else "beam search"
    return f"{rows(fields)}, {search}{rule}" + (", a search's first step" if fields.get("first") else "")


def rows(fields: dict[str, Any]) -> str:
    """An entry's rows in words: '16 rows', or 'any number of rows' (`Kind.rows` 0)."""
    return f"{fields.get('rows') or 'any number of'} rows"


def stored(weights: str, dtype: torch.dtype, device: torch.device) -> bool:
    """Whether the cache holds a step compiled for these weights, in `dtype` on `device`, by this
    code, torch and machine (of any kind: row count, search)."""
    found = entries(steps_dir())
    if not found:
        return False
    want = entry_fields(weights, Kind(0, "", False), torch.empty(0, dtype=dtype, device=device))
    same = ("weights", "code", "torch", "machine", "dtype")
    return any(recorded and all(recorded.get("fields", {}).get(key) == want[key] for key in same)
               for _, recorded, _ in found)


def entry_name(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def check(entry: Path, fields: dict[str, Any]) -> str | None:
    """Why the entry cannot be used ("absent", or what is wrong with it), or None if it can."""
    if not entry.exists():
        return "absent"
    try:
        recorded = json.loads((entry / ENTRY).read_text())
        if not isinstance(recorded, dict) or recorded.get("fields") != fields:
            return "made for another model, machine or version"
        path = kept(entry, recorded)
        if (problem := not_ours_alone(entry) or not_ours_alone(path) or not_ours_alone(entry / ENTRY)):
            return f"not this user's alone: {problem}"
        if recorded.get("status") == status(path):  # untouched since it was stored and checked
            return None
        digest = sha256(path)
    except (OSError, ValueError) as e:
        return f"unreadable: {type(e).__name__}"
    if recorded.get("sha256") != digest:
        return "damaged: its compiled step does not match its checksum"
    return None


def kept(entry: Path, recorded: dict[str, Any] | None = None) -> Path:
    """The file an entry keeps its compiled step in: a library (CPU) or a package."""
    recorded = json.loads((entry / ENTRY).read_text()) if recorded is None else recorded
    name = recorded.get("file", PACKAGE)
    if name not in (LIBRARY, PACKAGE):
        raise ValueError(f"unknown file {name!r}")
    return entry / name


def status(path: Path) -> list[int]:
    """What changes when a file is written to, replaced or copied: inode, size, change time (which,
    unlike the modification time, cannot be set back)."""
    found = path.stat()
    return [found.st_ino, found.st_size, found.st_ctime_ns]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def discard(entry: Path) -> None:
    """Remove an entry: renamed away first, so no process finds half of it."""
    with files.sibling(entry, "old") as trash:
        with contextlib.suppress(OSError):
            entry.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)


def weights_digest(module: nn.Module) -> str:
    """A hash of the module's parameters and buffers: names, dtypes, shapes and values."""
    h = hashlib.sha256()
    for name, t in module.state_dict().items():
        t = t.detach().cpu().contiguous()
        h.update(f"{name} {t.dtype} {tuple(t.shape)}\n".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


GRAPH_CODE = ("model", "decoding", "inference.py")  # aiayn's code that a compiled step is made of


@functools.cache
def code_digest() -> str:
    """A hash of aiayn's code that makes the step: a change to it makes new entries."""
    h = hashlib.sha256(aiayn.__version__.encode())
    root = Path(aiayn.__file__).parent
    for path in sorted(p for part in GRAPH_CODE for p in [root / part, *(root / part).rglob("*.py")]
                       if p.is_file()):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def machine(device: torch.device) -> dict[str, str]:
    """What the compiled code was made for: the GPU, or the CPU's kernels and instruction sets."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        return {"device": f"cuda {torch.cuda.get_device_name(index)} sm_{major}{minor}",
                "cuda": str(torch.version.cuda)}
    flags = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1] for line in cpuinfo if line.startswith("flags")), "")
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or ""
    return {"device": f"cpu {platform.machine()}", "kernels": torch.backends.cpu.get_cpu_capability(),
            "onednn": onednn.upper(),  # the instruction sets oneDNN may use with the packed weights
            "features": hashlib.sha256(" ".join(sorted(flags.split())).encode()).hexdigest()[:16]}


def entries(root: Path | None = None) -> list[tuple[Path, dict[str, Any] | None, int]]:
    """The cache's entries (of `root`, default `cache_dir()`): directory, what entry.json records (None
    if unreadable), bytes."""
    found = []
    root = cache_dir() if root is None else root
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        if entry.name.startswith("."):
            continue
        size = sum(f.stat().st_size for f in entry.rglob("*") if f.is_file())
        try:
            recorded = json.loads((entry / ENTRY).read_text())
        except (OSError, ValueError):
            recorded = None
        found.append((entry, recorded, size))
    return found


def clear(only: Callable[[dict[str, Any] | None], bool] | None = None) -> tuple[int, int]:
    """Remove every entry, or those whose record (None if unreadable) `only` picks (`stale`: `aiayn
    cache prune`), and what killed processes left: (entries removed, bytes freed). Entries being built
    by running processes are left to them; another installation sharing the cache compiles its own
    again when it next needs them. (Clearing all should also forget whether steps load here:
    `verdict.forget`.)"""
    found = [(entry, size) for entry, recorded, size in entries() if only is None or only(recorded)]
    for entry, _ in found:
        discard(entry)
    files.clean_leftovers(cache_dir(), lambda name: True)
    return len(found), sum(size for _, size in found)


def stale(recorded: dict[str, Any] | None) -> bool:
    """Whether an entry was made by other aiayn code or another torch (an upgrade): this installation
    names its entries anew and never uses it again. An unreadable entry counts as stale."""
    fields = recorded.get("fields") if isinstance(recorded, dict) else None
    return not isinstance(fields, dict) or fields.get("code") != code_digest() \
        or fields.get("torch") != torch.__version__


def notice(message: str) -> None:
    """A one-line notice to the user (standard error)."""
    print(message, file=sys.stderr, flush=True)
