"""A model's compiled decoder step, kept on disk (decoding/cache/): one step per `Kind` (row count,
what it returns, ...), loaded from the cache, or compiled and stored there first, the steps that a
search will need next compiled alongside, and the steps of one model sharing one copy of its weights.
A thread may choose not to wait for a step that is not in the cache yet (`wait_for_compiles`): it is
compiled in another process meanwhile, and the call raises `NotCompiledYet` (the search runs eagerly).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import Tensor, nn

from aiayn.decoding.cache import store
from aiayn.decoding.cache.alongside import alongside
from aiayn.decoding.cache.compiling import build, building, compiling_elsewhere
from aiayn.decoding.cache.library import Runner
from aiayn.decoding.cache.store import (
    ENTRY,
    Kind,
    check,
    describe,
    discard,
    entry_fields,
    entry_name,
    kept,
    steps_dir,
    weights_digest,
)
from aiayn.decoding.cache.verdict import Unloadable, known_unloadable, loads
from aiayn.decoding.tracing import gate

_tables = threading.Lock()  # Packages' tables, for the threads of a process sharing steps
_policy = threading.local()  # this thread's `wait_for_compiles`, and its steps not waited for
_aside: set[threading.Thread] = set()  # the threads loading stored steps now (`loading_aside`)


class NotCompiledYet(Exception):
    """The step a call needs is not loaded yet (it is being compiled in another process, or loaded on a
    thread of its own), and this thread does not wait for it (`wait_for_compiles`)."""


def wait_for_compiles(wait: bool) -> None:
    """Whether this thread's calls of a step not in the cache wait while it is compiled (the default),
    or, where other processes can compile it (`alongside.workers()`), have it compiled there and raise
    `NotCompiledYet` at once, each step loaded on a thread of its own once stored and used from then
    on: a server's searches, which answer eagerly meanwhile."""
    _policy.wait = wait


def loading_aside() -> int:
    """How many stored steps are being loaded on threads of their own now (`_not_waited_for`)."""
    with _tables:
        return len(_aside)


def not_waited_for() -> int:
    """How many calls of this thread have raised `NotCompiledYet` so far."""
    return getattr(_policy, "deferred", 0)


# (module, a kind of step, its inputs) -> the kinds needed next, each with a function making inputs
Ahead = Callable[[nn.Module, Kind, tuple], list[tuple[Kind, Callable[[], tuple]]]]
Example = Callable[[nn.Module, Kind, tuple], tuple]  # (module, a kind, a call's inputs) -> inputs to export


class Packages:
    """A model's compiled step (`module`, called as `module(*inputs)`), one package per `Kind`:
    loaded from the cache, or exported, compiled and stored there first. Call it as the module."""

    def __init__(self, module: nn.Module, kind: Callable[[nn.Module, tuple], Kind],
                 dynamic: Callable[[tuple], tuple], notice: Callable[[str], None] | None = None,
                 weights: dict[str, tuple[str, Tensor, Runner]] | None = None,
                 ahead: Ahead | None = None, example: Example | None = None) -> None:
        """`kind`: (module, inputs) -> the `Kind` of step they need; `dynamic`: inputs -> their
        dynamic shapes for torch.export; `weights`: the table of the weights loaded (`self.weights`)
        of other Packages of the same model and weights, to share theirs; `ahead`: (module, a kind,
        its inputs) -> the kinds a search that needs it will need next, each with a function making
        inputs for it (`Alongside` compiles those missing in other processes); `example`: (module, a
        kind, a call's inputs) -> the inputs to export that kind from (default: the call's own)."""
        self.module, self.kind, self.dynamic, self.ahead, self.example = module, kind, dynamic, ahead, example
        self.notice = notice or store.notice
        self._runners: dict[Kind, Runner] = {}
        self._weights: str | None = None
        self.weights = {} if weights is None else weights  # name -> (digest, tensor, its step) loaded
        self._loading: dict[Kind, threading.Lock] = {}  # one kind is loaded or built by one thread

    def __call__(self, *inputs: Any) -> Any:
        kind = self.kind(self.module, inputs)
        runner = self._runners.get(kind)
        if runner is None and not getattr(_policy, "wait", True) and alongside.workers():
            self._not_waited_for(kind, inputs)
        if runner is None:
            with self._lock(kind):  # another thread's build of this kind: its step; of another kind: at once
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

    def _lock(self, kind: Kind) -> threading.Lock:
        """The lock of loading or building `kind`'s step: one thread does it."""
        with _tables:
            return self._loading.setdefault(kind, threading.Lock())

    def _entry(self, kind: Kind, sample: Tensor) -> tuple[dict[str, Any], Path]:
        """The cache entry of `kind`'s step for these weights: its fields and its directory."""
        if self._weights is None:
            with gate.running():  # not while another thread's export has put fakes in the weights
                self._weights = weights_digest(self.module)
        fields = entry_fields(self._weights, kind, sample)
        return fields, steps_dir() / entry_name(fields)

    def _load_or_build(self, kind: Kind, inputs: tuple) -> Runner:
        fields, entry = self._entry(kind, inputs[1])
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

    def _not_waited_for(self, kind: Kind, inputs: tuple) -> NoReturn:
        """A call that does not wait for `kind`'s step (`wait_for_compiles`): the step loaded on a
        thread of its own if the cache holds it, else compiled in another process (`alongside`);
        either way `NotCompiledYet` now, and the step is used by the first call after it is loaded."""
        _policy.deferred = not_waited_for() + 1
        loading = self._lock(kind)
        if loading.acquire(blocking=False):  # else another thread loads or builds it now
            try:
                if kind not in self._runners:
                    self._load_or_submit(kind, inputs)
            finally:
                loading.release()
        raise NotCompiledYet(f"the decoder step for {kind} is not loaded yet")

    def _load_or_submit(self, kind: Kind, inputs: tuple) -> None:
        fields, entry = self._entry(kind, inputs[1])
        if alongside.has(entry) or compiling_elsewhere(entry):
            return
        problem = check(entry, fields)
        if problem is None:  # stored: loaded meanwhile (a second or two, the first time)
            loader = threading.Thread(target=self._load_aside, args=(kind, entry, inputs[1].device),
                                      name="aiayn-step-loading", daemon=True)
            with _tables:
                _aside.add(loader)
            loader.start()
            self._compile_ahead(kind, inputs)
            return
        if problem != "absent":
            discard(entry)
        self.notice(f"aiayn: compiling the decoder step for {describe(fields)} in another process "
                    f"({problem}); searching without it meanwhile")
        with gate.running():
            example = inputs if self.example is None else self.example(self.module, kind, inputs)
            alongside.submit(entry, fields, self.module, example, self.dynamic)
        self._compile_ahead(kind, inputs)

    def _load_aside(self, kind: Kind, entry: Path, device: torch.device) -> None:
        """Load `entry`'s step for `kind` (`_not_waited_for`'s thread); one that does not load is
        discarded, to be compiled again."""
        try:
            self._load_kind(kind, entry, device)
        finally:
            with _tables:
                _aside.discard(threading.current_thread())

    def _load_kind(self, kind: Kind, entry: Path, device: torch.device) -> None:
        with self._lock(kind):
            if kind in self._runners:
                return
            try:
                runner = self._load(entry, device)
            except Unloadable:  # said; the searches run eagerly from now on (`verdict`)
                return
            except Exception as e:  # a package that passed the checks but does not load here
                self.notice(f"aiayn: the cached decoder step {entry} does not load ({type(e).__name__}): "
                            "compiling it again")
                discard(entry)
                return
            with _tables:
                self._runners[kind] = runner

    def _build(self, kind: Kind, inputs: tuple, entry: Path, fields: dict[str, Any], problem: str) -> Runner:
        """Compile `entry`'s step, whose cache entry is absent or unusable (`problem`), and load it."""
        if problem != "absent":
            self.notice(f"aiayn: the cached decoder step {entry} is unusable ({problem}): compiling it "
                        "again")
            discard(entry)
        self.notice(f"aiayn: compiling the decoder step for {describe(fields)} (once per model and "
                    f"machine; kept in {steps_dir()})")
        self._compile_ahead(kind, inputs)  # meanwhile
        device = inputs[1].device
        if self.example is not None:
            with gate.running():
                inputs = self.example(self.module, kind, inputs)
        try:
            build(entry, fields, self.module, inputs, self.dynamic(inputs))
        except OSError as e:  # the cache cannot be written: compile for this process only
            self.notice(f"aiayn: cannot keep the compiled step in {steps_dir()} ({e}); compiling it for "
                        "this process only")
            scratch = Path(tempfile.mkdtemp(prefix="aiayn-step-"))
            try:  # a loaded package no longer needs its file
                build(scratch / entry.name, fields, self.module, inputs, self.dynamic(inputs))
                return self._load(scratch / entry.name, device)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return self._load(entry, device)

    def _compile_ahead(self, kind: Kind, inputs: tuple) -> None:
        """Have the steps a search needing `kind` will need next compiled in other processes
        (`alongside`), those the cache lacks, the last needed first: this process compiles the first
        needed itself if no other has started it."""
        if self.ahead is None or alongside.workers() == 0 or known_unloadable(inputs[1].device):
            return
        with gate.running():  # it reads the module, and saves it for the other processes
            self._submit_ahead(kind, inputs)

    def _submit_ahead(self, kind: Kind, inputs: tuple) -> None:
        missing = []
        for other, make_inputs in self.ahead(self.module, kind, inputs):
            fields, entry = self._entry(other, inputs[1])
            if other not in self._runners and not alongside.has(entry) and check(entry, fields) == "absent" \
                    and not compiling_elsewhere(entry):
                missing.append((entry, fields, make_inputs))
        if not missing:
            return
        steps, processes = ("step" if len(missing) == 1 else "steps"), alongside.workers()
        self.notice(f"aiayn: compiling {len(missing)} more decoder {steps} alongside, in up to {processes} "
                    f"other process{'' if processes == 1 else 'es'}: "
                    + ", ".join(store.rows(fields) for _, fields, _ in missing))
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
