"""Early stopping in the training loop: a run whose validation loss cannot change (its learning rate
is 1e-30, far below float32's resolution of its weights) has a plateau from its first validation,
so where it stops depends on the patience alone, whatever the machine."""

import json

from aiayn import checkpoint
from aiayn.cli import main
from aiayn.config import DataConfig, TrainConfig
from aiayn.train.loop import train

from .test_distributed import ENV, REPO, command
from .test_loop import new_model

FROZEN = ["--preset", "tiny", "--train", "synthetic:copy", "--batch-tokens", "512", "--lr-scale", "1e-30",
          "--valid-every", "2", "--bleu-every", "0", "--save-every", "0", "--stop-metric", "loss",
          "--max-steps", "1000", "--threads", "1"]


def records(run, kind):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_a_plateau_stops_after_exactly_patience_validations_and_the_best_is_kept(copy_task, tmp_path):
    tokenizer, train_data, valid_data = copy_task
    config = TrainConfig(lr_scale=1e-30, valid_every=2, save_every=0, log_every=0, max_steps=1000,
                         patience=3, stop_metric="loss", keep_checkpoints=1)
    data = DataConfig(batch_tokens=512)
    state = train(new_model(tokenizer), tokenizer, train_data, valid_data, data, config, tmp_path)
    assert state["step"] == 8  # validations at 2 (the best), 4, 6, 8
    assert state["early_stop"].startswith("--patience 3: validation loss has not improved for 3 validations")
    assert [r["step"] for r in records(tmp_path, "valid")] == [2, 4, 6, 8]
    assert records(tmp_path, "stop") == [{"kind": "stop", "step": 8, "reason": state["early_stop"]}]
    best = checkpoint.load(tmp_path / "checkpoints" / "best")
    assert best.step == 2 and checkpoint.resolve(tmp_path).name == "step_00000008"


def test_a_run_that_stopped_early_resumes_only_with_more_patience(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *FROZEN, "--patience", "2", "--out", str(run)]) == 0
    assert checkpoint.resolve(run).name == "step_00000006"
    capsys.readouterr()
    assert main(["train", "--resume", "--out", str(run)]) == 2
    err = capsys.readouterr().err
    assert "stopped early at step 6 (--patience 2: validation loss has not improved" in err
    assert "raise --patience" in err and len(err.strip().splitlines()) == 1
    assert main(["train", "--resume", "--patience", "4", "--out", str(run)]) == 0
    assert checkpoint.resolve(run).name == "step_00000010"  # 8 and 10: four validations without improvement
    assert [r["step"] for r in records(run, "stop")] == [6, 10]


def test_two_processes_under_torchrun_stop_at_the_same_update(tmp_path):
    import subprocess

    from tests.conftest import HANG_S

    run = tmp_path / "run"
    data = str(tmp_path / "data")  # under torchrun the ranks share a prepared vocabulary
    assert main(["prepare", "--train", "synthetic:copy", "--vocab-size", "512", "--out", data]) == 0
    args = [a for a in FROZEN if a not in ("--train", "synthetic:copy")]
    done = subprocess.run(command(2, *args, "--data", data, "--patience", "2", "--out", str(run)),
                          capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    assert checkpoint.resolve(run).name == "step_00000006"
    assert "stopped early at step 6" in done.stdout + done.stderr
