"""Running a model while another thread of the process compiles one (`gate`).

While torch traces a module (`torch.export`, and Inductor's lowering inside AOTInductor's compile),
it replaces `torch.nn.Module.__call__` and `__getattr__` for the whole process, not for its own
thread, and export puts fake tensors in the traced module's weights: a model run meanwhile by
another thread is recorded into that trace, and both fail ("Unexpected key ..." from the tracer's
module stack), and the traced model's weights read meanwhile are the fakes. So the searches run their
eager model calls, and read a model's weights, inside `gate.running()`, any number of threads at
once, and a compile traces inside `gate.tracing()`, alone: it waits for the calls under way (a step,
milliseconds), and calls that come later wait for it. A compiled step's own call is not a module
call and needs no gate. Steps compiled alongside, in other processes (`cache.alongside`), stop
nothing here.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Gate:
    """Model calls (shared by any number of threads; reentrant) and traces (one at a time, alone)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._running = 0  # threads inside `running`
        self._tracer: int | None = None  # the thread tracing
        self._waiting = 0  # traces waiting: later calls wait behind them, so a trace is not starved
        self._depth = threading.local()  # this thread's `running` depth

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Run the model eagerly: waits while a trace runs or waits (unless this thread traces)."""
        depth = getattr(self._depth, "n", 0)
        counted = depth == 0 and self._tracer != threading.get_ident()
        if counted:
            with self._changed:
                while self._tracer is not None or self._waiting:
                    self._changed.wait()
                self._running += 1
        try:
            self._depth.n = depth + 1
            yield
        finally:
            self._depth.n = depth
            if counted:
                with self._changed:
                    self._running -= 1
                    self._changed.notify_all()

    @contextlib.contextmanager
    def tracing(self) -> Iterator[None]:
        """Trace (export, compile) alone: once no other thread runs or traces a model."""
        if getattr(self._depth, "n", 0) or self._tracer == threading.get_ident():
            raise RuntimeError("a model is traced from inside a model call or trace of the same thread")
        with self._changed:
            self._waiting += 1
            try:
                while self._tracer is not None or self._running:
                    self._changed.wait()
                self._tracer = threading.get_ident()
            finally:
                self._waiting -= 1
                self._changed.notify_all()  # calls waiting behind this trace only, if it gave up
        try:
            yield
        finally:
            with self._changed:
                self._tracer = None
                self._changed.notify_all()


gate = Gate()
