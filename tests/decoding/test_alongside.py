"""Steps compiled alongside: while a process compiles a step, another compiles the smaller ones its
search will shrink through (`Alongside`). A file of its own, so that a test worker other
than test_packages.py's can take it."""

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import torch

from aiayn.decoding import beam_search, compiled, packages
from aiayn.decoding.cache import store
from aiayn.decoding.compiled import CompiledStep
from tests.conftest import one_layer_model, random_ids


def test_the_steps_a_search_shrinks_through_are_compiled_alongside_in_another_process(
        cache, tmp_path, monkeypatch, capsys):
    """A beam search of 2 sentences (4 rows, beam 2) steps at 2 rows once the first has finished.
    While this process compiles the 4-row step, another compiles the 2-row one from example inputs
    (`step_graph._with_rows`): the search finds what the eager search finds, and the job files are
    gone."""
    monkeypatch.setenv("AIAYN_COMPILE_WORKERS", "1")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    model = one_layer_model()
    src, limits = random_ids(2, 6, seed=3), torch.tensor([2, 12])
    with torch.no_grad():
        eager = beam_search(model, src, 2, 1, 0.6, "gnmt", limits)
        found = beam_search(model, src, 2, 1, 0.6, "gnmt", limits, CompiledStep(model))
    assert [h[0].tokens for h in found] == [h[0].tokens for h in eager]
    assert [h[0].score for h in found] == pytest.approx([h[0].score for h in eager], abs=1e-4)
    err = capsys.readouterr().err
    assert "compiling 1 more decoder step alongside, in up to 1 other process: 2 rows" in err
    built_here = sorted(json.loads((entry / store.ENTRY).read_text())["fields"]["rows"] for entry in cache)
    stored = sorted(recorded["fields"]["rows"] for _, recorded, _ in store.entries())
    assert stored == [2, 4] and built_here == [4]
    assert not list(tmp_path.glob("aiayn-step-*"))


def test_the_steps_after_a_first_step_are_compiled_alongside_it(cache, tmp_path, monkeypatch, capsys):
    """A beam search of 1 sentence (beam 2) runs its first step at 2 rows (one a sentence, topped up),
    then its 2 beams. While this process compiles the first step, another compiles the later steps of
    one sentence and of two (a request's), the one needed here first, from example inputs made to
    their shapes (positions, and the table of the beams' histories, which a first step has not): the
    search finds what the eager search finds."""
    monkeypatch.setenv("AIAYN_COMPILE_WORKERS", "1")
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(compiled, "FIRST_STEP_ROWS", 2)  # as for users (`cache` runs it eagerly)
    model = one_layer_model()
    src, limits = random_ids(1, 6, seed=4), torch.tensor([9])
    with torch.no_grad():
        eager = beam_search(model, src, 2, 2, 0.6, "gnmt", limits)
        found = beam_search(model, src, 2, 2, 0.6, "gnmt", limits, CompiledStep(model))
    packages.alongside.stop()  # the step of two sentences, which this search does not need
    assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in eager]
    assert [h.score for hyps in found for h in hyps] == \
        pytest.approx([h.score for hyps in eager for h in hyps], abs=1e-4)
    err = capsys.readouterr().err
    assert "compiling 2 more decoder steps alongside, in up to 1 other process: 4 rows, 2 rows" in err
    built_here = [json.loads((entry / store.ENTRY).read_text())["fields"] for entry in cache]
    stored = {(f["rows"], f["first"], f["traced"]) for f in (r["fields"] for _, r, _ in store.entries())}
    assert [(f["rows"], f["first"]) for f in built_here] == [(2, True)]
    needed = {(2, True, False), (2, False, True)}  # (rows, first, traced): the later one traced
    assert needed <= stored <= needed | {(4, False, True)}
    assert not list(tmp_path.glob("aiayn-step-*"))


PARENT = """
import sys, time
from aiayn.decoding import beam_search, packages
from aiayn.decoding.compiled import CompiledStep
from tests.conftest import one_layer_model, random_ids

def build(*args, **kwargs):  # the parent compiles nothing itself: it says its children and waits
    print(*(p.pid for p, _ in packages.alongside._running.values()), flush=True)
    time.sleep(600)

packages.build = build
model = one_layer_model()
beam_search(model, random_ids(2, 6, seed=3), 2, 1, 0.6, "gnmt", step=CompiledStep(model))
"""


def test_a_process_compiling_alongside_ends_with_its_parent_even_one_killed(cache, monkeypatch):
    """`kill -9` of the process that asked for steps: the processes compiling them for it (and the
    compilers they started) end within 10 s, rather than compile for no one."""
    monkeypatch.setenv("AIAYN_COMPILE_WORKERS", "1")
    root = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=root, stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])})
    try:
        children = [int(pid) for pid in parent.stdout.readline().split()]
        assert children, "no step was compiled alongside"
        group = os.getpgid(children[0])
        assert group != os.getpgid(parent.pid)  # its own group, its compilers with it
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while _members(group) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _members(group), f"still running 10 s after their parent was killed: {_members(group)}"


def _members(group: int) -> list[int]:
    """The live processes (not zombies) of a process group."""
    found = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = status.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                found.append(int(status.parent.name))
    return found


def test_a_step_compiled_alongside_is_compiled_at_the_threads_of_the_process_that_asked(
        tmp_path, monkeypatch):
    """Inductor writes a step's loops for the compiling process's torch threads (on one, none run in
    parallel): the job carries the asking process's count and the compiling process builds at it, so
    a step compiled alongside is the one the asking process would have compiled itself, also when
    asked during an eager search that runs on fewer threads beside other compiles (`cores_left`)."""
    from aiayn.decoding.cache import alongside

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    jobs = alongside.Alongside()
    monkeypatch.setattr(jobs, "_start", lambda: None)  # keep the job queued: no process
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        jobs._running[tmp_path / "other"] = None, None  # another step compiling: one core fewer
        with jobs.cores_left():
            assert torch.get_num_threads() == 2
            jobs.submit(tmp_path / "entry", {"rows": 4}, torch.nn.Linear(2, 2), (torch.zeros(4, 2),),
                        _dynamic)
    finally:
        jobs._running.clear()
        torch.set_num_threads(threads)
    job = next(iter(jobs._queued.values()))
    assert torch.load(job, weights_only=False)[-1] == 3

    seen = []
    monkeypatch.setattr(alongside, "_end_with", lambda parent: None)
    monkeypatch.setattr(alongside, "check", lambda entry, fields: "not stored yet")
    monkeypatch.setattr(alongside, "build", lambda *args: seen.append(torch.get_num_threads()))
    try:
        alongside.build_alone(str(job), os.getpid())
    finally:
        torch.set_num_threads(threads)
        jobs.stop()
    assert seen == [3]


def _dynamic(inputs: tuple) -> tuple:
    """A job's dynamic shapes (pickled by reference, as the searches' are)."""
    return ({0: None},)
