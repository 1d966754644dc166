import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aiayn import checkpoint
from aiayn.cli import main
from aiayn.tokenizer import Tokenizer
from tests.conftest import HANG_S, TRAINED_STEPS

TINY = ["--preset", "tiny", "--batch-tokens", "512", "--warmup-steps", "20", "--log-every", "1"]
REPO = Path(__file__).resolve().parents[2]


def aiayn(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    """`python -m aiayn ARGS` in a new process. The timeout only catches a hang: every call here
    finishes in seconds when nothing is wrong."""
    try:
        return subprocess.run([sys.executable, "-m", "aiayn", *args], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"aiayn {' '.join(args)} hung")


def wait_for(condition, process: subprocess.Popen, limit: float = HANG_S) -> None:
    """Poll until `condition()` holds; fail if the process ends first (or after `limit` seconds)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def records(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def blank_data(tmp_path_factory):
    """(tokenizer directory, prefix of parallel files whose lines are all blank)."""
    root = tmp_path_factory.mktemp("blank")
    assert main(["prepare", "--train", "synthetic:reverse", "--vocab-size", "300", "--out",
                 str(root / "tok")]) == 0
    for lang in ("en", "de"):
        (root / f"blank.{lang}").write_text("\n  \n\n")
    return root / "tok", root / "blank"


def test_no_surviving_training_pair_is_an_error_before_training_not_a_hang(blank_data, tmp_path):
    """Problem 4: with no training pair left, the batch loop spun forever and ignored SIGTERM."""
    tokenizer, blank = blank_data
    result = aiayn("train", *TINY, "--train", str(blank), "--tokenizer", str(tokenizer), "--out",
                   str(tmp_path / "a"))
    assert result.returncode == 2
    assert "error: no training pair left: " in result.stderr and "0 of 3 pairs kept" in result.stderr
    result = aiayn("train", *TINY, "--train", "synthetic:reverse", "--max-len", "0",
                   "--out", str(tmp_path / "b"))
    assert result.returncode == 2 and "max_len=0 must be at least 1" in result.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_training_after_saving_and_the_exit_status_says_so(tmp_path, sig, code):
    """Problems 4 and 9: SIGTERM could be ignored, and an interrupted run exited 0."""
    run = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-m", "aiayn", "train", *TINY, "--train", "synthetic:reverse",
                                "--max-steps", "100000", "--save-every", "0", "--valid-every", "0",
                                "--out", str(run)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    wait_for(lambda: (run / "metrics.jsonl").exists(), process)
    process.send_signal(sig)
    _, err = process.communicate(timeout=HANG_S)
    assert process.returncode == code, err
    assert f"stopped by {sig.name}; continue with: aiayn train --out {run} --resume" in err
    step = checkpoint.load(checkpoint.resolve(run)).step
    assert step >= 1 and records(run)[-1]["step"] == step


def test_resume_at_a_reached_limit_says_so_instead_of_doing_nothing(trained_run, capsys):
    """Problem 9: `train --resume` at a reached limit did nothing, said nothing and exited 0."""
    assert main(["train", "--out", str(trained_run), "--resume"]) == 2
    err = capsys.readouterr().err
    n = TRAINED_STEPS
    assert f"has already reached --max-steps {n} (step {n}): nothing to resume; raise --max-steps" in err


def test_resume_without_a_training_state_is_an_error_naming_the_file(tmp_path, capsys):
    """Problem 3: a checkpoint without training_state.pt resumed at step 0 and overwrote the checkpoints."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", "synthetic:reverse", "--max-steps", "4", "--out", str(run)]) == 0
    only = checkpoint.resolve(run)
    (only / "training_state.pt").unlink()
    capsys.readouterr()
    before = {p.name: p.stat().st_mtime_ns for p in only.iterdir()}
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "8"]) == 2
    err = capsys.readouterr().err
    assert f"{only / 'training_state.pt'}: missing" in err and len(err.strip().splitlines()) == 1
    assert {p.name: p.stat().st_mtime_ns for p in only.iterdir()} == before
    assert checkpoint.step_checkpoints(run) == [only]


def test_resume_skips_a_damaged_checkpoint_and_replays_without_duplicate_metrics(tmp_path, capsys):
    """Problems 6 and 9: resume did not fall back past a damaged checkpoint, and metrics.jsonl got
    duplicate records for the updates a resumed run replays."""
    run = tmp_path / "run"
    options = [*TINY, "--train", "synthetic:reverse", "--save-every", "5", "--valid-every", "5",
               "--out", str(run)]
    assert main(["train", *options, "--max-steps", "10"]) == 0
    newest = checkpoint.step_path(run, 10)
    (newest / "model.safetensors").write_bytes(b"cut")
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "12"]) == 0
    out = capsys.readouterr().out
    assert "skipping step_00000010: " in out and "resuming" in out and "at step 5 from step_00000005" in out
    steps = [r["step"] for r in records(run) if r["kind"] == "train"]
    assert steps == list(range(1, 13))
    assert checkpoint.load(checkpoint.step_path(run, 10)).step == 10  # written again, whole


def test_without_a_preset_a_cpu_trains_small_and_says_so(tmp_path, capsys):
    """Problem 9: `aiayn train` without --preset built the base model on a CPU."""
    run = tmp_path / "run"
    assert main(["train", "--train", "synthetic:reverse", "--device", "cpu", "--max-steps", "1",
                 "--batch-tokens", "256", "--vocab-size", "300", "--out", str(run)]) == 0
    assert "preset: small (none given" in capsys.readouterr().out
    assert checkpoint.load(checkpoint.resolve(run)).model.config.d_model == 256


def test_own_data_without_a_validation_set_is_said(tmp_path, capsys):
    """Problem 9: own data without --valid got no validation, and nothing said so."""
    for lang, text in (("en", "a b c\nd e\n"), ("de", "c b a\ne d\n")):
        (tmp_path / f"mine.{lang}").write_text(text * 20)
    assert main(["train", *TINY, "--train", str(tmp_path / "mine"), "--vocab-size", "300", "--max-steps", "1",
                 "--out", str(tmp_path / "run")]) == 0
    assert "no validation set: give --valid SPEC" in capsys.readouterr().out


def test_a_fresh_run_refuses_a_directory_holding_other_things(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("mine")
    args = ["train", *TINY, "--train", "synthetic:reverse", "--max-steps", "2", "--out", str(tmp_path)]
    assert main(args) == 2
    assert "is not empty and is not a training run" in capsys.readouterr().err
    assert (tmp_path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("options, message", [
    (["--lr-scale", "-1"], "lr_scale=-1.0 must be greater than 0"),
    (["--batch-tokens", "0"], "batch_tokens=0 must be at least 1"),
    (["--n-encoder-layers", "-2"], "n_encoder_layers=-2 must be at least 1"),
    (["--label-smoothing", "1.5"], "label_smoothing=1.5 must be in [0, 1)"),
    (["--clip-norm", "-1"], "clip_norm=-1.0 must be at least 0"),
    (["--keep-checkpoints", "0"], "keep_checkpoints=0 must be at least 1"),
    (["--max-steps", "-3"], "max_steps=-3 must be at least 0"),
    (["--n-heads", "0"], "n_heads=0 must be at least 1"),
    (["--warmup-steps", "0"], "warmup_steps=0 must be at least 1"),
    (["--adam-beta2", "1.5"], "adam_beta2=1.5 must be in [0, 1)"),
    (["--threads", "-1"], "threads=-1 must be at least 0"),
    (["--device", "gpu9"], "device='gpu9' is not one of auto, cpu, cuda, cuda:N, mps"),
    (["--vocab-size", "1"], "vocab_size=1 must be at least 5"),
    (["--vocab-size", "100"], "vocab_size=100 is too small"),
    (["--bleu-beam", "0"], "bleu_beam=0 must be at least 1"),
    (["--positional", "learned", "--max-positions", "64", "--max-len", "100"],
     "max_positions=64 learned positions cannot hold training sequences of max_len=100"),
])
def test_bad_training_values_are_one_line_errors_before_training(tmp_path, capsys, options, message):
    """Problem 7: bad values were accepted silently, crashed with tracebacks, or failed mid-run."""
    code = main(["train", "--preset", "tiny", "--train", "synthetic:reverse", "--out", str(tmp_path / "r"),
                 "--max-steps", "2", "--batch-tokens", "256", *options])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.startswith("aiayn train: error: ")
    assert len(err.strip().splitlines()) == 1
    assert not checkpoint.step_checkpoints(tmp_path / "r")


def test_a_recipe_with_a_value_of_the_wrong_type_is_an_error(tmp_path, capsys):
    recipe = tmp_path / "r.toml"
    recipe.write_text('preset = "tiny"\n[model]\nd_model = "64"\n')
    assert main(["train", "--config", str(recipe), "--max-steps", "2", "--out", str(tmp_path / "r")]) == 2
    assert f"{recipe}: d_model='64' must be an integer, not str" in capsys.readouterr().err


def test_an_unexpected_failure_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    from aiayn.cli import info

    def broken(args):
        raise TypeError("something aiayn did not expect")

    monkeypatch.setattr(info, "run", broken)
    assert main(["info"]) == 1
    err = capsys.readouterr().err
    assert err == ("aiayn info: internal error (TypeError, a bug: --debug shows where): "
                   "something aiayn did not expect\n")
    with pytest.raises(TypeError):
        main(["info", "--debug"])
    monkeypatch.setenv("AIAYN_DEBUG", "1")
    with pytest.raises(TypeError):
        main(["info"])


def test_help_shows_the_choices_and_ranges_of_every_option(capsys):
    """Problem 9: --help hid choices behind STR and mixed placeholder styles."""
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = capsys.readouterr().out
    for shown in ("--activation {relu,gelu,silu}", "--precision {auto,float32,bfloat16}", "--train SPEC",
                  "--device DEVICE", "--norm-position {post,pre}", "at least 1"):
        assert shown in text, shown
    assert " STR" not in text


def test_prepare_learns_from_a_random_sample_of_a_large_corpus(tmp_path, capsys):
    for lang, word in (("en", "dog"), ("de", "hund")):
        (tmp_path / f"big.{lang}").write_text("".join(f"{word} {i} {word}s\n" for i in range(50)))
    assert main(["prepare", "--train", str(tmp_path / "big"), "--vocab-size", "300", "--sample-pairs", "10",
                 "--out", str(tmp_path / "tok")]) == 0
    assert "from a random sample of 10 of 50 pairs" in capsys.readouterr().out
    assert (tmp_path / "tok" / "tokenizer.model").is_file()


def test_prepare_learns_separate_vocabularies_when_asked(tmp_path, capsys):
    assert main(["prepare", "--train", "synthetic:reverse", "--vocabulary", "separate", "--vocab-size", "300",
                 "--src-vocab-size", "290", "--out", str(tmp_path / "d")]) == 0
    assert "290 source and 300 target pieces from" in capsys.readouterr().out
    assert {p.name for p in (tmp_path / "d").iterdir()} >= {"source.model", "target.model", "train", "valid"}
    tokenizer = Tokenizer.load(tmp_path / "d")
    assert tokenizer.separate and (tokenizer.source_vocab_size, tokenizer.vocab_size) == (290, 300)
    result = aiayn("prepare", "--train", "synthetic:reverse", "--src-vocab-size", "290",
                   "--out", str(tmp_path / "e"))
    assert result.returncode == 2 and "--src-vocab-size sets the source vocabulary of --vocabulary separate" \
        in result.stderr
    assert not (tmp_path / "e").exists()
