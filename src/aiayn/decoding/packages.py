"""Compiled decoder steps kept on disk: compiled once per model, row count and machine, then loaded
by every later process in a fraction of a second (`aiayn cache info|clear`).

The compiled step (`compiled.py`) freezes the weights into its graph. torch.compile's own caches
do not keep such a graph: its AOTAutograd cache refuses frozen graphs and its FX graph cache the
weights packed for MKL, so every process compiled again (35-56 s; benchmarks/RESULTS.md). Here
the step is exported (`torch.export`, with the positions decoded, the cache capacity and the
source length as dynamic dimensions) and compiled ahead of time by AOTInductor, with the same
freezing, into a package: a shared library with the weights inside. On the CPU the entry keeps
that library alone and loads it where it lies (the package's loader would first copy it out of the
package, for every process); a GPU's package is kept whole. Each library holds a copy of the weights
(as freezing laid them out), which loading copies into memory: the steps of one model then keep one
copy, the first step's, wherever the entry's digests of another's weights are the same.

An entry is a directory named by a hash of everything that changes the compiled code: the
weights, aiayn's own code, torch's version, the CPU's kernels and features (or the GPU), and the
step's kind (row count, what it returns, whether it reads traced histories, whether it is a
search's first step). Beside the library or package, `entry.json` holds those fields, the file's
sha256 and its inode, size and change time when stored: a file whose status differs (written to,
replaced, copied) is hashed in full before it is used, one untouched since is not read twice. An
entry that fails any check (damaged, foreign, unloadable) is built again with a one-line notice.
An entry is built in a temporary directory and renamed into place, so no process finds half of one.
A process compiling a step holds a lock on it (`building`): another process that needs the same step
waits for it and loads what it stored, instead of compiling it too. Nothing is ever written into a
stored entry (running processes have its library mapped); a discarded one is renamed away first.

The cache lives in `$AIAYN_CACHE_DIR/steps`, by default `~/.cache/aiayn/steps`.
"""

from __future__ import annotations

import _ctypes
import atexit
import calendar
import contextlib
import ctypes
import functools
import hashlib
import json
import mmap
import os
import platform
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from weakref import WeakKeyDictionary

import torch
from torch import Tensor, nn
from torch.utils._pytree import tree_leaves, tree_map

import aiayn
from aiayn import files

PACKAGE = "step.pt2"  # what AOTInductor makes, kept whole for a GPU
LIBRARY = "step.so"  # on the CPU, the package's shared library alone (the weights are inside it)
ENTRY = "entry.json"
LARGEST = 8192  # positions, cache capacity and source length a packaged step takes (beyond: eager)


def cache_dir() -> Path:
    """Where compiled steps are kept: $AIAYN_CACHE_DIR/steps (default ~/.cache/aiayn/steps)."""
    root = os.environ.get("AIAYN_CACHE_DIR") or Path.home() / ".cache" / "aiayn"
    return Path(root) / "steps"


_private: dict[Path, Path] = {}  # a cache others may write -> this process's private one instead


def steps_dir() -> Path:
    """Where this process finds and keeps compiled steps: `cache_dir()`, made yours alone (0700) if
    new, unless another user owns it or others may write it. A step is a shared library that aiayn
    loads: whoever can write the directory runs code in every process that uses it. Such a cache is
    refused with a one-line notice, and the process compiles into a private temporary one instead."""
    wanted = cache_dir()
    if wanted in _private or (problem := not_ours_alone(wanted, create=True)) is None:
        return _private.get(wanted, wanted)
    with _tables:
        if wanted not in _private:
            private = Path(tempfile.mkdtemp(prefix="aiayn-steps-"))
            atexit.register(shutil.rmtree, private, True)
            _notice(f"aiayn: not using the compiled-step cache {wanted}: {problem}, and whoever can write "
                    f"it runs code in this process; compiling into {private} for this process instead "
                    f"(to use the cache, make it yours alone: chmod 700 {wanted})")
            _private[wanted] = private
    return _private[wanted]


def not_ours_alone(path: Path, create: bool = False) -> str | None:
    """Why `path` (a directory, created 0700 if `create` and absent, or a file) is not this user's
    alone: owned by another user, or writable by the group or others; None if it is, or cannot be
    seen (the writes then say what is wrong), or on a system without users' ids."""
    if not hasattr(os, "getuid"):
        return None
    try:
        if create:
            path.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = path.stat()
    except OSError:
        return None
    if st.st_uid != os.getuid():
        return f"{path} belongs to another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"others may write {path} (mode {stat.filemode(st.st_mode)})"
    return None


@dataclass(frozen=True)
class Kind:
    """What a compiled step is for, besides its model: these make separate graphs."""

    rows: int  # B, fixed per graph
    output: str  # logits and their normaliser, log-probabilities, or a score function's (`Step.scored`)
    traced: bool  # reads beams' histories through a table (beam search), or its own rows (greedy)
    first: bool = False  # a search's first step: one position (static), where the others take 2 or more
    beams: int = 0  # the beam size of a score function's inputs (scores (B/K, K), static), 0 without


_tables = threading.Lock()  # Packages' tables, for the threads of a process sharing steps

# (module, a kind of step, its inputs) -> the kinds needed next, each with a function making inputs
Ahead = Callable[[nn.Module, Kind, tuple], list[tuple[Kind, Callable[[], tuple]]]]


class Packages:
    """A model's compiled step (`module`, called as `module(*inputs)`), one package per `Kind`:
    loaded from the cache, or exported, compiled and stored there first. Call it as the module."""

    def __init__(self, module: nn.Module, kind: Callable[[nn.Module, tuple], Kind],
                 dynamic: Callable[[tuple], tuple], notice: Callable[[str], None] | None = None,
                 weights: dict[str, tuple[str, Tensor, Runner]] | None = None,
                 ahead: Ahead | None = None) -> None:
        """`kind`: (module, inputs) -> the `Kind` of step they need; `dynamic`: inputs -> their
        dynamic shapes for torch.export; `weights`: the table of the weights loaded (`self.weights`)
        of other Packages of the same model and weights, to share theirs; `ahead`: (module, a kind,
        its inputs) -> the kinds a search that needs it will need next, each with a function making
        inputs for it (`Alongside` compiles those missing in other processes)."""
        self.module, self.kind, self.dynamic, self.ahead = module, kind, dynamic, ahead
        self.notice = notice or _notice
        self._runners: dict[Kind, Runner] = {}
        self._weights: str | None = None
        self.weights = {} if weights is None else weights  # name -> (digest, tensor, its step) loaded
        self._loading: dict[Kind, threading.Lock] = {}  # one kind is loaded or built by one thread

    def __call__(self, *inputs: Any) -> Any:
        kind = self.kind(self.module, inputs)
        runner = self._runners.get(kind)
        if runner is None:
            with _tables:
                loading = self._loading.setdefault(kind, threading.Lock())
            with loading:  # another thread's build of this kind: its step; of another kind: at once
                runner = self._runners.get(kind) or self._load_or_build(kind, inputs)
                with _tables:
                    self._runners[kind] = runner
        return runner(*inputs)

    def kinds(self) -> list[Kind]:
        """The steps loaded (or built) so far."""
        return list(self._runners)

    def runners(self) -> list[Runner]:
        """The steps loaded (or built) so far, in that order."""
        return list(self._runners.values())

    def _load_or_build(self, kind: Kind, inputs: tuple) -> Runner:
        if self._weights is None:
            self._weights = weights_digest(self.module)
        fields = entry_fields(self._weights, kind, inputs[1])
        entry = steps_dir() / entry_name(fields)
        alongside.wait(entry)  # being compiled in another process of ours: its result, or here
        problem = check(entry, fields)
        if problem is not None:
            with building(entry, fields, self.notice):  # another process compiling it: once it is done
                problem = check(entry, fields)
                if problem is not None:
                    return self._build(kind, inputs, entry, fields, problem)
        try:
            runner = self._load(entry, inputs[1].device)
            self._compile_ahead(kind, inputs)
            return runner
        except Unloadable:  # no step would: building this one again would not help
            raise
        except Exception as e:  # a package that passed the checks but does not load here
            with building(entry, fields, self.notice):
                return self._build(kind, inputs, entry, fields, f"it does not load ({type(e).__name__})")

    def _build(self, kind: Kind, inputs: tuple, entry: Path, fields: dict[str, Any], problem: str) -> Runner:
        """Compile `entry`'s step, whose cache entry is absent or unusable (`problem`), and load it."""
        if problem != "absent":
            self.notice(f"aiayn: the cached decoder step {entry} is unusable ({problem}): compiling it "
                        "again")
            discard(entry)
        self.notice(f"aiayn: compiling the decoder step for {describe(fields)} (once per model and "
                    f"machine; kept in {steps_dir()})")
        self._compile_ahead(kind, inputs)  # meanwhile
        try:
            build(entry, fields, self.module, inputs, self.dynamic(inputs))
        except OSError as e:  # the cache cannot be written: compile for this process only
            self.notice(f"aiayn: cannot keep the compiled step in {steps_dir()} ({e}); compiling it for "
                        "this process only")
            scratch = Path(tempfile.mkdtemp(prefix="aiayn-step-"))
            try:  # a loaded package no longer needs its file
                build(scratch / entry.name, fields, self.module, inputs, self.dynamic(inputs))
                return self._load(scratch / entry.name, inputs[1].device)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return self._load(entry, inputs[1].device)

    def _compile_ahead(self, kind: Kind, inputs: tuple) -> None:
        """Have the steps a search needing `kind` will need next compiled in other processes
        (`alongside`), those the cache lacks, the last needed first: this process compiles the first
        needed itself if no other has started it."""
        if self.ahead is None or alongside.workers() == 0 or known_unloadable(inputs[1].device):
            return
        missing = []
        for other, make_inputs in self.ahead(self.module, kind, inputs):
            fields = entry_fields(self._weights, other, inputs[1])
            entry = steps_dir() / entry_name(fields)
            if other not in self._runners and not alongside.has(entry) and check(entry, fields) == "absent" \
                    and not compiling_elsewhere(entry):
                missing.append((entry, fields, make_inputs))
        if not missing:
            return
        steps, processes = ("step" if len(missing) == 1 else "steps"), alongside.workers()
        self.notice(f"aiayn: compiling {len(missing)} more decoder {steps} alongside, in up to {processes} "
                    f"other process{'' if processes == 1 else 'es'}: "
                    + ", ".join(f"{fields['rows']} rows" for _, fields, _ in missing))
        for entry, fields, make_inputs in sorted(missing, key=lambda m: m[1]["rows"]):
            alongside.submit(entry, fields, self.module, make_inputs(), self.dynamic)

    def _load(self, entry: Path, device: torch.device) -> Runner:
        """The entry's step, loaded, sharing weights with the steps loaded before (`_share`).
        Raises `Unloadable` where this machine's torch cannot load compiled steps (`loads`)."""
        recorded = json.loads((entry / ENTRY).read_text())
        path = kept(entry, recorded)
        if not loads(path, device, self.notice):
            alongside.stop()
            raise Unloadable(f"{torch.__version__} cannot load compiled steps on this machine")
        return self._share(Runner(path, device), recorded.get("constants"))

    def _share(self, runner: Runner, recorded: Any) -> Runner:
        """Each step holds a copy of the model's weights (the quickstart model's ten: 290 MB). A step
        whose every weight a step loaded before holds (here, or in Packages sharing `weights`; the
        entry's digests: name, layout and values the same) uses those and frees its own copy;
        otherwise later steps may use its weights."""
        if runner.container is None:  # a package (GPU): its weights stay its own
            return runner
        own = runner.constants()  # `recorded`: the entry's digests of them
        if not isinstance(recorded, dict) or not recorded or recorded.keys() != own.keys():
            return runner
        with _tables:  # `weights` may be another Packages' too
            if all(self.weights.get(name, ("",))[0] == digest for name, digest in recorded.items()):
                with contextlib.suppress(RuntimeError):  # if refused, it keeps its own
                    runner.use_constants({name: self.weights[name][1] for name in recorded})
            else:
                for name, digest in recorded.items():  # views of `runner`'s buffer: kept with it
                    self.weights.setdefault(name, (digest, own[name], runner))
        return runner


class Runner:
    """A compiled step loaded (a CPU library, or a package), called with the step's inputs.
    (AOTInductor's Python loader would also check the CPU by compiling a probe program, a second
    here, which the entry's fields do already, and parse the package's call spec at every call.)"""

    def __init__(self, path: Path, device: torch.device) -> None:
        self.container = None  # a CPU library's, whose weights can be read and replaced
        if path.suffix == ".so":
            self.container = torch._C._aoti.AOTIModelContainerRunnerCpu(str(path), 1)
            self.run = self.container.run
            _forget_library_weights(path)
        else:
            index = (device.index or 0) if device.type == "cuda" else -1
            self.run = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, index).boxed_run

    def __call__(self, *inputs: Any) -> Tensor | tuple[Tensor, ...]:
        out = self.run(_tensors(inputs, []))
        return out[0] if len(out) == 1 else tuple(out)

    def constants(self) -> dict[str, Tensor]:
        """The step's weights (the model's and those freezing made), by name: views of its buffer,
        which live only as long as the runner."""
        return self.container.extract_constants_map(False)

    def use_constants(self, tensors: dict[str, Tensor]) -> None:
        """Use `tensors` (all of `constants()`'s names; the caller keeps them alive) as the step's
        weights, and free its own copy."""
        names = self.container.get_constant_names_to_original_fqns()  # name in the library -> name
        self.container.update_constant_buffer({inner: tensors[name] for inner, name in names.items()},
                                              True, True, True)  # the spare buffer, all names, not copied
        self.container.swap_constant_buffer()
        self.container.free_inactive_constant_buffer()


class Unloadable(RuntimeError):
    """This machine's torch cannot load a compiled step (`loads`): the search runs eagerly."""


_LOAD_CHECK = "import sys, torch; from pathlib import Path; from aiayn.decoding.packages import Runner; " \
              "Runner(Path(sys.argv[1]), torch.device(sys.argv[2]))"  # what the child process runs
_verdicts: dict[str, str] = {}  # this process's: environment key -> "" (loads) or why not
_said: set[str] = set()  # the verdicts `say_unloadable` has said
CRASHES = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
VERDICT_DAYS = 30  # a recorded verdict is checked again after this long (and with another torch)


def loads(path: Path, device: torch.device, notice: Callable[[str], None] | None = None) -> bool:
    """Whether this torch loads compiled steps on this machine. Some builds crash the process as
    they load any AOTInductor package (torch 2.11.0+cu130 on the lent H100 and H200: a segmentation
    fault, CPU and CUDA alike), which no exception handler sees; so the first step a machine and torch
    load is loaded in a child process first. A crash of that process (a signal such as SIGSEGV) is
    kept in the cache as this machine's verdict for VERDICT_DAYS (`verdict_path`; `aiayn cache clear`
    forgets it); any other failure (a time-out, an out-of-memory kill, an error) holds for this
    process only, and a later one checks again. If it is no, `notice` says so."""
    if known_unloadable(device) is None:
        problem, lasting = _check_loads(path, device)
        _verdicts[_environment(device)] = problem
        if lasting:
            with contextlib.suppress(OSError):
                steps_dir().mkdir(parents=True, exist_ok=True, mode=0o700)
                files.write_atomically(verdict_path(device), json.dumps(
                    {"torch": torch.__version__, "machine": machine(device), "problem": problem,
                     "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1).encode())
        if problem:
            say_unloadable(problem, lasting, notice)
    return not _verdicts[_environment(device)]


def known_unloadable(device: torch.device) -> str | None:
    """Why compiled steps do not load here ("" if they do), if this process or the cache knows."""
    key = _environment(device)
    if key not in _verdicts:
        known = read_verdict(device)
        if known is None:
            return None
        _verdicts[key] = known
    return _verdicts[key]


def say_unloadable(problem: str, lasting: bool = True, notice: Callable[[str], None] | None = None) -> None:
    """Say why this process decodes eagerly (once per process): `problem`, and whether it is kept."""
    if problem in _said:
        return
    _said.add(problem)
    again = "'aiayn cache clear' checks again" if lasting else "the next process checks again"
    (notice or _notice)(f"aiayn: torch {torch.__version__} cannot load a compiled decoder step on this "
                        f"machine ({problem}): decoding runs eagerly ({again})")


def read_verdict(device: torch.device) -> str | None:
    """The cache's verdict for this torch and machine: "" (loads), why not, or None if not known
    (or checked more than VERDICT_DAYS ago)."""
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError):
        recorded = json.loads(verdict_path(device).read_text())
        checked = calendar.timegm(time.strptime(recorded["checked"], "%Y-%m-%dT%H:%M:%SZ"))
        if recorded.get("torch") == torch.__version__ and recorded.get("machine") == machine(device) \
                and 0 <= time.time() - checked < VERDICT_DAYS * 86400:
            return str(recorded["problem"])
    return None


def refusals() -> list[dict[str, Any]]:
    """The cache's verdicts that compiled steps do not load (for any torch and machine)."""
    found = []
    for path in sorted(cache_dir().glob(".loads-*.json")):
        with contextlib.suppress(OSError, ValueError):
            recorded = json.loads(path.read_text())
            if isinstance(recorded, dict) and recorded.get("problem"):
                found.append(recorded)
    return found


def verdict_path(device: torch.device) -> Path:
    """Where the cache keeps whether compiled steps load with this torch on this machine (a dot
    file: no entry)."""
    return steps_dir() / f".loads-{_environment(device)}.json"


def _environment(device: torch.device) -> str:
    """A name for this torch on this machine and device."""
    return _environment_of(str(device))


@functools.cache
def _environment_of(device: str) -> str:
    environment = [torch.__version__, machine(torch.device(device))]
    return hashlib.sha256(json.dumps(environment).encode()).hexdigest()[:16]


def _check_loads(path: Path, device: torch.device) -> tuple[str, bool]:
    """Load `path` in a child process (this one's Python, modules and environment): ("", True) if it
    loads, else what went wrong and whether it lasts (the process crashed: `CRASHES`)."""
    try:
        command, env = _python(_LOAD_CHECK, str(path), str(device))
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "loading it did not end in 300 s", False
    except OSError as e:  # no process could start (too many, no memory)
        return f"no process could check it ({e})", False
    if done.returncode < 0:
        with contextlib.suppress(ValueError):
            crash = signal.Signals(-done.returncode)
            return f"loading it killed the process with {crash.name}", crash in CRASHES
        return f"loading it killed the process with signal {-done.returncode}", False
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return f"loading it failed: {last[0][:200]}", False
    return "", True


def _python(code: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a child process running `code` with this process's Python and
    modules (its `sys.path`): neither a fork nor a spawn, which would run the caller's script again."""
    path = os.pathsep.join(p for p in sys.path if p)
    return [sys.executable, "-c", code, *args], {**os.environ, "PYTHONPATH": path}


def _forget_library_weights(library: Path) -> None:
    """Loading a library copied its weights out of it: take the pages they were read from (29 MB for
    the quickstart model) out of the process's memory. Never read again, they would stay counted
    until the kernel needs the memory; if read, they come back from the file. Linux only."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        loaded = ctypes.CDLL(str(library), os.RTLD_NOLOAD | os.RTLD_LAZY)  # the runner's, never a copy
        try:
            start, end = (ctypes.addressof(ctypes.c_char.in_dll(loaded, f"_binary_constants_bin_{edge}"))
                          for edge in ("start", "end"))
        finally:
            _ctypes.dlclose(loaded._handle)
        page = mmap.PAGESIZE
        first, last = -(-start // page) * page, end // page * page  # whole pages inside only
        if last > first:
            _libc().madvise(first, last - first, mmap.MADV_DONTNEED)


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def constant_digests(library: Path) -> dict[str, str]:
    """A digest of each weight in a CPU step's library: its name's tensor's dtype, shape, layout
    (oneDNN's packed format included) and values. Empty if one cannot be read."""
    digests = {}
    try:
        runner = Runner(library, torch.device("cpu"))  # alive while its weights are read
        for name, t in runner.constants().items():
            h = hashlib.sha256(f"{t.dtype} {tuple(t.shape)} {t.layout}".encode())
            if t.is_mkldnn:
                h.update(torch.ops.mkldnn._get_mkldnn_serialized_md(t).numpy().tobytes())
                t = t.to_dense()
            else:
                h.update(f"{t.stride()}".encode())
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            digests[name] = h.hexdigest()
    except Exception:  # any: a step that cannot share its weights still works
        return {}
    return digests


def _tensors(inputs: Any, flat: list[Tensor]) -> list[Tensor]:
    """The tensors among a step's inputs, in the order export flattened them (`tree_leaves`, which
    costs ten times as much per step for the lists and tuples a step takes)."""
    if isinstance(inputs, Tensor):
        flat.append(inputs)
    elif isinstance(inputs, list | tuple):
        for x in inputs:
            _tensors(x, flat)
    elif inputs is not None:
        flat.extend(x for x in tree_leaves(inputs) if isinstance(x, Tensor))
    return flat


def entry_fields(weights: str, kind: Kind, sample: Tensor) -> dict[str, Any]:
    """Everything that changes a compiled step, as the entry records it."""
    return {"weights": weights, "code": code_digest(), "torch": torch.__version__,
            "machine": machine(sample.device), "dtype": str(sample.dtype), "rows": kind.rows,
            "output": kind.output, "traced": kind.traced, "first": kind.first, "beams": kind.beams}


def describe(fields: dict[str, Any]) -> str:
    """What an entry's step is for, in words: '16 rows, beam search of beam 4', '2 rows, greedy, a
    search's first step'."""
    search = "greedy"
    if fields.get("traced") or str(fields.get("output")).endswith(".candidates"):
        search = f"beam search of beam {fields['beams']}" if fields.get("beams") else "beam search"
    return f"{fields.get('rows')} rows, {search}" + (", a search's first step" if fields.get("first") else "")


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


_compiling = threading.Lock()  # torch.export is not thread-safe: two threads exporting at once fail
# ("ProxyTorchDispatchMode slot already occupied"), so a process compiles one step at a time


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
        with _compiling:
            exported = torch.export.export(module, inputs, dynamic_shapes=dynamic, strict=False)
            check_sizes(exported, fields["rows"])
            with _setting(inductor_config, "freezing", True):
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


class Alongside:
    """Steps compiled in other processes while this one compiles and searches (`Packages.ahead`): a
    compile keeps one core busy, so on a machine of N cores, N - 1 more (at most
    `$AIAYN_COMPILE_WORKERS`, default 4; 0: none) compile the steps a search will need next, in the
    order asked; a step this process needs waits for its compile, or is taken back if it has not
    started. Each is a Python process of its own (`_python`), given a job file: the step's fields,
    example inputs as shapes and the module's file (saved once while its jobs last; `build_alone`).
    It stores its entry as any process does (`build`). Files go once their jobs are done; at exit,
    running jobs are stopped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[Path, Path] = {}  # entry -> its job file, in the order asked
        self._running: dict[Path, tuple[subprocess.Popen, Path]] = {}  # entry -> its process, job file
        self._modules: WeakKeyDictionary[nn.Module, Path] = WeakKeyDictionary()  # saved for the jobs
        atexit.register(self.stop)

    def workers(self) -> int:
        limit = os.environ.get("AIAYN_COMPILE_WORKERS", "4")
        return max(0, min(int(limit) if limit.isdigit() else 4, (os.cpu_count() or 1) - 1))

    def has(self, entry: Path) -> bool:
        with self._lock:
            return entry in self._queued or entry in self._running

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
        if (job := _saved((entry, fields, saved, _shapes(inputs), dynamic))) is None:
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
        with self._lock:
            running = list(self._running.values())
        for process, _ in running:
            with contextlib.suppress(OSError):  # the job's process and the compilers it started
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        with self._lock:
            jobs = [*self._queued.values(), *(job for _, job in self._running.values())]
            self._queued.clear()
            self._running.clear()
        for job in jobs:
            job.unlink(missing_ok=True)
        self._ended(None)

    def _start(self) -> None:
        with self._lock:
            while self._queued and len(self._running) < self.workers():
                entry = next(iter(self._queued))
                job = self._queued.pop(entry)
                command, env = _python(_BUILD_ALONE, str(job), str(os.getpid()))
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
    """`what` in a temporary file for a job's process; None if it cannot be saved."""
    handle, name = tempfile.mkstemp(prefix="aiayn-step-", suffix=".pt")
    os.close(handle)
    try:
        torch.save(what, name)
    except Exception:  # any: a full disk, something that cannot be saved
        os.unlink(name)
        return None
    return Path(name)


alongside = Alongside()
_BUILD_ALONE = "import sys; from aiayn.decoding.packages import build_alone; " \
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
    """`Alongside`'s process: compile one step into the cache, on one thread, from its example inputs
    made of zeros (unless another process stored it meanwhile); a failure is left to the process that
    needs the step, which compiles it itself. It ends, with its compilers, when `parent` does."""
    _end_with(parent)
    torch.set_num_threads(1)
    entry, fields, module, inputs, dynamic = torch.load(job, weights_only=False)
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
        lock = open(path, "wb")
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


def check_sizes(exported: torch.export.ExportedProgram, rows: int = 2) -> None:
    """Refuse a step whose export narrowed a dynamic size: each must take 2 to `LARGEST`, or, as the
    rows of the cache's buffers do, the step's `rows` to `LARGEST` (given as hints, export narrows a
    size when the traced code depends on it, where the step would then fail on longer sentences)."""
    for symbol, sizes in exported.range_constraints.items():
        if (sizes.lower > 2 and sizes.lower != rows) or sizes.upper < LARGEST:
            wanted = f"2 (or {rows}) to {LARGEST}" if rows != 2 else f"2 to {LARGEST}"
            raise RuntimeError(f"the exported decoder step takes {symbol} from {sizes.lower} to "
                               f"{sizes.upper} only, not {wanted}")


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
    again when it next needs them. Clearing all also forgets whether steps load here (`loads`)."""
    found = [(entry, size) for entry, recorded, size in entries() if only is None or only(recorded)]
    for entry, _ in found:
        discard(entry)
    if only is None:  # the next step loaded checks again
        for verdict in cache_dir().glob(".loads-*.json"):
            verdict.unlink(missing_ok=True)
        _verdicts.clear()
    files.clean_leftovers(cache_dir(), lambda name: True)
    return len(found), sum(size for _, size in found)


def stale(recorded: dict[str, Any] | None) -> bool:
    """Whether an entry was made by other aiayn code or another torch (an upgrade): this installation
    names its entries anew and never uses it again. An unreadable entry counts as stale."""
    fields = recorded.get("fields") if isinstance(recorded, dict) else None
    return not isinstance(fields, dict) or fields.get("code") != code_digest() \
        or fields.get("torch") != torch.__version__


def _notice(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextlib.contextmanager
def _setting(config: Any, name: str, value: Any) -> Iterator[None]:
    saved = getattr(config, name)
    setattr(config, name, value)
    try:
        yield
    finally:
        setattr(config, name, saved)
