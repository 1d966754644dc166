"""Steps compiled in other processes while this one compiles and searches (`Alongside`): the steps
a search will need next, each in a Python process of its own that ends with its parent.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_map

from aiayn.decoding.cache.compiling import build, building
from aiayn.decoding.cache.store import check, notice
from aiayn.decoding.cache.verdict import python_command


class Alongside:
    """Steps compiled in other processes while this one compiles and searches (`Packages.ahead`): a
    compile keeps one core busy, so on a machine of N cores, N - 1 more (at most
    `$AIAYN_COMPILE_WORKERS`, default 4; 0: none) compile the steps a search will need next, in the
    order asked; a step this process needs waits for its compile, or is taken back if it has not
    started. Each is a Python process of its own (`verdict.python_command`), given a job file: the
    step's fields, example inputs as shapes and the module's file (saved once while its jobs last;
    `build_alone`).
    It stores its entry as any process does (`build`). Files go once their jobs are done; at exit,
    running jobs are stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[Path, Path] = {}  # entry -> its job file, in the order asked
        self._running: dict[Path, tuple[subprocess.Popen, Path]] = {}  # entry -> its process, job file
        self._modules: WeakKeyDictionary[nn.Module, Path] = WeakKeyDictionary()  # saved for the jobs
        self._threads: int | None = None  # the process's torch threads while `cores_left` lowers them
        self._entered = 0  # searches inside `cores_left` now
        atexit.register(self.stop)

    def workers(self) -> int:
        limit = os.environ.get("AIAYN_COMPILE_WORKERS", "4")
        return max(0, min(int(limit) if limit.isdigit() else 4, (os.cpu_count() or 1) - 1))

    def has(self, entry: Path) -> bool:
        with self._lock:
            return entry in self._queued or entry in self._running

    def busy(self) -> bool:
        """Whether a step is queued or being compiled."""
        with self._lock:
            return bool(self._queued or self._running)

    @contextlib.contextmanager
    def cores_left(self) -> Iterator[None]:
        """The process's torch threads fewer by the processes compiling now (each keeps a core busy),
        for an eager search beside them: on 2 cores, one thread answered a sentence 3.6x faster than
        two beside a compile (benchmarks/detail/serve_start.md). Searches may overlap: the first to
        enter keeps the full count (`_threads`), each lowers from it, the last to leave restores it."""
        with self._lock:
            compiling = len(self._running)
            if compiling:
                if not self._entered:
                    self._threads = torch.get_num_threads()
                self._entered += 1
                torch.set_num_threads(max(1, self._threads - compiling))
        if not compiling:
            yield
            return
        try:
            yield
        finally:
            with self._lock:
                self._entered -= 1
                if not self._entered:
                    torch.set_num_threads(self._threads)
                    self._threads = None

    def submit(self, entry: Path, fields: dict[str, Any], module: nn.Module, inputs: tuple,
               dynamic: Callable[[tuple], tuple]) -> None:
        """Compile `entry`'s step of `module` for `inputs`' shapes in another process (or, if its
        files cannot be written, leave it to the process that needs it)."""
        with self._lock:
            saved = self._modules.get(module)
        if saved is None and (saved := _saved(module)) is None:
            return
        with self._lock:
            self._modules[module] = saved
            threads = self._threads or torch.get_num_threads()  # the process's, not an eager search's
        job = (entry, fields, saved, _shapes(inputs), dynamic, threads)
        if (job := _saved(job)) is None:
            return
        with self._lock:
            self._queued[entry] = job
        self._start()

    def wait(self, entry: Path) -> None:
        """Until `entry`'s compile, if running, ends; one not started is dropped (built by the caller)."""
        with self._lock:
            job = self._queued.pop(entry, None)
            running = self._running.get(entry)
        if job is not None:
            job.unlink(missing_ok=True)
        if running is not None:
            running[0].wait()
        self._ended(entry)

    def stop(self) -> None:
        """End every job: the queued ones first, so that no job ending now starts another."""
        with self._lock:
            jobs = list(self._queued.values())
            self._queued.clear()
            running = list(self._running.values())
        for process, _ in running:
            with contextlib.suppress(OSError):  # the job's process and the compilers it started
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with self._lock:
            jobs += [job for _, job in self._running.values()]
            self._running.clear()
        for job in jobs:
            job.unlink(missing_ok=True)
        self._ended(None)

    def _start(self) -> None:
        with self._lock:
            while self._queued and len(self._running) < self.workers():
                entry = next(iter(self._queued))
                job = self._queued.pop(entry)
                command, env = python_command(_BUILD_ALONE, str(job), str(os.getpid()))
                quiet = subprocess.DEVNULL  # a process group of its own, its compilers with it (`stop`)
                process = subprocess.Popen(command, env=env, stdin=quiet, stdout=quiet, stderr=quiet,
                                           start_new_session=True)
                self._running[entry] = process, job
                threading.Thread(target=self._reap, args=(entry, process), daemon=True).start()

    def _reap(self, entry: Path, process: subprocess.Popen) -> None:
        process.wait()
        self._ended(entry)
        self._start()

    def _ended(self, entry: Path | None) -> None:
        """`entry`'s process has ended (if it ran): its job file goes, and the modules' files once no
        job is left. Removed while the lock is held: once `stop` returns, none is left (a job's
        thread that took the files out of the table would otherwise remove them later, or never, if
        the process exits first)."""
        with self._lock:
            process, job = self._running.get(entry, (None, None))
            if process is not None and process.poll() is not None:
                del self._running[entry]
                job.unlink(missing_ok=True)
            if not self._queued and not self._running:
                for path in self._modules.values():
                    path.unlink(missing_ok=True)
                self._modules.clear()


def _saved(what: Any) -> Path | None:
    """`what` in a temporary file for a job's process; None if it cannot be saved (said once for
    each reason: the step is then compiled by the process that needs it)."""
    handle, name = tempfile.mkstemp(prefix="aiayn-step-", suffix=".pt")
    os.close(handle)
    try:
        torch.save(what, name)
    except Exception as e:  # any: a full disk, something that cannot be saved
        os.unlink(name)
        reason = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        if reason not in _unsaved:
            _unsaved.add(reason)
            notice(f"aiayn: a decoder step cannot be given to another process to compile ({reason}); "
                   "it is compiled by the process that needs it")
        return None
    return Path(name)


_unsaved: set[str] = set()  # the reasons said so far


alongside = Alongside()
_BUILD_ALONE = "import sys; from aiayn.decoding.cache.alongside import build_alone; " \
               "build_alone(sys.argv[1], int(sys.argv[2]))"


@dataclass(frozen=True)
class _Shape:
    """A tensor of an example input, as a job carries it: what export traces (its values do not
    change the graph; the job's process makes zeros)."""

    shape: tuple[int, ...]
    dtype: torch.dtype
    device: str


def _shapes(inputs: Any) -> Any:
    return tree_map(lambda x: _Shape(tuple(x.shape), x.dtype, str(x.device)) if isinstance(x, Tensor) else x,
                    inputs)


def build_alone(job: str, parent: int) -> None:
    """`Alongside`'s process: compile one step into the cache from its example inputs made of zeros
    (unless another process stored it meanwhile); a failure is left to the process that needs the
    step, which compiles it itself. It ends, with its compilers, when `parent` does. Inductor writes
    its kernels' loops for the process's torch threads (none parallel on one), so the step is
    compiled at the parent's count: the code the parent would have compiled itself."""
    _end_with(parent)
    entry, fields, module, inputs, dynamic, threads = torch.load(job, weights_only=False)
    torch.set_num_threads(threads)
    with building(entry, fields, lambda message: None):
        if check(entry, fields) is None:
            return
        module = torch.load(module, weights_only=False)
        inputs = tree_map(lambda x: torch.zeros(x.shape, dtype=x.dtype, device=x.device)
                          if isinstance(x, _Shape) else x, inputs)
        with torch.no_grad():
            build(entry, fields, module, inputs, dynamic(inputs))


def _end_with(parent: int) -> None:
    """End this process and its group (the compilers it started) once `parent` has ended, killed or
    not: a thread looks every half second whether this process has been given another parent."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(0), signal.SIGKILL)
        os._exit(1)

    threading.Thread(target=watch, name="aiayn-parent-watch", daemon=True).start()
