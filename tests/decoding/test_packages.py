"""Compiled decoder steps kept on disk: used by later processes, rebuilt when damaged or foreign,
never used for another model, safe to fill from two processes, listed and cleared by `aiayn cache`."""

import copy
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
import zipfile
from pathlib import Path

import pytest
import torch

from aiayn import files
from aiayn.cli import main
from aiayn.cli import translate as cli_translate
from aiayn.decoding import compiled, greedy_search, packages, step_graph, whole
from aiayn.decoding.cache import compiling, store, verdict
from aiayn.decoding.compiled import CompiledStep
from aiayn.inference import packing_available
from aiayn.translation import load_translator
from tests.conftest import HANG_S, fails_if_hung, one_layer_model, random_ids

SRC, LIMITS = random_ids(2, 6, seed=5), torch.tensor([5, 7])  # one step: 2 rows
# Most tests here compile the same step of the same weights into a cache of their own: the compiler's
# work is done once and its package copied for the others (`inductor_once`).
pytestmark = pytest.mark.usefixtures("inductor_once")


def outputs(model):
    """Greedy outputs of the compiled step, as a fresh process would get them: a copy of the model is
    a model this process has not compiled for."""
    model = copy.deepcopy(model)
    return [h.tokens for h in greedy_search(model, SRC, LIMITS, step=CompiledStep(model))]


def only_entry():
    (entry,) = [path for path, _, _ in store.entries()]
    return entry


def test_a_step_is_compiled_once_loaded_after_rebuilt_when_damaged_and_anew_for_new_weights(cache, capsys):
    model = one_layer_model()
    eager = [h.tokens for h in greedy_search(model, SRC, LIMITS)]
    assert outputs(model) == eager
    assert len(cache) == 1 and "compiling the decoder step for 2 rows" in capsys.readouterr().err
    assert outputs(model) == eager
    assert len(cache) == 1 and capsys.readouterr().err == ""  # loaded: nothing compiled, nothing said

    package = store.kept(only_entry())  # on a CPU the library alone, step.so
    data = bytearray(package.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, in a file put in its place (this process has
    package.with_suffix(".new").write_bytes(bytes(data))  # the library loaded where it lies)
    package.with_suffix(".new").replace(package)
    assert outputs(model) == eager
    assert len(cache) == 2 and "damaged" in capsys.readouterr().err
    assert store.check(only_entry(), json.loads((only_entry() / store.ENTRY).read_text())["fields"]) \
        is None

    # The weights changed in place (training goes on) in a process that has loaded the step: the
    # search uses the new weights, compiled into an entry of their own; the first entry stays.
    original = copy.deepcopy(model)
    before = greedy_search(model, SRC, LIMITS, step=CompiledStep(model))
    with torch.no_grad():
        model.decoder.layers[0].feed_forward.w1.weight.mul_(3.0)
        model.tgt_embed.weight[7] += 1.0
    changed = greedy_search(model, SRC, LIMITS, step=CompiledStep(model))
    changed_eager = greedy_search(model, SRC, LIMITS)
    assert [h.tokens for h in changed] == [h.tokens for h in changed_eager]
    assert [h.log_prob for h in changed] == pytest.approx([h.log_prob for h in changed_eager], abs=1e-4)
    assert [h.log_prob for h in changed] != pytest.approx([h.log_prob for h in before], abs=1e-4)
    assert len(cache) == 3 and len(store.entries()) == 2
    assert len({recorded["fields"]["weights"] for _, recorded, _ in store.entries()}) == 2
    assert outputs(original) == eager and len(cache) == 3


def entry_with(tmp_path, fields, package=b"a package", digest=None, name="entry"):
    entry = tmp_path / name
    entry.mkdir(parents=True, exist_ok=True)
    (entry / store.PACKAGE).write_bytes(package)
    digest = digest or hashlib.sha256(package).hexdigest()
    (entry / store.ENTRY).write_text(json.dumps({"fields": fields, "sha256": digest}))
    return entry


def test_an_entry_is_used_only_if_whole_and_made_for_this_model_and_machine(tmp_path):
    fields = store.entry_fields("w" * 64, store.Kind(8, "log_probs", False), torch.zeros(1))
    assert store.check(tmp_path / "none", fields) == "absent"
    assert store.check(entry_with(tmp_path, fields), fields) is None
    foreign = {**fields, "machine": {**fields["machine"], "kernels": "AVX2" if "AVX2" not in
                                     fields["machine"]["kernels"] else "DEFAULT"}}
    assert store.check(entry_with(tmp_path, foreign), fields) == \
        "made for another model, machine or version"
    assert store.check(entry_with(tmp_path, fields, digest="0" * 64), fields).startswith("damaged")
    (tmp_path / "entry" / store.ENTRY).write_text("{not json")
    assert store.check(tmp_path / "entry", fields).startswith("unreadable")


class _SizeBranch(torch.nn.Module):
    """Code that depends on a dynamic size: export narrows the size's range to the branch taken."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.size(0) <= 127 else x * 3


class _AtLeastRows(torch.nn.Module):
    """A buffer read for the first rows of a step, as the cache's buffers are: at least that many."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:3] * 2


def test_an_export_that_narrows_a_dynamic_size_is_refused():
    def exported(module: torch.nn.Module) -> torch.export.ExportedProgram:
        sizes = torch.export.Dim.DYNAMIC(min=2, max=compiling.LARGEST)
        return torch.export.export(module, (torch.ones(4),), dynamic_shapes=({0: sizes},), strict=False)

    compiling.check_sizes(exported(torch.nn.ReLU()))  # every size kept: no error
    with pytest.raises(RuntimeError, match=f"from 2 to 127 only, not 2 to {compiling.LARGEST}"):
        compiling.check_sizes(exported(_SizeBranch()))
    compiling.check_sizes(exported(_AtLeastRows()), rows=3)  # from a step's 3 rows on: kept
    with pytest.raises(RuntimeError, match=f"from 3 to {compiling.LARGEST} only"):
        compiling.check_sizes(exported(_AtLeastRows()), rows=2)
    with pytest.raises(RuntimeError, match=rf"from 3 to {compiling.LARGEST} only, not 2 \(or 4\) to"):
        compiling.check_sizes(exported(_AtLeastRows()), rows=4)


def test_cache_prune_removes_only_what_another_aiayn_or_torch_made(tmp_path, monkeypatch, capsys):
    """Entries are named by aiayn's code and torch's version too: an upgrade leaves the old ones
    behind, never used again. `aiayn cache info` marks them; `prune` removes them and nothing else."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))
    fields = store.entry_fields("w" * 64, store.Kind(8, "log_probs", False), torch.zeros(1))
    root = store.cache_dir()
    entry_with(root, fields, name="current")
    entry_with(root, {**fields, "code": "0" * 64}, name="older-aiayn")
    entry_with(root, {**fields, "torch": "2.0.0"}, name="older-torch")
    (root / "unreadable").mkdir()
    assert main(["cache", "info"]) == 0
    info = capsys.readouterr().out
    assert ": 4 compiled steps" in info and "; 3 stale" in info and info.count("  stale\n") == 2
    assert main(["cache", "prune"]) == 0 and "removed 3 stale compiled steps" in capsys.readouterr().out
    assert sorted(p.name for p in root.iterdir()) == ["current"]


def test_each_kind_of_step_is_described_in_words():
    """What `aiayn cache info` and the compiling notices call an entry's step."""
    def described(kind):
        return store.describe(store.entry_fields("w" * 64, kind, torch.zeros(1)))

    assert described(store.Kind(2, "logits", False, first=True)) == "2 rows, greedy, a search's first step"
    assert described(store.Kind(0, "aiayn.decoding.beam.candidates", True, beams=4)) == \
        "any number of rows, beam search of beam 4"
    assert described(store.Kind(4, whole.OUTPUT, False, beams=4, packed=False)) == \
        "one sentence's whole beam search of beam 4"
    assert described(store.Kind(2, "aiayn.decoding.beam.candidates_no_repeat_3", False, True, 4)) == \
        "2 rows, beam search of beam 4, no 3-gram twice, a search's first step"
    assert described(store.Kind(4, whole.OUTPUT + "-no-repeat-2", False, beams=4, packed=False)) == \
        "one sentence's whole beam search of beam 4, no 2-gram twice"


def fake_compiler(monkeypatch, library=b"a library"):
    """AOTInductor replaced by a package holding `library`, as a CPU package holds its library."""
    def compile_(exported, package_path):
        with zipfile.ZipFile(package_path, "w") as package:
            package.writestr("step/data/aotinductor/model/step.so", library)

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_)
    exported = types.SimpleNamespace(range_constraints={})  # every size kept
    monkeypatch.setattr(torch.export, "export", lambda *args, **kwargs: exported)


def test_a_process_that_loses_the_race_to_store_an_entry_uses_the_winners(tmp_path, monkeypatch):
    """Two processes compiling the same step: the second to finish finds the entry stored and keeps
    it (its own build goes), and nothing half-written is left."""
    fields = store.entry_fields("w" * 64, store.Kind(8, "log_probs", False), torch.zeros(1))
    winner = entry_with(tmp_path, fields, b"the first process's package")

    fake_compiler(monkeypatch, b"the second process's library")
    assert packages.build(winner, fields, None, (), ()) == winner / store.PACKAGE
    assert (winner / store.PACKAGE).read_bytes() == b"the first process's package"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_a_step_another_process_is_compiling_is_waited_for_and_loaded_not_compiled_again(
        tmp_path, monkeypatch):
    """Two processes that need one step at once (here two threads, each with a lock file of its own, as
    processes have): the second waits for the first one's compile, says so, and loads what it stored.
    The lock goes with the first."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))
    fake_compiler(monkeypatch)
    compiling, done, compiles = threading.Event(), threading.Event(), []

    def compile_(exported, package_path):
        compiles.append(package_path)
        compiling.set()
        assert done.wait(HANG_S)
        with zipfile.ZipFile(package_path, "w") as package:
            package.writestr("step/data/aotinductor/model/step.so", b"a library")

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", compile_)
    loaded = []
    monkeypatch.setattr(packages.Packages, "_load", lambda self, entry, device: loaded.append(entry) or entry)
    kind, inputs = store.Kind(2, "logits", False), (torch.zeros(1), torch.zeros(1))
    model, said, waiting = torch.nn.Linear(2, 2), ([], []), threading.Event()  # one model's weights

    def process(i):
        def notice(message):
            said[i].append(message)
            if "waiting" in message:
                waiting.set()
        steps = packages.Packages(model, lambda *_: kind, lambda inputs: (), notice)
        steps._weights = store.weights_digest(model)  # as another process would: not behind this
        return steps._load_or_build(kind, inputs)  # one's trace (`tracing.gate`), as a thread is

    with fails_if_hung():
        first = threading.Thread(target=process, args=(0,))
        first.start()
        assert compiling.wait(HANG_S)
        second = threading.Thread(target=process, args=(1,))
        second.start()
        assert waiting.wait(HANG_S)  # blocked on the first one's lock
        done.set()
        first.join()
        second.join()
    (entry,) = store.cache_dir().iterdir()  # the entry, and no lock file left
    assert len(compiles) == 1 and loaded == [entry, entry]
    assert "compiling the decoder step for 2 rows, greedy" in said[0][0]
    assert said[1] == ["aiayn: waiting for another process compiling the decoder step for 2 rows, greedy"]


def test_a_step_another_process_is_compiling_is_left_to_it_not_compiled_alongside_too(tmp_path, monkeypatch):
    """The steps a search will need next are compiled alongside (`Packages._compile_ahead`), but not
    one that another process is compiling (it holds the step's lock): a process of ours would only
    wait for it. The probe of the lock neither waits nor leaves a lock file."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(packages.alongside, "workers", lambda: 1)
    submitted = []  # the row counts given to processes of ours
    monkeypatch.setattr(packages.alongside, "submit", lambda _, fields, *__: submitted.append(fields["rows"]))
    model, inputs = torch.nn.Linear(2, 2), (torch.zeros(1), torch.zeros(1))
    later = [store.Kind(rows, "logits", False) for rows in (4, 2)]
    steps = packages.Packages(model, lambda *_: None, lambda inputs: (), lambda message: None,
                              ahead=lambda module, kind, inputs: [(k, lambda: inputs) for k in later])
    steps._weights = store.weights_digest(model)
    fields = store.entry_fields(steps._weights, later[0], inputs[1])
    four = store.cache_dir() / store.entry_name(fields)
    assert not compiling.compiling_elsewhere(four)  # no lock file: nobody compiles it
    with fails_if_hung(), compiling.building(four, fields, lambda message: None):  # "another process"
        assert compiling.compiling_elsewhere(four)
        steps._compile_ahead(store.Kind(8, "logits", False), inputs)
    assert submitted == [2]
    assert not compiling.compiling_elsewhere(four)
    assert list(store.cache_dir().iterdir()) == []  # the lock went with its holder; the probe made none


def test_a_thread_that_does_not_wait_searches_eagerly_until_another_process_has_stored_the_step(
        cache, monkeypatch):
    """`wait_for_compiles(False)` (a server's search threads): a step not in the cache is given to
    another process and the call raises `NotCompiledYet` at once (the search then runs eagerly, the
    same outputs); once that process has stored it, the next search has it loaded aside, and the
    searches after use it."""
    from aiayn.config import DecodeConfig
    from aiayn.decoding.translator import search

    model = one_layer_model()
    eager = [h.tokens for h in greedy_search(model, SRC, LIMITS)]
    monkeypatch.setattr(packages.alongside, "workers", lambda: 1)
    jobs, compiling_now = [], set()  # what the other process is given; the entries it compiles now
    monkeypatch.setattr(packages.alongside, "submit",
                        lambda *job: jobs.append(job) or compiling_now.add(job[0]))
    monkeypatch.setattr(packages.alongside, "has", lambda entry: entry in compiling_now)
    config = DecodeConfig(beam_size=1, compile=True, max_output_extra=5, no_repeat_ngram_size=0)
    packages.wait_for_compiles(False)
    try:
        before = packages.not_waited_for()
        with pytest.raises(packages.NotCompiledYet):
            greedy_search(model, SRC, LIMITS, step=CompiledStep(model))
        assert packages.not_waited_for() == before + 1 and len(jobs) == 1 and cache == []
        eagerly = search(model, SRC, dataclasses.replace(config, compile=False))
        assert [h.tokens for (h,) in search(model, SRC, config)] == [h.tokens for (h,) in eagerly]
        assert len(jobs) == 1 and cache == [] and step_graph.graphs(model) == []  # given out once

        entry, fields, module, inputs, dynamic = jobs[0]  # the other process's work (`build_alone`)
        with torch.no_grad():
            compiling.build(entry, fields, module, inputs, dynamic(inputs))
        compiling_now.clear()
        with pytest.raises(packages.NotCompiledYet):  # stored: loaded on a thread of its own meanwhile
            greedy_search(model, SRC, LIMITS, step=CompiledStep(model))
        with fails_if_hung():
            while not step_graph.graphs(model):
                time.sleep(0.01)
        compiled_now = greedy_search(model, SRC, LIMITS, step=CompiledStep(model))
        assert [h.tokens for h in compiled_now] == eager and len(step_graph.graphs(model)) == 1
        assert packages.not_waited_for() == before + 3 and cache == []  # loaded, compiled by no one here
    finally:
        packages.wait_for_compiles(True)


def test_an_eager_search_beside_compiling_processes_leaves_them_a_core_each(monkeypatch):
    """`alongside.cores_left`: fewer torch threads while processes of ours compile, as many after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        monkeypatch.setattr(packages.alongside, "_running", {Path("a"): None, Path("b"): None})
        with packages.alongside.cores_left():
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 3
        monkeypatch.setattr(packages.alongside, "_running", {})
        with packages.alongside.cores_left():
            assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(threads)


def test_overlapping_eager_searches_beside_compiles_leave_the_process_its_threads(monkeypatch):
    """Two searches in `cores_left` at once, the first leaving first: each runs on the full count
    less the compiles (not on what the other lowered it to), and the last to leave restores it."""
    threads = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        monkeypatch.setattr(packages.alongside, "_running", {Path("a"): None})
        for name, value in (("_entered", 0), ("_threads", None)):  # as they were, should an assertion fail
            monkeypatch.setattr(packages.alongside, name, value)
        first, second = packages.alongside.cores_left(), packages.alongside.cores_left()
        first.__enter__()
        assert torch.get_num_threads() == 3
        second.__enter__()
        assert torch.get_num_threads() == 3  # from the full 4, not from the first's 3
        first.__exit__(None, None, None)
        assert torch.get_num_threads() == 3  # the second still searches beside the compile
        second.__exit__(None, None, None)
        assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(threads)


def test_a_stored_library_untouched_since_is_not_read_again_and_one_replaced_is(tmp_path, monkeypatch):
    """On the CPU an entry keeps the package's library alone; a later check hashes it again only if
    the file is not the one stored (here: replaced by a copy, then by a damaged copy)."""
    fake_compiler(monkeypatch)
    fields = store.entry_fields("w" * 64, store.Kind(8, "log_probs", False), torch.zeros(1))
    path = packages.build(tmp_path / "entry", fields, None, (), ())
    assert path == tmp_path / "entry" / store.LIBRARY and path.read_bytes() == b"a library"
    assert sorted(p.name for p in path.parent.iterdir()) == [store.ENTRY, store.LIBRARY]
    hashed, sha256 = [], store.sha256
    monkeypatch.setattr(store, "sha256", lambda p: hashed.append(p.name) or sha256(p))
    assert store.check(path.parent, fields) is None and hashed == []

    def replaced_by(content):
        path.with_suffix(".new").write_bytes(content)
        path.with_suffix(".new").replace(path)
        hashed.clear()
        return store.check(path.parent, fields)

    assert replaced_by(b"a library") is None and hashed == [store.LIBRARY]
    assert replaced_by(b"a librarz").startswith("damaged") and hashed == [store.LIBRARY]


def test_a_cache_that_cannot_be_written_is_said_and_the_step_still_compiles(tmp_path, monkeypatch, capsys):
    """The step is compiled in a temporary directory, removed once the package is loaded."""
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "file"))
    monkeypatch.setattr(compiled, "FIRST_STEP_ROWS", 0)  # one step compiled, as with `cache`
    made, mkdtemp = [], tempfile.mkdtemp

    def recorded(*args, **kwargs):
        made.append(mkdtemp(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tempfile, "mkdtemp", recorded)
    model = one_layer_model()
    assert outputs(model) == [h.tokens for h in greedy_search(model, SRC, LIMITS)]
    assert "cannot keep the compiled step" in capsys.readouterr().err
    scratch = [path for path in made if "aiayn-step-" in path]
    assert scratch and not any(os.path.exists(path) for path in scratch)


def aiayn(*args):
    return subprocess.run([sys.executable, "-m", "aiayn", *args], capture_output=True, text=True,
                          timeout=HANG_S)


def test_a_second_translate_process_starts_from_the_cache_and_cache_clear_empties_it(
        trained_run, compiled_cache, tmp_path, monkeypatch, capsys):
    """In the compiling tests' cache (the first process compiles, unless an earlier test did: one
    sentence at a time, the whole search of tests/cli's); `aiayn cache` on a copy of it."""
    args = ("translate", str(trained_run), "--compile", "--beam-size", "2", "--batch-size", "1", "a b c",
            "d e f g")
    first, second = aiayn(*args), aiayn(*args)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout == "c b a\ng f e d\n"
    assert "compiling" not in second.stderr

    # Compiled before, so compiled without being asked, unless refused; with an empty cache, not.
    assert "float32 compiled" in load_translator(trained_run).description
    assert "float32 packed" in load_translator(trained_run, compile=False).description \
        or not packing_available(torch.float32)
    with monkeypatch.context() as m:
        m.setenv("AIAYN_CACHE_DIR", str(tmp_path / "empty"))
        assert "compiled" not in load_translator(trained_run).description

    # its stored entries (not one another test worker is building there now, which `cache clear` leaves)
    shutil.copytree(store.cache_dir(), tmp_path / "cache" / "steps", ignore=shutil.ignore_patterns(".*"))
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
    stored = len(store.entries())
    assert main(["cache", "info"]) == 0
    info = capsys.readouterr().out
    assert f": {stored} compiled steps" in info and stored >= 1
    fields = [recorded["fields"] for _, recorded, _ in store.entries()]  # which others: the tests' order
    assert info.count("beam search") == sum(f["traced"] or ".candidates" in f["output"]
                                            or f["output"].startswith(whole.OUTPUT)  # a lone sentence's
                                            for f in fields) >= 1  # traced: constrained ones too
    assert info.count("beam search of beam 2") == sum(f["beams"] == 2 for f in fields) >= 1
    assert info.count("first step") == sum(f["first"] for f in fields) and len(fields) == stored
    assert main(["cache", "clear"]) == 0 and f"removed {stored} compiled steps" in capsys.readouterr().out
    assert main(["cache", "info"]) == 0 and ": 0 compiled steps, 0.0 MB" in capsys.readouterr().out
    assert list((tmp_path / "cache" / "steps").iterdir()) == []


def test_translate_compiles_for_a_long_input_file_unless_refused(
        trained_run, compiled_cache, tmp_path, monkeypatch, capsys):
    """An --input file of LONG_INPUT lines or more repays compiling: the step is compiled without
    --compile (said in one line); --no-compile refuses; a shorter file is not compiled for. (One
    sentence at a time: the whole search of tests/cli's.)"""
    asked = []
    translator_for = cli_translate.translator_for
    monkeypatch.setattr(cli_translate, "translator_for", lambda args: asked.append(args.compile) or
                        translator_for(args))
    monkeypatch.setattr(cli_translate, "LONG_INPUT", 2)
    (tmp_path / "in.txt").write_text("a b c\nd e f g\n")
    (tmp_path / "short.txt").write_text("a b c\n")
    for flags in ([], ["--no-compile"]):
        assert main(["translate", str(trained_run), "--beam-size", "2", "--batch-size", "1", "-i",
                     str(tmp_path / "in.txt"), *flags]) == 0
        out, err = capsys.readouterr()
        assert out == "c b a\ng f e d\n"
        assert ("has 2 lines or more: the decoder step is compiled" in err) == (not flags)
    assert main(["translate", str(trained_run), "--beam-size", "2", "-i", str(tmp_path / "short.txt")]) == 0
    assert "lines or more" not in capsys.readouterr().err
    assert asked == [True, False, None]


@pytest.mark.parametrize("check, problem, lasting", [
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "killed the process with SIGSEGV", True),
    ("import os, signal; os.kill(os.getpid(), signal.SIGABRT)", "killed the process with SIGABRT", True),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "killed the process with SIGKILL", False),
    ("raise OSError('undefined symbol: aoti_foo')", "failed: OSError: undefined symbol: aoti_foo", False),
    ("import sys; assert sys.argv[1:] == ['step.so', 'cpu']", "", True),
])
def test_whether_a_step_loads_is_found_in_a_child_process_which_may_crash(monkeypatch, check, problem,
                                                                         lasting):
    """torch 2.11.0+cu130 on the lent GPU machines crashes any process loading an AOTInductor package
    (a segmentation fault, CPU and CUDA): the child takes the crash and names it. Only a crash lasts;
    an out-of-memory kill (SIGKILL) or an error may not happen again."""
    monkeypatch.setattr(verdict, "_LOAD_CHECK", check)
    found, lasts = verdict._check_loads(Path("step.so"), torch.device("cpu"))
    assert (problem in found and found.startswith("loading it")) if problem else found == ""
    assert lasts == lasting


@pytest.mark.parametrize("problem", ["loading it did not end in 300 s",
                                     "loading it killed the process with SIGKILL"])
def test_a_load_check_that_times_out_or_is_killed_leaves_no_verdict_and_a_later_process_compiles(
        cache, monkeypatch, capsys, problem):
    """A busy machine's time-out or an out-of-memory kill says nothing lasting about torch: this
    process decodes eagerly and says so; the next checks again, and compiles and loads its steps."""
    monkeypatch.setattr(verdict, "_verdicts", {})
    monkeypatch.setattr(verdict, "_said", set())
    check = verdict._check_loads
    monkeypatch.setattr(verdict, "_check_loads", lambda path, device: (problem, False))
    model = one_layer_model()
    eager = [h.tokens for h in greedy_search(model, SRC, LIMITS)]
    with pytest.raises(verdict.Unloadable):
        outputs(model)
    assert f"({problem}): decoding runs eagerly (the next process checks again)" in capsys.readouterr().err
    assert not verdict.verdict_path(torch.device("cpu")).exists()

    monkeypatch.setattr(verdict, "_verdicts", {})  # a later process
    monkeypatch.setattr(verdict, "_check_loads", check)
    assert verdict.known_unloadable(torch.device("cpu")) is None
    assert outputs(model) == eager
    assert verdict.read_verdict(torch.device("cpu")) == ""  # it loads: that is kept


def test_a_crash_verdict_expires(cache, monkeypatch):
    monkeypatch.setattr(verdict, "_verdicts", {})
    path = verdict.verdict_path(torch.device("cpu"))
    path.parent.mkdir(parents=True, exist_ok=True)
    crash = "loading it killed the process with SIGSEGV"
    for days, known in [(1, crash), (verdict.VERDICT_DAYS + 1, None)]:
        checked = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - days * 86400))
        path.write_text(json.dumps({"torch": torch.__version__, "problem": crash, "checked": checked,
                                    "machine": store.machine(torch.device("cpu"))}))
        assert verdict.read_verdict(torch.device("cpu")) == known
    path.write_text(json.dumps({"torch": torch.__version__, "problem": crash}))  # no date: not known
    assert verdict.read_verdict(torch.device("cpu")) is None


def test_where_steps_crash_torch_translation_runs_eagerly_says_so_once_and_remembers(
        cache, monkeypatch, capsys):
    """The first process finds out at its first compiled step (loaded in a child first): it says so,
    translates that batch and the later ones eagerly (the same hypotheses, sampled ones too), and keeps
    the verdict in the cache. A later process reads it: nothing compiled or loaded, `compile=None`
    picks the eager path, `compile=True` says why it is refused. `cache clear` forgets it."""
    from aiayn.config import DecodeConfig
    from aiayn.decoding.translator import search
    from aiayn.translation import prepare

    def build(entry, fields, *args):  # an entry as a compile stores it, of a step never loaded
        entry.mkdir(parents=True)
        (entry / store.LIBRARY).write_bytes(b"a library")
        (entry / store.ENTRY).write_text(json.dumps({"fields": fields, "file": store.LIBRARY,
                                                        "sha256": store.sha256(entry / store.LIBRARY)}))
        cache.append(entry)
        return entry / store.LIBRARY

    checked = []
    monkeypatch.setattr(packages, "build", build)
    monkeypatch.setattr(verdict, "_verdicts", {})
    monkeypatch.setattr(verdict, "_said", set())
    monkeypatch.setattr(verdict, "_check_loads", lambda path, device: checked.append(path) or
                        ("loading it killed the process with SIGSEGV", True))
    model, src = one_layer_model(), random_ids(3, 6, seed=7)
    configs = [DecodeConfig(beam_size=1, temperature=1.0, top_k=5),  # first: it drew before it found out
               DecodeConfig(beam_size=2, nbest=2), DecodeConfig(beam_size=1)]

    def hypotheses(compile, config):
        generator = torch.Generator().manual_seed(3)
        found = search(model, src, dataclasses.replace(config, compile=compile), generator)
        return [[(h.tokens, h.score) for h in hyps] for hyps in found]

    for config in configs:
        assert hypotheses(True, config) == hypotheses(False, config)
    err = capsys.readouterr().err
    assert len(checked) == 1 and len(cache) == 1  # the first compiled step, found out once
    assert err.count("cannot load a compiled decoder step on this machine (loading it killed the process "
                     "with SIGSEGV): decoding runs eagerly") == 1
    kept = json.loads(verdict.verdict_path(torch.device("cpu")).read_text())
    assert kept["problem"].endswith("SIGSEGV") and kept["torch"] == torch.__version__

    monkeypatch.setattr(verdict, "_verdicts", {})  # a later process
    monkeypatch.setattr(verdict, "_said", set())
    monkeypatch.setattr(verdict, "_check_loads", lambda path, device: pytest.fail("checked again"))
    for config in configs:
        assert hypotheses(True, config) == hypotheses(False, config)
    assert len(cache) == 1 and capsys.readouterr().err == ""
    assert prepare(model, torch.device("cpu"), compile=None)[2] is False  # it would use the cache's steps
    assert prepare(model, torch.device("cpu"), compile=True)[2] is False
    assert capsys.readouterr().err.count("cannot load a compiled decoder step") == 1  # said once
    assert main(["cache", "info"]) == 0
    assert f"torch {torch.__version__} on cpu {platform.machine()} cannot load compiled steps (loading it " \
        "killed the process with SIGSEGV; found 20" in capsys.readouterr().out

    assert main(["cache", "clear"]) == 0
    assert not verdict.verdict_path(torch.device("cpu")).exists()
    assert verdict.known_unloadable(torch.device("cpu")) is None


def test_two_threads_compiling_two_steps_into_one_cache_at_once_both_store_and_load_them(cache, monkeypatch):
    """Each build's temporary directory is its own, and a build's cleaning of what killed processes
    left never takes another thread's: the first thread traces only once the second has cleaned the
    cache's leftovers (its own build's directory made); both steps are stored and load (one thread
    of a process traces at a time, `tracing.gate`)."""
    cleaned, clean = threading.Event(), files.clean_leftovers
    calls, gate = [], compiling.gate

    def clean_and_tell(*args):
        removed = clean(*args)
        calls.append(threading.current_thread())
        if len(set(calls)) == 2:
            cleaned.set()
        return removed

    class TracingAfterTheOtherCleaned:
        running = gate.running

        def tracing(self):
            assert cleaned.wait(HANG_S)
            return gate.tracing()

    monkeypatch.setattr(files, "clean_leftovers", clean_and_tell)
    monkeypatch.setattr(compiling, "gate", TracingAfterTheOtherCleaned())
    models = [one_layer_model(), one_layer_model()]
    with torch.no_grad():
        models[1].output_proj.weight.mul_(-1)  # another model: other weights, another step
    eager = [[h.tokens for h in greedy_search(m, SRC, LIMITS)] for m in models]
    found, failed = [None, None], []

    def compile_one(i):
        try:
            found[i] = outputs(models[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            failed.append(e)

    threads = [threading.Thread(target=compile_one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    assert not failed and found == eager
    assert len(store.entries()) == 2 and len(cache) == 2


def while_compiling(compile_, meanwhile) -> list[BaseException]:
    """Run `compile_()` on one thread and `meanwhile()` over and over on another until it is done (once
    at least); what either raised."""
    done, failed, calls = threading.Event(), [], []

    def first():
        try:
            compile_()
        except BaseException as e:  # noqa: BLE001 - returned
            failed.append(e)
        finally:
            done.set()

    def second():
        try:
            while not done.is_set() or not calls:
                calls.append(meanwhile())
        except BaseException as e:  # noqa: BLE001 - returned
            failed.append(e)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(HANG_S)
    return failed


def test_another_thread_waits_for_a_trace_to_run_a_model_or_read_its_weights(cache):
    """While a step is exported, torch replaces `nn.Module.__call__` for the whole process and puts
    fake tensors in the exported model's weights: another thread's search (of another model) waits for
    the trace (`tracing.gate`) instead of being recorded into it, and so does a thread starting a search
    of the model being exported (reading its weights' versions) or asking whether it was compiled
    before (hashing them): each gets what it gets alone."""
    models = [one_layer_model(), one_layer_model()]
    with torch.no_grad():
        models[1].output_proj.weight.mul_(-1)
    eager = [[h.tokens for h in greedy_search(m, SRC, LIMITS)] for m in models]
    versions, compiled_, searched, seen = step_graph.weight_versions(models[0]), [], [], []

    def compile_():
        step = CompiledStep(models[0])
        compiled_.append([h.tokens for h in greedy_search(models[0], SRC, LIMITS, step=step)])

    def meanwhile():
        searched.append([h.tokens for h in greedy_search(models[1], SRC, LIMITS)])
        seen.append(CompiledStep(models[0])._versions)
        step_graph.compiled_before(models[0])

    failed = while_compiling(compile_, meanwhile)
    assert not failed and compiled_ == [eager[0]] and len(cache) == 1
    assert searched and all(tokens == eager[1] for tokens in searched)
    assert seen and all(v == versions for v in seen)


@pytest.mark.parametrize("open_", ["the cache", "a directory above it"])
def test_a_cache_others_may_write_is_refused_once_and_the_steps_compile_privately(cache, monkeypatch, capsys,
                                                                                   open_):
    """A step is a library that aiayn loads: a cache directory that others may write, or below one
    that others may write (they could move it away and put their own in its place), is not used (one
    notice), the step compiles into a private temporary cache, and translation gives the same."""
    monkeypatch.setattr(store, "_private", {})
    root = store.cache_dir()
    root.mkdir(parents=True)
    opened = root if open_ == "the cache" else root.parent
    opened.chmod(0o777)
    model = one_layer_model()
    eager = [h.tokens for h in greedy_search(model, SRC, LIMITS)]
    assert outputs(model) == eager and outputs(model) == eager
    err = capsys.readouterr().err
    problem = f"others may write {opened}" + ("" if opened == root else ", a directory above it")
    assert err.count(f"aiayn: not using the compiled-step cache {root}: {problem} (mode drwxrwxrwx)") == 1
    assert store.entries() == [] and cache and all(entry.parent != root for entry in cache)
    assert main(["cache", "info"]) == 0
    assert f"who may write it: not you alone ({problem} (mode drwxrwxrwx)): aiayn does not " \
        "use it" in capsys.readouterr().out


def test_a_cache_below_a_sticky_directory_of_root_such_as_tmp_is_accepted(tmp_path):
    """Above a root-owned directory with the sticky bit (/tmp: 1777), no one renames another's
    entries, so the directories above it are not looked at; one that is not sticky is."""
    below_tmp = Path(tempfile.mkdtemp(dir="/tmp")) / "cache"
    try:
        assert Path("/tmp").stat().st_mode & 0o1777 == 0o1777 and Path("/tmp").stat().st_uid == 0
        assert store.not_ours_alone(below_tmp, create=True) is None
    finally:
        shutil.rmtree(below_tmp.parent)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert "a directory above it" in store.not_ours_alone(shared / "cache", create=True)


def test_the_cache_and_its_entries_are_made_private_and_an_entry_others_may_write_is_rebuilt(
        cache, monkeypatch, capsys):
    """Made 0700 whatever the umask (a umask of 002 would make them group-writable); an entry that
    another user could have replaced is compiled again, with a notice."""
    old = os.umask(0o002)
    try:
        model = one_layer_model()
        first = outputs(model)
    finally:
        os.umask(old)
    entry = only_entry()
    assert all(path.stat().st_mode & 0o077 == 0 for path in [store.cache_dir(), entry, *entry.iterdir()])
    entry.chmod(0o775)
    assert outputs(model) == first and len(cache) == 2
    assert "is unusable (not this user's alone: others may write" in capsys.readouterr().err


def test_the_private_aotinductor_entry_points_that_library_uses_are_still_there():
    """cache/library.py is the one place aiayn uses torch's private AOTInductor entry points (a CPU
    step's model container: its weights shared between steps). A torch upgrade that removes or renames
    one fails here, by name, rather than deep inside a search."""
    aoti = torch._C._aoti
    container = getattr(aoti, "AOTIModelContainerRunnerCpu", None)
    assert container is not None, "torch._C._aoti.AOTIModelContainerRunnerCpu is gone: see cache/library.py"
    for method in ("run", "extract_constants_map", "get_constant_names_to_original_fqns",
                   "update_constant_buffer", "swap_constant_buffer", "free_inactive_constant_buffer"):
        assert hasattr(container, method), \
            f"AOTIModelContainerRunnerCpu.{method} is gone: see cache/library.py"
    loader = getattr(aoti, "AOTIModelPackageLoader", None)
    assert loader is not None and hasattr(loader, "boxed_run"), \
        "torch._C._aoti.AOTIModelPackageLoader.boxed_run is gone: see cache/library.py"
