"""A run started from a model (`--init-from`): it takes the parent's architecture, tokenizer and
weights, records where they came from, never writes the parent, and resumes like any run."""

import hashlib
import json
import shutil

import pytest
import torch

from aiayn import checkpoint
from aiayn.cli import main

CHILD = ["--train", "synthetic:reverse", "--batch-tokens", "512", "--valid-every", "0", "--bleu-every", "0",
         "--save-every", "0", "--threads", "1"]


def digests(directory):
    """The sha256 of every file below `directory`."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def weights(run):
    return checkpoint.load(checkpoint.resolve(run)).model.state_dict()


def test_a_child_takes_the_parents_tokenizer_and_weights_and_records_them(trained_run, tmp_path, capsys):
    parent = checkpoint.resolve(trained_run)
    before = digests(trained_run)
    child = tmp_path / "child"
    assert main(["train", "--init-from", str(trained_run), *CHILD, "--max-steps", "1", "--lr-scale", "1e-30",
                 "--dropout", "0.3", "--out", str(child)]) == 0
    assert digests(trained_run) == before  # the parent is only read
    ck = checkpoint.load(checkpoint.resolve(child))
    tokenizer = (checkpoint.resolve(child) / "tokenizer.model").read_bytes()
    assert tokenizer == (parent / "tokenizer.model").read_bytes()
    parent_weights = checkpoint.load(parent).model.state_dict()
    assert all(torch.equal(parent_weights[k], v) for k, v in ck.model.state_dict().items())  # lr 1e-30
    assert ck.model.config.dropout == 0.3 and ck.state["step"] == 1  # the run's own training choices
    assert ck.train.init_from == str(parent.resolve())
    assert ck.train.init_sha256 == hashlib.sha256((parent / "model.safetensors").read_bytes()).hexdigest()
    capsys.readouterr()
    assert main(["info", str(child)]) == 0
    shown = capsys.readouterr().out
    assert f"started from: {parent.resolve()} (weights sha256 {ck.train.init_sha256})" in shown


@pytest.mark.parametrize("flags, message", [
    (["--d-model", "128"], "--d-model 128 contradicts the model it starts from"),
    (["--preset", "small"], "contradicts the model it starts from"),
    (["--vocab-size", "999"], "--vocab-size 999 contradicts"),
])
def test_an_option_that_contradicts_the_parent_is_a_one_line_error_and_writes_nothing(
        trained_run, tmp_path, capsys, flags, message):
    out = tmp_path / "child"
    assert main(["train", "--init-from", str(trained_run), *CHILD, *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_child_resumes_exactly_and_may_not_change_its_parent(trained_run, tmp_path, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = ["train", "--init-from", str(trained_run), *CHILD]
    assert main([*common, "--max-steps", "4", "--out", str(straight)]) == 0
    assert main([*common, "--max-steps", "2", "--out", str(resumed)]) == 0
    # the command that started it again (its parent named by the run directory), and the preset it has
    assert main([*common, "--preset", "tiny", "--max-steps", "4", "--out", str(resumed), "--resume"]) == 0
    a, b = weights(straight), weights(resumed)
    assert all(torch.equal(a[k], b[k]) for k in a)  # dropout on: its random state went on too
    other = tmp_path / "other"
    shutil.copytree(trained_run, other)
    capsys.readouterr()
    assert main(["train", "--resume", "--init-from", str(other), "--max-steps", "6",
                 "--out", str(resumed)]) == 2
    assert f"cannot change init_from (the run has {checkpoint.resolve(trained_run).resolve()}" in \
        capsys.readouterr().err


def test_a_marian_parent_and_the_checkpoint_it_came_from_start_at_the_same_validation_loss(trained_run,
                                                                                           tmp_path):
    pytest.importorskip("transformers")
    marian = tmp_path / "marian"
    assert main(["convert", "to-marian", str(trained_run), str(marian)]) == 0
    losses = []
    for i, parent in enumerate((trained_run, marian)):
        out = tmp_path / f"child-{i}"
        assert main(["train", "--init-from", str(parent), *CHILD[:4], "--valid-every", "0",
                     "--bleu-every", "0", "--max-steps", "1", "--src-lang", "en", "--tgt-lang", "de",
                     "--threads", "1", "--out", str(out)]) == 0
        losses.append([r["loss"] for r in records(out) if r["kind"] == "valid" and r["step"] == 0][0])
    assert abs(losses[0] - losses[1]) < 1e-4, losses


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_the_whole_path_from_a_marian_directory_to_an_argos_package(trained_run, tmp_path, capsys):
    """docs/training.md's path: a Marian parent, a fine-tune on mixed corpora that stops at its
    best, scored before and after, exported as an Argos package."""
    pytest.importorskip("transformers")
    marian, child = tmp_path / "marian", tmp_path / "child"
    assert main(["convert", "to-marian", str(trained_run), str(marian)]) == 0
    test = ["--test", "synthetic:reverse:val", "--beam-size", "1"]
    assert main(["evaluate", str(marian), *test]) == 0
    assert main(["train", "--init-from", str(marian), "--train", "synthetic:reverse", "--train",
                 "synthetic:copy", "--train-weights", "3,1", "--valid", "synthetic:reverse:val",
                 "--batch-tokens", "512", "--max-steps", "30", "--valid-every", "10", "--bleu-every", "10",
                 "--bleu-beam", "1", "--patience", "1", "--save-every", "0", "--threads", "1",
                 "--out", str(child)]) == 0
    out = capsys.readouterr().out
    assert "learning rate after --init-from: --warmup-steps 100, --lr-scale 0.16" in out
    assert "mixing 2 corpora" in out
    log = records(child)
    assert [r["step"] for r in log if r["kind"] == "valid"][0] == 0  # the parent's loss: where it starts
    bleu = [r for r in log if r["kind"] == "bleu"]
    best = max(bleu, key=lambda r: r["bleu"])  # the first of equals: a tie is no improvement
    assert checkpoint.load(child / "checkpoints" / "best").step == best["step"]
    assert main(["evaluate", str(child / "checkpoints" / "best"), *test]) == 0
    pytest.importorskip("ctranslate2")
    pytest.importorskip("spacy")
    package = tmp_path / "mine.argosmodel"
    assert main(["export", "argos", str(child / "checkpoints" / "best"), str(package)]) == 0
    assert package.stat().st_size > 0


def test_a_run_that_sets_its_warm_up_or_rate_keeps_its_schedule_whole(trained_run, tmp_path, capsys):
    common = ["train", "--init-from", str(trained_run), *CHILD, "--max-steps", "1"]
    assert main([*common, "--out", str(tmp_path / "tuned")]) == 0
    assert "learning rate after --init-from: --warmup-steps 100, --lr-scale 0.16" in capsys.readouterr().out
    tuned = checkpoint.load(checkpoint.resolve(tmp_path / "tuned")).train
    assert (tuned.warmup_steps, tuned.lr_scale) == (100, 0.16)
    assert main([*common, "--warmup-steps", "50", "--out", str(tmp_path / "own")]) == 0
    assert "learning rate after --init-from" not in capsys.readouterr().out
    own = checkpoint.load(checkpoint.resolve(tmp_path / "own")).train
    assert (own.warmup_steps, own.lr_scale) == (50, 1.0)  # the paper's scale, not half a default
