"""Data-parallel training (train/distributed.py): 2 processes under torchrun on the CPU (gloo) make
the same updates as one process accumulating the same batches, resume exactly, and end cleanly when
a rank dies."""

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn import checkpoint
from aiayn.config import PRESETS, DataConfig, TrainConfig
from aiayn.data import prepared
from aiayn.data.binarized import MappedCorpus
from aiayn.train.distributed import Ranks, share
from aiayn.train.order import Position, updates
from tests.conftest import HANG_S

REPO = Path(__file__).resolve().parents[2]
# Batches of up to 256 tokens, updates of at least 600 target tokens: 3 to 5 batches each, so the
# two ranks often get unequal shares and one of them a filler.
OPTIONS = ["--preset", "tiny", "--batch-tokens", "256", "--update-tokens", "600", "--warmup-steps", "4",
           "--valid-every", "0", "--bleu-every", "0", "--log-every", "1", "--threads", "1"]
# No dropout, so the ranks' random streams do not matter; and Adam's epsilon raised from 1e-9: some
# gradients are mathematically zero (the key bias's: softmax ignores a constant added to every key)
# and only rounding noise, which Adam with a tiny epsilon turns into full-size steps of either sign.
# Sums in another order differ by float rounding, which Adam's normalised steps carry into the
# weights: with ATen's plain C++ kernels up to 2.3% of one update (7e-4 against 3e-2), 1e-7 with its
# vectorised ones. A wrong batch or a wrong average moves them by the size of an update.
TOLERANCE = 0.1  # of the last update's largest change, tensor by tensor
KEEP_LAST_TWO = ["--save-every", "1", "--keep-checkpoints", "2"]
KEEP_EVERY = ["--save-every", "1", "--keep-checkpoints", "6"]
NO_DROPOUT = ["--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0", "--adam-eps", "1e-4"]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("ddp") / "data"
    tokenizer, _ = prepared.learn_tokenizer("synthetic:reverse", "en", "de", PRESETS["tiny"]["vocab_size"], 1,
                                            2_000_000)
    prepared.prepare(out, "synthetic:reverse", "", "en", "de", tokenizer, 256)
    return out


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def torchrun(processes: int) -> list[str]:
    """The launcher of `processes` processes on this machine; the program follows."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)]


def command(processes: int, *args: str) -> list[str]:
    """`aiayn train ARGS` in one process, or under torchrun in `processes` processes."""
    launcher = [sys.executable, "-m", "aiayn"] if processes == 1 else [*torchrun(processes), "-m", "aiayn"]
    return [*launcher, "train", *args]


def train(processes: int, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run(command(processes, *args), capture_output=True, text=True, timeout=HANG_S,
                            cwd=REPO, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def weights(run: Path) -> dict[str, torch.Tensor]:
    return checkpoint.load_latest(run).model.state_dict()


def assert_close(a: dict, b: dict, atol: float) -> None:
    for name, x in a.items():
        assert torch.allclose(x, b[name], atol=atol, rtol=0), (name, (x - b[name]).abs().max())


def assert_same_updates(run: Path, other: Path) -> None:
    """The weights of `other` differ from `run`'s by a small part of `run`'s last update."""
    last = weights(run)
    before = checkpoint.load(checkpoint.step_checkpoints(run)[-2]).model.state_dict()
    for name, x in weights(other).items():
        difference, update = (x - last[name]).abs().max(), (last[name] - before[name]).abs().max()
        assert difference <= TOLERANCE * update, (name, difference, update)


def test_each_rank_takes_every_other_batch_and_a_filler_evens_the_shares():
    assert share([10, 11, 12], Ranks(0, 2)) == [(10, True), (12, True)]
    assert share([10, 11, 12], Ranks(1, 2)) == [(11, True), (10, False)]
    assert share([10], Ranks(2, 4)) == [(10, False)]
    assert share([10, 11], Ranks(0, 1)) == [(10, True), (11, True)]


def first_updates(n: int, lengths, batch_tokens: int, update_tokens: int, min_batches: int = 1) -> list:
    """The first `n` updates as (position, [batch indices as lists], tokens)."""
    stream = updates(lengths, DataConfig(batch_tokens=batch_tokens), TrainConfig(update_tokens=update_tokens),
                     Position(), min_batches)
    return [(p, [b.tolist() for b in g], t) for p, g, t in itertools.islice(stream, n)]


def test_updates_hold_at_least_one_batch_per_rank_and_otherwise_do_not_depend_on_the_ranks():
    lengths = np.full(100, 10), np.full(100, 10)  # batches of 4 pairs of 10 target tokens
    assert [len(g) for _, g, _ in first_updates(5, lengths, 40, 0)] == [1] * 5
    assert [len(g) for _, g, _ in first_updates(5, lengths, 40, 0, min_batches=4)] == [4] * 5
    assert first_updates(5, lengths, 40, 130) == first_updates(5, lengths, 40, 130, min_batches=2)


# Two ranks call all_sum and gather 300 times, recording (by weak reference) every tensor handed to
# gloo; each call must return only once gloo has let go of them. A gloo worker thread frees a
# finished call's tensors a moment after the call returns (plain dist.all_reduce: 10-20% of calls
# here); when that was a rank's last call, the rank aborted at exit ("terminate called without an
# active exception").
LET_GO = """
import weakref
import torch, torch.distributed as dist
from aiayn.train import distributed
dist.init_process_group("gloo")
ranks = distributed.Ranks(dist.get_rank(), dist.get_world_size())
given = []
def recording(call):
    def record(*args, **kwargs):
        for arg in args:
            given.extend(weakref.ref(t) for t in (arg if isinstance(arg, list) else [arg]))
        return call(*args, **kwargs)
    return record
dist.all_reduce, dist.all_gather = recording(dist.all_reduce), recording(dist.all_gather)
held = calls = 0
def count():  # right after a call
    global held, calls
    held += sum(ref() is not None for ref in given)
    calls += len(given)
    given.clear()
for i in range(300):
    sums = distributed.all_sum([i, 0.5], ranks)
    count()
    assert sums == [2 * i, 1.0]
    value = {"rank": ranks.rank, "i": i, "state": torch.arange(i + 1)}
    values = distributed.gather(value, ranks)
    count()
    assert [v["rank"] for v in values] == [0, 1]
    assert all(torch.equal(v["state"], value["state"]) for v in values)
print(f"rank {ranks.rank}: {held} of {calls} tensors held after the call")
dist.destroy_process_group()
"""


def test_collective_calls_return_once_gloo_has_let_go_of_their_tensors(tmp_path):
    script = tmp_path / "let_go.py"
    script.write_text(LET_GO)
    result = subprocess.run([*torchrun(2), str(script)], capture_output=True, text=True, timeout=HANG_S,
                            cwd=REPO, env=ENV)
    assert result.returncode == 0, result.stderr[-3000:]
    for rank in (0, 1):
        assert f"rank {rank}: 0 of " in result.stdout, result.stdout


def test_two_ranks_make_the_updates_of_one_process_accumulating_the_same_batches(tmp_path, data_dir):
    args = ["--data", str(data_dir), *OPTIONS, *NO_DROPOUT, "--max-steps", "6"]
    groups = [g for _, g, _ in first_updates(6, MappedCorpus(data_dir / "train", 256).lengths(), 256, 600)]
    assert any(len(g) % 2 for g in groups)  # so a filler is exercised
    train(1, *args, *KEEP_LAST_TWO, "--out", str(tmp_path / "one"))
    result = train(2, *args, "--out", str(tmp_path / "two"))
    assert_same_updates(tmp_path / "one", tmp_path / "two")
    assert result.stdout.count("saved ") == 1  # rank 0 speaks for both
    assert "2 processes (torchrun)" in result.stdout


def stopped_at(run: Path, step: int, copy: Path) -> Path:
    """`run` as it stood after update `step`, as a run killed then leaves it: a copy without the
    later checkpoints (a resumed run drops the metrics of the updates it replays)."""
    shutil.copytree(run, copy)
    for path in checkpoint.step_checkpoints(copy):
        if path.name > checkpoint.step_path(copy, step).name:  # step_00000004 > step_00000003
            shutil.rmtree(path)
    return copy


def test_a_two_rank_run_resumes_exactly_also_with_another_number_of_ranks(tmp_path, data_dir):
    args = ["--data", str(data_dir), *OPTIONS, *KEEP_EVERY, "--max-steps", "6"]
    train(2, *args, "--out", str(tmp_path / "straight"))
    train(2, "--resume", "--out", str(stopped_at(tmp_path / "straight", 3, tmp_path / "stopped")))
    assert_close(weights(tmp_path / "straight"), weights(tmp_path / "stopped"), atol=0)
    # Without dropout, one process resuming a 2-rank run continues the same updates.
    args = [*args, *NO_DROPOUT]
    train(2, *args, "--out", str(tmp_path / "two"))
    train(1, "--resume", "--out", str(stopped_at(tmp_path / "two", 3, tmp_path / "two-then-one")))
    assert_same_updates(tmp_path / "two", tmp_path / "two-then-one")


def rank_pid(launcher: subprocess.Popen, rank: int) -> int | None:
    """The process id of torchrun's worker of `rank`, found by its environment (Linux)."""
    for child in Path(f"/proc/{launcher.pid}/task/{launcher.pid}/children").read_text().split():
        try:
            environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in environ:
            return int(child)
    return None


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="finds the worker through /proc")
def test_a_killed_rank_ends_the_run_and_the_last_checkpoint_loads(tmp_path, data_dir):
    run = tmp_path / "run"
    args = ["--data", str(data_dir), *OPTIONS, "--max-steps", "99999", "--save-every", "2", "--out", str(run)]
    launcher = subprocess.Popen(command(2, *args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=ENV)
    try:
        deadline = time.monotonic() + HANG_S
        while not checkpoint.step_checkpoints(run):
            assert launcher.poll() is None, launcher.stderr.read()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint"
            time.sleep(0.1)
        os.kill(rank_pid(launcher, 1), signal.SIGKILL)
        _, stderr = launcher.communicate(timeout=HANG_S)
    finally:
        launcher.kill()
    assert launcher.returncode != 0
    said = "error: rank 0: another rank of this run is gone ("
    assert said in stderr, stderr[-3000:]
    assert "local_rank: 1" in stderr  # torchrun names the rank that died
    ck = checkpoint.load_latest(run)
    assert ck.step >= 2 and ck.step % 2 == 0
