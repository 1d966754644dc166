"""The benchmarks are scripts, not tests: CI only checks that their seconds-long smoke modes run."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HANG_S, multiway_files

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("script, expect", [
    ("train_speed.py", ["| tiny |"]),
    # CTranslate2 runs in worker processes (ctranslate2_worker.py): its rows come back from them
    ("decode_speed.py", ["| beam 4 | aiayn int8 |", "| beam 4 | ctranslate2 int8 (its default) |"]),
    # servers on 127.0.0.1, a few requests from 1 and 4 clients
    ("serve_load.py", ["| aiayn serve | 4 |", "| aiayn serve --no-batching | 4 |", "| offline"]),
    # 5,000 pairs prepared and trained from; memory maps against lists
    ("data_scale.py", ["| `aiayn train --data` peak RSS, 3 updates (tiny) |", "memory maps / lists |"]),
    # a file translated beside /health and sentences; a soak with clients hanging up
    ("serve_busy.py", ["| preparing the file |", "| searching the file's", "### Soak: 40 LibreTranslate"]),
    # a paragraph's translation is its sentences' joined, whatever the model
    ("paragraphs.py", ["| one paragraph | 10 of 10 |", "| two paragraphs | 10 of 10 |"]),
    # drawing an epoch's pieces with BPE-dropout, and updates on them
    ("bpe_dropout.py", ["| 0.1 |"]),
    # a barely trained model's loops under each setting of the rules against them
    ("repetition.py", ["| 1 | 0 |", "| 1 | 3 |", "| 1.2 | 0 |"]),
    # a barely trained model's confidence against each sentence's chrF
    ("confidence.py", ["/smoke | 40 |"]),
    # a presentation and a book translated whole and as their text alone, each in a process of its own
    ("documents.py", ["| 2-slides.pptx (", "| 2-pages.epub ("]),
])
def test_benchmark_smoke_mode_runs(script, expect):
    done = subprocess.run([sys.executable, str(BENCHMARKS / script), "--smoke"], capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    for row in expect:
        assert row in done.stdout


def test_real_file_benchmark_smoke_mode_runs(trained_run):
    """`decode_speed.py --model RUN`: `aiayn translate` end to end, aiayn and CTranslate2 (exported by
    `aiayn export ctranslate2`) in processes of their own."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "decode_speed.py"), "--model", str(trained_run),
                           "--smoke"], capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row[0] for row in rows] == ["| aiayn float32", "| ctranslate2 float32"]
    assert rows[0][6] == "1.00x" and rows[1][6].endswith("x")  # aiayn relative to each


def test_single_sentence_benchmark_smoke_mode_runs(trained_run):
    """`decode_speed.py --model RUN --single`: one sentence a call, aiayn's Python API and CTranslate2's
    translate_batch, each in processes of their own; a p50 for each and aiayn's speed relative to it."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "decode_speed.py"), "--model", str(trained_run),
                           "--single", "--smoke"], capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [line.split(" | ") for line in done.stdout.splitlines() if line.startswith("| ")]
    assert [row[0] for row in rows] == ["| aiayn float32", "| ctranslate2 float32"]
    assert all(float(row[2]) > 0 for row in rows)  # p50, milliseconds
    assert rows[0][5].strip(" |").endswith("x") and rows[1][5].strip(" |") == ""  # aiayn relative to it


def test_zero_shot_benchmark_runs_both_ways_on_a_small_multilingual_model(data_dir, tmp_path):
    """`zero_shot.py MODEL`: each untrained direction zero-shot and through the pivot, scored."""
    from aiayn.cli import main

    prefix = multiway_files(tmp_path / "small")
    run = tmp_path / "run"
    assert main(["train", "--preset", "tiny", "--vocab-size", "600", "--train", str(prefix), "--valid", "",
                 "--pairs", "en-de,de-en,en-cs", "--max-steps", "1", "--threads", "1",
                 "--out", str(run)]) == 0
    done = subprocess.run([sys.executable, str(BENCHMARKS / "zero_shot.py"), str(run), "--directions",
                           "de-cs", "--test", str(prefix), "--limit", "5", "--beam-size", "1"],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| direction | zero-shot BLEU | chrF | s | through en BLEU |" in done.stdout
    assert "| de->cs | " in done.stdout


def test_constraints_benchmark_measures_constraints_and_a_glossary(trained_run):
    """`constraints.py MODEL`: constraints drawn from the references all appear; a Dice glossary."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "constraints.py"), str(trained_run), "--test",
                           "synthetic:reverse:val", "--train", "synthetic:reverse:val", "--limit", "20"],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| 1 per sentence | " in done.stdout and "| 3 per sentence | " in done.stdout
    assert "| with | " in done.stdout
    assert "| best translation begins with its prefix, token for token | 20 of 20 |" in done.stdout


def test_multilingual_serve_benchmark_offers_and_translates_every_trained_pair(data_dir):
    """`multilingual_serve.py`: one multilingual model (en-de, de-en, en-cs) served; libretranslatepy
    is offered its three pairs and gets a translation in each."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "multilingual_serve.py"), "--smoke"],
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| one multilingual model | 3 | 3 | " in done.stdout
    assert {"en->de", "de->en", "en->cs"} <= {line.split(": ")[1] for line in done.stderr.splitlines()
                                             if line.startswith("one multilingual model: ")}


def test_the_repetition_benchmarks_latency_mode_runs():
    """`repetition.py --latency`: lone sentences under each setting (eager in smoke mode: seconds)."""
    done = subprocess.run([sys.executable, str(BENCHMARKS / "repetition.py"), "--smoke", "--latency", "4",
                           "--settings", "1:0", "1:3"], capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| 1 | 0 |" in done.stdout and "| 1 | 3 |" in done.stdout and " ms |" in done.stdout


def test_cold_server_benchmark_smoke_mode_runs():
    """`serve_start.py`: a server on an empty step cache is timed to /ready and answers; the other
    processes' compiles are not waited for in smoke mode."""
    env = {k: v for k, v in os.environ.items() if k != "AIAYN_COMPILE_WORKERS"}  # the server's default
    done = subprocess.run([sys.executable, str(BENCHMARKS / "serve_start.py"), "--smoke"],
                          capture_output=True, text=True, timeout=HANG_S, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "| ready after (from the process's start) |" in done.stdout
    assert "warmed up in" in done.stdout
