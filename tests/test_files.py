import errno
import os
import subprocess
import sys

import pytest

from aiayn import files
from aiayn.files import OutputError


def is_report(path):
    return (path / "report.txt").exists()


def write_report(path, text, force=False):
    with files.replacing(path, "report", is_report, force) as tmp:
        (tmp / "report.txt").write_text(text)


def dead_pid() -> int:
    """The pid of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_new_output_replaces_an_older_one_of_the_same_kind(tmp_path):
    write_report(tmp_path / "out", "one")
    write_report(tmp_path / "out", "two")
    assert (tmp_path / "out" / "report.txt").read_text() == "two"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no temporary directory left


def test_a_directory_holding_something_else_is_refused_unless_forced(tmp_path):
    """Problem 1: an existing output directory and everything in it was deleted."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(OutputError, match="is not empty and holds no report: .* --force"):
        write_report(out, "x")
    assert (out / "thesis.tex").read_text() == "years of work"
    write_report(out, "x", force=True)
    assert sorted(p.name for p in out.iterdir()) == ["report.txt"]


def test_a_training_run_directory_is_never_replaced_even_when_forced(tmp_path):
    """Problem 1: `aiayn average RUN --out RUN` replaced the whole run with the average."""
    run = tmp_path / "run"
    (run / "checkpoints" / "step_00000010").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("{}\n")
    for force in (False, True):
        with pytest.raises(OutputError, match="is a training run directory"):
            write_report(run, "x", force=force)
    assert (run / "checkpoints" / "step_00000010").is_dir() and (run / "metrics.jsonl").exists()


def test_a_full_disk_is_said_as_such_and_leaves_the_older_output_intact(tmp_path):
    """Problem 6: on a full disk the message never said so, and half-written directories stayed."""
    write_report(tmp_path / "out", "old")
    with pytest.raises(OutputError, match="no space left on device .* the report already at .* is intact"):
        with files.replacing(tmp_path / "out", "report", is_report) as tmp:
            (tmp / "report.txt").write_text("half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert (tmp_path / "out" / "report.txt").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_full_disk_is_recognised_in_other_libraries_messages():
    assert files.is_disk_full(OSError(errno.ENOSPC, "x"))
    assert files.is_disk_full(RuntimeError("I/O error: No space left on device (os error 28)"))
    wrapped = RuntimeError("file write failed")
    wrapped.__cause__ = OSError(errno.EDQUOT, "quota")
    assert files.is_disk_full(wrapped)
    assert not files.is_disk_full(ValueError("bad value"))


def test_leftovers_of_a_killed_process_are_cleaned_up_and_a_moved_output_put_back(tmp_path):
    """Problem 6: `.NAME.tmp-PID` directories after kill -9 were never cleaned up."""
    pid = dead_pid()
    (tmp_path / f".out.tmp-{pid}").mkdir()  # killed while writing
    (tmp_path / f".other.old-{pid}").mkdir()  # killed between moving `other` aside and the new one in
    (tmp_path / f".other.old-{pid}" / "report.txt").write_text("kept")
    (tmp_path / f".busy.tmp-{os.getppid()}").mkdir()  # a live process's: not touched
    removed = files.clean_leftovers(tmp_path, lambda name: True)
    assert [p.name for p in removed] == [f".out.tmp-{pid}"]
    assert (tmp_path / "other" / "report.txt").read_text() == "kept"
    assert (tmp_path / f".busy.tmp-{os.getppid()}").exists()


def test_check_writable_fails_before_any_work(tmp_path):
    files.check_writable(tmp_path / "new.txt")
    with pytest.raises(OutputError, match="no such directory"):
        files.check_writable(tmp_path / "missing" / "out.txt")
    with pytest.raises(OutputError, match="is a directory"):
        files.check_writable(tmp_path)


def test_a_temporary_sibling_in_use_by_this_process_is_no_leftover_and_each_is_its_own(tmp_path):
    """Threads of one process writing beside the same place get names of their own, and cleaning
    leftovers (what killed processes left, or an earlier process of this pid) never takes one in use."""
    out = tmp_path / "out"
    with files.sibling(out) as first, files.sibling(out) as second:
        first.mkdir()
        second.mkdir()
        earlier = tmp_path / f".out.tmp-{os.getpid()}"  # an earlier process of this pid, killed
        earlier.mkdir()
        assert files.clean_leftovers(tmp_path, lambda name: True) == [earlier]
        assert first != second and first.exists() and second.exists()
    assert sorted(files.clean_leftovers(tmp_path, lambda name: True)) == sorted([first, second])
