import subprocess
import sys

import pytest

from aiayn import checkpoint
from aiayn.cli import main


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "aiayn", "--help"], capture_output=True, text=True,
                         check=True)
    for command in ("info", "prepare", "train", "translate"):
        assert command in out.stdout


def test_info_prints_parameter_counts_per_part(capsys):
    assert main(["info", "--preset", "small", "--vocab-size", "8000"]) == 0
    out = capsys.readouterr().out
    assert "d_model              256" in out
    for part, count in (("source embedding", "2,048,000"), ("encoder", "2,369,280"),
                        ("decoder", "3,160,320"), ("total", "7,577,600")):
        assert part in out and count in out
    assert "tied to target embedding" in out


def test_every_train_option_has_help():
    from aiayn.cli import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    for action in train._actions:
        assert action.help, action.dest


def test_unknown_option_is_an_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", "x", "--d-modle", "4"])
    assert e.value.code == 2
    assert "unrecognized arguments: --d-modle" in capsys.readouterr().err


def test_train_translate_resume_and_their_errors(tmp_path, capsys):
    run = tmp_path / "run"
    common = ["--train", "synthetic:reverse", "--batch-tokens", "512", "--warmup-steps", "20",
              "--valid-every", "5", "--save-every", "5", "--log-every", "5"]
    assert main(["train", "--preset", "tiny", "--out", str(run), "--max-steps", "5", *common]) == 0
    out = capsys.readouterr().out
    assert "20,000 of 20,000 pairs kept" in out and "padding" in out and "step 5 | valid loss" in out
    assert main(["train", "--preset", "tiny", "--out", str(run), *common]) == 2
    assert "already holds checkpoints" in capsys.readouterr().err
    assert main(["train", "--out", str(run), "--resume", "--d-model", "32"]) == 2
    assert "cannot change d_model" in capsys.readouterr().err
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "10"]) == 0
    assert checkpoint.resolve(run).name == "step_00000010"
    assert (run / "metrics.jsonl").read_text().count('"kind": "valid"') == 2

    capsys.readouterr()
    assert main(["translate", str(run), "a b c", "", "d e"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # three outputs, the empty one empty


def test_missing_data_file_is_reported_without_a_traceback(tmp_path, capsys):
    missing = str(tmp_path / "none")
    code = main(["train", "--preset", "tiny", "--out", str(tmp_path / "r"), "--train", missing])
    assert code == 2
    assert "none.en: no such file" in capsys.readouterr().err
