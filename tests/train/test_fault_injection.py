"""A training run killed with SIGKILL at a random moment, then resumed, ends with the weights of a
run that was never interrupted: a run from scratch, one started from a model (`--init-from`), and one
with BPE-dropout and a moving average of the weights (which must end the same too)."""

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from aiayn import checkpoint
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[2]
RUN = ["--preset", "tiny", "--train", "synthetic:reverse", "--batch-tokens", "512", "--warmup-steps", "20",
       "--max-steps", "40", "--save-every", "4", "--valid-every", "8", "--log-every", "1", "--threads", "2"]


def train(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "aiayn", "train", *RUN, *args], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen) -> None:
    _, err = process.communicate(timeout=HANG_S)  # only a hang reaches this limit
    assert process.returncode == 0, err


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("start", ["scratch", "init-from", "regularized"])
def test_a_run_killed_at_a_random_moment_resumes_to_the_weights_of_an_uninterrupted_run(tmp_path, start,
                                                                                      request):
    parent = ["--init-from", str(request.getfixturevalue("trained_run"))] if start == "init-from" else []
    if start == "regularized":
        parent = ["--bpe-dropout", "0.2", "--ema-decay", "0.9"]
    straight = train(*parent, "--out", str(tmp_path / "straight"))
    finish(straight)

    rng = random.Random()  # a new moment every time; any moment must give the same weights
    run = tmp_path / "killed"
    process = train(*parent, "--out", str(run))
    wait_for = rng.randint(1, 39)  # metrics lines: the kill lands somewhere in the first 40 updates
    deadline = time.monotonic() + HANG_S
    while process.poll() is None and lines(run / "metrics.jsonl") < wait_for and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(rng.uniform(0, 0.3))
    process.send_signal(signal.SIGKILL)
    process.wait()
    print(f"killed after {lines(run / 'metrics.jsonl')} metrics lines")

    if not checkpoint.step_checkpoints(run):  # killed before the first checkpoint: start again
        finish(train(*parent, "--out", str(run)))
    elif checkpoint.load_latest(run, report=print).step < 40:
        finish(subprocess.Popen([sys.executable, "-m", "aiayn", "train", "--out", str(run), "--resume"],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))

    a = checkpoint.load(checkpoint.resolve(tmp_path / "straight")).model.state_dict()
    b = checkpoint.load(checkpoint.resolve(run)).model.state_dict()
    assert checkpoint.resolve(run).name == "step_00000040"
    assert all(torch.equal(a[k], b[k]) for k in a)
    if start == "regularized":
        a, b = (checkpoint.load(checkpoint.resolve(r), ema=True).model.state_dict()
                for r in (tmp_path / "straight", run))
        assert all(torch.equal(a[k], b[k]) for k in a)
