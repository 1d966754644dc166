"""Problem 1: commands that write a directory deleted whatever was already there."""

import pytest

from aiayn import checkpoint
from aiayn.cli import main


def snapshot(path):
    return sorted((str(p.relative_to(path)), p.stat().st_mtime_ns) for p in path.rglob("*"))


def test_average_never_replaces_the_run_it_averages(trained_run, capsys):
    before = snapshot(trained_run)
    for force in ([], ["--force"]):
        assert main(["average", str(trained_run), "--last", "2", "--out", str(trained_run), *force]) == 2
        err = capsys.readouterr().err
        assert "is a training run directory: write the aiayn checkpoint to a new directory" in err
    assert snapshot(trained_run) == before


@pytest.mark.parametrize("command", [
    ["average", "RUN", "--last", "2", "--out", "OUT"],
    ["convert", "to-marian", "RUN", "OUT"],
    ["export", "ctranslate2", "RUN", "OUT"],
])
def test_writing_into_a_directory_of_other_files_needs_force(trained_run, tmp_path, capsys, command):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    args = [str(trained_run) if a == "RUN" else str(out) if a == "OUT" else a for a in command]
    assert main(args) == 2
    assert "is not empty and holds no" in capsys.readouterr().err
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    assert main([*args, "--force"]) == 0
    assert not (out / "notes.txt").exists()
    assert main(args) == 0  # an earlier output of the same kind is replaced without --force


def test_convert_from_marian_refuses_a_directory_of_other_files(trained_run, tmp_path, capsys):
    marian = tmp_path / "marian"
    assert main(["convert", "to-marian", str(trained_run), str(marian)]) == 0
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["convert", "from-marian", str(marian), str(out)]) == 2
    assert (out / "notes.txt").read_text() == "mine"
    assert main(["convert", "from-marian", str(marian), str(tmp_path / "new")]) == 0
    assert checkpoint.load(tmp_path / "new").model.config.d_model == 64


def test_average_last_must_be_positive(trained_run, tmp_path, capsys):
    """Problem 7: `average --last 0` averaged 5 checkpoints."""
    with pytest.raises(SystemExit) as e:
        main(["average", str(trained_run), "--last", "0", "--out", str(tmp_path / "avg")])
    assert e.value.code == 2 and "argument --last: must be at least 1, not 0" in capsys.readouterr().err
