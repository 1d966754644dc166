"""`aiayn train --train A --train B --train-weights 3,1`: a run on several corpora reports the mix,
records it, resumes exactly, and refuses weights that do not fit, writing nothing."""

import pytest
import torch

from aiayn import checkpoint
from aiayn.cli import main

TINY = ["--preset", "tiny", "--batch-tokens", "512", "--warmup-steps", "20", "--valid-every", "0",
        "--save-every", "4", "--threads", "1"]
# 500 pairs each: an epoch of 1,000 pairs is about 40 updates of 512 tokens
MIXED = ["--train", "synthetic:reverse:val", "--train", "synthetic:copy:val", "--train-weights", "3,1",
         "--valid", "synthetic:reverse:val"]


def test_a_mixed_run_reports_and_records_its_mix_and_resumes_exactly(tmp_path, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["train", *TINY, *MIXED, "--max-steps", "100", "--out", str(straight)]) == 0
    out = capsys.readouterr().out
    assert "mixing 2 corpora: 1,000 pairs an epoch" in out
    assert "synthetic:reverse:val: 500 pairs, 75.0% of each epoch" in out and "25.0% of each epoch" in out
    ck = checkpoint.load(checkpoint.resolve(straight))
    assert ck.data.train == ("synthetic:reverse:val", "synthetic:copy:val")
    assert ck.data.train_weights == (3.0, 1.0) and ck.state["position"]["epoch"] >= 2

    assert main(["train", *TINY, *MIXED, "--max-steps", "52", "--out", str(resumed)]) == 0
    assert main(["train", "--out", str(resumed), "--resume", "--max-steps", "100"]) == 0
    a = checkpoint.load(checkpoint.resolve(straight)).model.state_dict()
    b = checkpoint.load(checkpoint.resolve(resumed)).model.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_recipe_file_lists_the_corpora_and_their_weights(tmp_path):
    recipe = tmp_path / "mix.toml"
    recipe.write_text('preset = "tiny"\n[data]\ntrain = ["synthetic:reverse", "synthetic:copy"]\n'
                      "train_weights = [1, 1]\nbatch_tokens = 512\n[train]\nmax_steps = 1\nvalid_every = 0\n")
    assert main(["train", "--config", str(recipe), "--out", str(tmp_path / "run")]) == 0
    data = checkpoint.load(checkpoint.resolve(tmp_path / "run")).data
    assert data.train == ("synthetic:reverse", "synthetic:copy") and data.train_weights == (1.0, 1.0)
    # --train replaces the file's list, and the file's weights with it
    assert main(["train", "--config", str(recipe), "--train", "synthetic:copy",
                 "--out", str(tmp_path / "b")]) == 0
    data = checkpoint.load(checkpoint.resolve(tmp_path / "b")).data
    assert data.train == ("synthetic:copy",) and data.train_weights == ()


@pytest.mark.parametrize("weights, message", [
    ("1,2,3", "train_weights=1,2,3 gives 3 weight(s) for 2 --train corpora"),
    ("0,1", "train_weights=0.0 must be greater than 0"),
    ("3;1", "--train-weights: '3;1' is not numbers joined by commas (3,1)"),
])
def test_weights_that_do_not_fit_are_a_one_line_error_and_write_nothing(tmp_path, capsys, weights, message):
    out = tmp_path / "run"
    flags = [*TINY, "--train", "synthetic:reverse", "--train", "synthetic:copy", "--train-weights", weights]
    try:
        code = main(["train", *flags, "--out", str(out)])
    except SystemExit as e:  # argparse's own errors exit
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and sum("error" in line for line in err.splitlines()) == 1, err
    assert not out.exists()


def test_weights_and_a_sampling_temperature_together_are_a_one_line_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["train", *TINY, *MIXED, "--sampling-temperature", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "train_weights and sampling_temperature=5 both say how to sample the corpora" in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
