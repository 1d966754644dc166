"""Compiling a step ahead of time and storing it: exported (`torch.export`, with the positions
decoded, the cache capacity and the source length as dynamic dimensions) and compiled by
AOTInductor with the weights frozen into it (`build`), one step at a time in a process, while no
other thread runs a model (`tracing.gate`). An entry is built in a temporary directory
of its own and renamed into place, so no process finds half of one; a process compiling a step
holds a lock on it (`building`), so another that needs it waits and loads what it stored.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import torch
from torch import nn

from aiayn import files
from aiayn.decoding.cache.library import constant_digests
from aiayn.decoding.cache.store import ENTRY, LIBRARY, PACKAGE, check, describe, kept, sha256, status
from aiayn.decoding.tracing import gate

LARGEST = 8192  # positions, cache capacity and source length a packaged step takes (beyond: eager)


def build(entry: Path, fields: dict[str, Any], module: nn.Module, inputs: tuple, dynamic: tuple) -> Path:
    """Export, compile and store the step for these inputs' shapes; returns the path of the file kept
    (`kept`)."""
    started = time.perf_counter()
    files.clean_leftovers(entry.parent, lambda name: True)  # of killed processes, never a live build
    with files.sibling(entry) as tmp:
        _build_into(tmp, entry, fields, module, inputs, dynamic, started)
    return kept(entry)


def _build_into(tmp: Path, entry: Path, fields: dict[str, Any], module: nn.Module, inputs: tuple,
                dynamic: tuple, started: float) -> None:
    from torch._inductor import config as inductor_config

    tmp.mkdir(parents=True, mode=0o700)  # this user's alone (`not_ours_alone`), whatever the umask
    try:
        with gate.tracing():  # alone in the process: no other thread runs a model meanwhile
            exported = torch.export.export(module, inputs, dynamic_shapes=dynamic, strict=False)
            check_sizes(exported, fields["rows"], _named_ranges(dynamic))
            with _setting(inductor_config, "freezing", True), packing(fields.get("packed", True)):
                torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp / PACKAGE))
        path = _library_alone(tmp / PACKAGE) if str(fields["machine"]["device"]).startswith("cpu") \
            else tmp / PACKAGE
        path.chmod(0o700)
        constants = constant_digests(path) if path.suffix == ".so" else {}
        record = {"fields": fields, "file": path.name, "sha256": sha256(path), "status": status(path),
                  "constants": constants,
                  "seconds": round(time.perf_counter() - started, 1),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        (tmp / ENTRY).write_text(json.dumps(record, indent=1) + "\n")
        (tmp / ENTRY).chmod(0o600)
        try:
            tmp.rename(entry)
        except OSError:  # another process stored this entry first: use its package
            shutil.rmtree(tmp, ignore_errors=True)
            if check(entry, fields) is not None:
                raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def building(entry: Path, fields: dict[str, Any], notice: Callable[[str], None]) -> Iterator[None]:
    """Hold the lock on compiling `entry`'s step (a lock file beside it, `fcntl.flock`), waiting, with
    a notice, while another process holds it; the system lets go of a dead process's lock. Where the
    lock cannot be taken (a cache that cannot be written, no `fcntl`) it goes on without it: two
    processes then each compile the step, and the first to store it wins (`build`)."""
    lock = _lock(_lock_path(entry), lambda: notice(
        f"aiayn: waiting for another process compiling the decoder step for {describe(fields)}"))
    try:
        yield
    finally:
        if lock is not None:  # removed while held (if still ours): a process blocked on it finds the
            with contextlib.suppress(OSError):  # entry stored, one that comes later no lock to wait for
                if os.stat(lock.name).st_ino == os.fstat(lock.fileno()).st_ino:
                    os.unlink(lock.name)
            lock.close()


def compiling_elsewhere(entry: Path) -> bool:
    """Whether a process holds the lock on compiling `entry`'s step now (`building`): a probe that
    neither waits nor makes a lock file."""
    try:
        import fcntl

        probe = os.open(_lock_path(entry), os.O_RDONLY)
    except (ImportError, OSError):  # no lock file: nobody compiles it
        return False
    try:
        fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # let go at once, when closed
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(probe)
    return False


def _lock_path(entry: Path) -> Path:
    return entry.parent / f".{entry.name}.lock"


def _lock(path: Path, waiting: Callable[[], None]) -> BinaryIO | None:
    """`path` opened and locked (the file, to close), `waiting()` first if another process holds it;
    None if it cannot be."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path, "wb", opener=lambda p, flags: os.open(p, flags, 0o600))  # this user's alone
    except (ImportError, OSError):
        return None
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            waiting()
            fcntl.flock(lock, fcntl.LOCK_EX)
    except OSError:
        lock.close()
        return None
    except BaseException:  # interrupted while waiting
        lock.close()
        raise
    return lock


def check_sizes(exported: torch.export.ExportedProgram, rows: int = 2,
                named: frozenset[tuple[int, int]] = frozenset()) -> None:
    """Refuse a step whose export narrowed a dynamic size: each must take 2 to `LARGEST`, or, as the
    rows of the cache's buffers do, the step's `rows` to `LARGEST` (given as hints, export narrows a
    size when the traced code depends on it, where the step would then fail on longer sentences);
    a named dimension (`named`: the ranges asked for), its own range, and the buffers, at least the
    rows that one names."""
    for symbol, sizes in exported.range_constraints.items():
        if (sizes.lower, sizes.upper) in named:
            continue
        if (sizes.lower > 2 and sizes.lower != rows and sizes.lower not in {low for low, _ in named}) \
                or sizes.upper < LARGEST:
            wanted = f"2 (or {rows}) to {LARGEST}" if rows != 2 else f"2 to {LARGEST}"
            raise RuntimeError(f"the exported decoder step takes {symbol} from {sizes.lower} to "
                               f"{sizes.upper} only, not {wanted}")


def _named_ranges(dynamic: Any) -> frozenset[tuple[int, int]]:
    """The ranges of the named dimensions (`torch.export.Dim("name", min=, max=)`, and those derived
    from them, such as 4 times one) in a dynamic-shapes structure: those export must keep as asked."""
    from torch.export import Dim
    from torch.utils._pytree import tree_leaves

    return frozenset((leaf.min, leaf.max) for leaf in tree_leaves(dynamic)
                     if isinstance(leaf, Dim))


def _library_alone(package: Path) -> Path:
    """A CPU package's shared library, taken out beside it (the package goes); the package itself
    if it does not hold exactly one."""
    with zipfile.ZipFile(package) as archive:
        libraries = [name for name in archive.namelist() if name.endswith(".so")]
        if len(libraries) != 1:
            return package
        with archive.open(libraries[0]) as source, open(package.with_name(LIBRARY), "wb") as target:
            shutil.copyfileobj(source, target, 1 << 20)
    package.unlink()
    return package.with_name(LIBRARY)


@contextlib.contextmanager
def packing(packed: bool) -> Iterator[None]:
    """Compile with the weights of float matmuls packed for oneDNN (Inductor's default with freezing on
    a CPU) or, if not `packed`, left for plain matmuls. Inductor registers its packing rewrites once
    per process, at its first freezing compile, if `cpp.weight_prepack` is on then, and applies them
    to every later compile: so the rewrite of float linears (`_PACKS_LINEAR`) is registered first and
    taken out of its pass while this compile runs (one compile at a time: `tracing.gate`); the others
    (int8's, ...) stay. A private part of Inductor: tests/decoding/test_compiled.py fails loudly if a
    torch upgrade moves it (the steps would then be packed, slower for a few rows, the same outputs)."""
    if packed:
        yield
        return
    from torch._inductor import config as inductor_config
    from torch._inductor.fx_passes import freezing_patterns

    freezing_patterns.lazy_init()
    saved = [(entries, list(entries)) for matcher in freezing_patterns.pass_patterns
             for entries in matcher.patterns.values()]
    for entries, _ in saved:
        entries[:] = [entry for entry in entries if not packs_linear(entry)]
    try:  # the setting off too: Inductor's caches of compiled graphs tell the two compiles apart by it
        with _setting(inductor_config.cpp, "weight_prepack", False):
            yield
    finally:
        for entries, original in saved:
            entries[:] = original


_PACKS_LINEAR = ("torch._inductor.fx_passes.mkldnn_fusion", "linear")  # the rewrite's module and name


def packs_linear(entry: Any) -> bool:
    """Whether a pattern entry of Inductor's freezing passes is its rewrite packing float linears."""
    handler = getattr(entry, "handler", None)
    return (getattr(handler, "__module__", None), getattr(handler, "__name__", None)) == _PACKS_LINEAR


@contextlib.contextmanager
def _setting(config: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(config, name)
    setattr(config, name, value)
    try:
        yield
    finally:
        setattr(config, name, saved)
