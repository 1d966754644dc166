"""The gate between model calls and traces (`tracing.Gate`): calls share it, a trace has it alone,
and a trace waiting is not starved by later calls."""

import threading

import pytest

from aiayn.decoding.tracing import Gate
from tests.conftest import HANG_S, fails_if_hung


def in_thread(target):
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread


def test_a_trace_waits_for_the_calls_under_way_and_later_calls_wait_for_it():
    gate, order = Gate(), []
    running, trace_waits, later_waits = threading.Event(), threading.Event(), threading.Event()
    release = threading.Event()

    def call():
        with gate.running():
            running.set()
            assert release.wait(HANG_S)
            order.append("first call")

    def trace():
        trace_waits.set()
        with gate.tracing():
            order.append("trace")

    def later_call():
        later_waits.set()
        with gate.running():
            order.append("later call")

    with fails_if_hung():
        first = in_thread(call)
        assert running.wait(HANG_S)
        tracer = in_thread(trace)
        assert trace_waits.wait(HANG_S)
        while not gate._waiting:  # the trace is waiting for the first call
            tracer.join(0.01)
        later = in_thread(later_call)
        assert later_waits.wait(HANG_S)
        later.join(0.2)
        assert order == []  # the trace waits for the call, the later call for the trace
        release.set()
        for thread in (first, tracer, later):
            thread.join(HANG_S)
    assert order == ["first call", "trace", "later call"]


def test_calls_share_the_gate_and_nest_and_a_tracing_thread_may_run_its_model():
    gate, inside = Gate(), threading.Barrier(2, timeout=HANG_S)

    def call():
        with gate.running(), gate.running():  # nested: the same thread
            inside.wait()  # both threads inside at once

    with fails_if_hung():
        threads = [in_thread(call), in_thread(call)]
        for thread in threads:
            thread.join(HANG_S)
        with gate.tracing(), gate.running():  # freezing runs the traced model's own code
            pass
    assert gate._running == 0 and gate._tracer is None


def test_a_trace_from_inside_a_call_of_the_same_thread_is_refused_not_deadlocked():
    gate = Gate()
    with gate.running(), pytest.raises(RuntimeError, match="traced from inside a model call"):
        with gate.tracing():
            pass
    with gate.tracing(), pytest.raises(RuntimeError, match="or trace of the same thread"):
        with gate.tracing():
            pass
    with gate.tracing():  # the gate is left as it was
        pass
