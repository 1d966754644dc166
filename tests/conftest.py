from __future__ import annotations

import fcntl
import os
import shutil
import signal
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from aiayn.config import model_config
from aiayn.model import Transformer

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
# How long a test waits before it calls a process or a loop hung. Nothing that works comes near it,
# however slow the machine; AIAYN_TEST_HANG_S lowers it, to see quickly that a hang fails a test.
HANG_S = float(os.environ.get("AIAYN_TEST_HANG_S", 600))
# The C++ that calls a compiled step's kernels is built unoptimised in the tests (this process and the
# commands they start): 2.5 s less per step compiled; the kernels themselves are built as for users.
os.environ.setdefault("AOT_INDUCTOR_COMPILE_WRAPPER_OPT_LEVEL", "O0")
# Compiled steps pack their weights by the rows rule, not by timing this machine (decoding/kernels.py):
# the same steps compile on every machine, whatever its load. tests/decoding/test_kernels.py times.
os.environ.setdefault("AIAYN_KERNELS", "rows")
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
MOST_WORKERS = 4  # `-n auto` (pyproject's addopts): each worker trains the session's models again
# The suite runs in pytest-xdist workers that share the CPUs: each worker, and the commands its tests
# start, computes with its share of them. With every worker using all of them, idle OpenMP threads
# spinning for the CPU that another process's threads need made the suite slower than one process.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKERS > 1:
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, CPUS // WORKERS)))
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers `-n auto` starts: one per CPU, `MOST_WORKERS` at most."""
    return max(1, min(MOST_WORKERS, CPUS))


@contextmanager
def fails_if_hung(seconds: float = HANG_S):
    """Turn a hang of the code inside into a TimeoutError after `seconds`."""
    def alarm(signum, frame):
        raise TimeoutError(f"hung for {seconds:g} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True, scope="session")
def step_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Compiled decoder steps go to a cache of the session's own (its processes share it), never the
    user's. Tests that compile use `compiled_cache` instead, so this one stays empty: a model compiled
    before is compiled by default, and the other tests run eagerly in whatever order they run."""
    path = tmp_path_factory.mktemp("aiayn-cache")
    os.environ["AIAYN_CACHE_DIR"] = str(path)
    os.environ["AIAYN_COMPILE_WORKERS"] = "0"  # steps compiled in the process that needs them, as tests
    return path  # count them; compiling alongside has its own test


def run_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory of this pytest run that all its workers share."""
    root = tmp_path_factory.getbasetemp()
    return root.parent if WORKERS > 1 else root  # each worker's base directory lies in the run's


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]) -> Path:
    """The directory `make` fills, made once for all the workers of a run (the first to ask makes it,
    under a lock; the others wait for it): a session's trained model is trained once, not per worker.
    Tests only read what is in it."""
    root = run_directory(tmp_path_factory)
    path, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # let go when the file closes, or its process dies
        if not done.exists():
            shutil.rmtree(path, ignore_errors=True)  # what a worker that failed left
            make(path)
            done.touch()
    return path


@pytest.fixture(scope="session")
def _compiled_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for all the workers of a run (the cache is safe for processes filling it at once):
    a step one worker compiled, the others load."""
    path = run_directory(tmp_path_factory) / "aiayn-compiled"
    path.mkdir(exist_ok=True)
    return path


@pytest.fixture
def compiled_cache(_compiled_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache of the tests that compile decoder steps, shared by them (a step compiled by one is
    loaded by the next), apart from `step_cache`."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(_compiled_dir))
    return _compiled_dir


@pytest.fixture
def data_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared Multi30k data directory, as AIAYN_DATA_DIR; tests that need it skip without it."""
    path = Path(os.environ.get("AIAYN_DATA_DIR", SHARED_DATA))
    if not (path / "multi30k" / "train.en.gz").exists():
        pytest.skip(f"Multi30k not found under {path}")
    monkeypatch.setenv("AIAYN_DATA_DIR", str(path))
    return path


def multiway_files(prefix: Path, langs: tuple[str, ...] = ("en", "de", "cs"), n: int = 20) -> Path:
    """The first `n` captions of Multi30k val in each of `langs`, as PREFIX.LANG files (line i of each
    is one caption: a multi-way corpus). Needs the `data_dir` fixture. -> `prefix`."""
    from aiayn.data import multi30k

    for lang in langs:
        lines = multi30k.load("val", lang, "en").source[:n]
        prefix.with_suffix(f".{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return prefix


def tiny_model(**overrides) -> Transformer:
    """A small random model in eval mode (no dropout), vocabulary 50 unless overridden."""
    torch.manual_seed(0)
    return Transformer(model_config("tiny", **{"vocab_size": 50, **overrides})).eval()


def one_layer_model(**overrides) -> Transformer:
    """`tiny_model` with one decoder layer, for tests that compile decoder steps and need no second:
    its step compiles in about half the time."""
    return tiny_model(**{"n_decoder_layers": 1, **overrides})


def random_ids(batch: int, length: int, vocab: int = 50, seed: int = 0) -> torch.Tensor:
    """Ids that avoid the 4 special ids."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, length), generator=g)


def source_ids(tokenizer, lines: list[str]) -> torch.Tensor:
    """Lines as a (B, S) batch of source ids, each ended by eos, padded as translation does."""
    from aiayn.data.batching import pad

    return pad([s + [tokenizer.eos_id] for s in tokenizer.encode(lines)], tokenizer.pad_id)


def train_reverse_model(out, steps: int = 600, separate: bool = False, **model_overrides):
    """(model, tokenizer, validation sources) of a tiny model trained for seconds to reverse letters:
    a real model whose outputs end with eos at sensible lengths, for parity tests."""
    from aiayn.config import DataConfig, TrainConfig
    from aiayn.data.batching import tokenize
    from aiayn.data.corpora import load_corpus
    from aiayn.tokenizer import Tokenizer
    from aiayn.train.loop import train

    corpus, valid = load_corpus("synthetic:reverse", "", ""), load_corpus("synthetic:reverse:val", "", "")
    if separate:  # one vocabulary per side, each with its own ids
        tokenizer = Tokenizer.train_separate(corpus.source, corpus.target, 290, 512)
        model_overrides |= dict(vocabulary="separate", share_embeddings=False,
                                src_vocab_size=tokenizer.source_vocab_size)
    else:
        tokenizer = Tokenizer.train(corpus.source + corpus.target, 512)
    torch.manual_seed(0)
    model = Transformer(model_config("tiny", vocab_size=tokenizer.vocab_size, **model_overrides))
    config = TrainConfig(warmup_steps=200, max_steps=steps, valid_every=0, save_every=0, log_every=100,
                         device="cpu")  # the tests that use it compare CPU paths, GPU or not
    train(model, tokenizer, tokenize(corpus, tokenizer), None, DataConfig(batch_tokens=1024), config, out)
    return model.eval(), tokenizer, valid.source


@pytest.fixture(scope="session")
def reverse_model(trained_run):
    """(model, tokenizer, validation sources) of `trained_run`: a tiny model that reverses letters,
    with an output bias."""
    from aiayn import checkpoint
    from aiayn.data.corpora import load_corpus

    loaded = checkpoint.load(checkpoint.resolve(trained_run), "cpu", with_state=False)
    return loaded.model.eval(), loaded.tokenizer, load_corpus("synthetic:reverse:val", "", "").source


@pytest.fixture(scope="session")
def separate_model(tmp_path_factory):
    """A tiny reverse model with one vocabulary per language (source ids apart from target ids)."""
    from aiayn import checkpoint
    from aiayn.data.corpora import load_corpus

    run = made_once(tmp_path_factory, "separate", lambda out: train_reverse_model(out, 400, separate=True))
    loaded = checkpoint.load(checkpoint.resolve(run), "cpu", with_state=False)
    return loaded.model.eval(), loaded.tokenizer, load_corpus("synthetic:reverse:val", "", "").source


TRAINED_STEPS = 600  # updates of `trained_run`: enough to reverse 9 in 10 sentences on any CPU


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """A run directory of `aiayn train`: a tiny model trained for 600 updates to reverse letters (about
    a minute), with an output bias, validation loss and BLEU at 300 and 600, and checkpoints every 200.
    It is checked to do its task, so tests may rely on real translations ("a b c" -> "c b a")."""
    from aiayn.cli import main

    def make(run: Path) -> None:
        code = main(["train", "--preset", "tiny", "--train", "synthetic:reverse", "--out", str(run),
                     "--max-steps", str(TRAINED_STEPS), "--batch-tokens", "1024", "--warmup-steps", "200",
                     "--valid-every", "300", "--save-every", "200", "--bleu-every", "300", "--bleu-beam", "2",
                     "--output-bias"])
        assert code == 0
        check_reverses(run)

    return made_once(tmp_path_factory, "reverse", make)


def check_reverses(run: Path) -> None:
    """Fail, saying why, unless the model of `run` reverses the sentences the tests send it and at
    least 80% of 200 validation sentences (greedy search)."""
    from aiayn.data.corpora import load_corpus
    from aiayn.translation import load_translator

    sources = ["a b c", "a b c d e", "d e f g", *load_corpus("synthetic:reverse:val", "", "").source[:200]]
    outputs = [t.text for t in load_translator(run, device="cpu").translate(sources, beam_size=1)]
    right = [out == " ".join(reversed(s.split())) for s, out in zip(sources, outputs, strict=True)]
    assert all(right[:3]) and sum(right[3:]) >= 160, (
        f"the test model at {run} did not learn to reverse letters in {TRAINED_STEPS} updates: "
        f"{sum(right[3:])} of 200 validation sentences right; 'a b c' -> {outputs[0]!r}")
