"""With a compiled decoder step, the server compiles before /ready: no request pays for it."""

import subprocess
import sys
import threading
import time

import httpx

from aiayn.decoding import whole
from aiayn.decoding.step_graph import graphs, row_buckets
from aiayn.translation import load_translator
from tests.conftest import HANG_S, fails_if_hung

from .conftest import free_port, serving


def test_no_request_compiles_after_ready(trained_run, compiled_cache):
    """Searches of one sentence (the whole search of tests/cli's compiled search, one sentence at a
    time)."""
    translator = load_translator(trained_run, device="cpu", compile=True, beam_size=2, batch_size=1)
    with serving([translator]) as url:
        compiled = whole.graphs(translator.model), graphs(translator.model)
        assert compiled[0]  # the warm-up compiled
        for n in (1, 6, 3, 5):  # requests of several sentences, each searched alone
            texts = [" ".join("abcdefgh"[: 1 + (i * 3) % 8]) for i in range(n)]
            answer = httpx.post(f"{url}/v1/translate", json={"text": texts}, timeout=HANG_S)
            assert answer.status_code == 200
        assert (whole.graphs(translator.model), graphs(translator.model)) == compiled


def test_a_server_answers_at_once_while_another_process_compiles_its_steps(trained_run, compiled_cache,
                                                                         tmp_path, monkeypatch, capsys):
    """With its steps not in the cache and another process to compile them, the server is ready
    after an eager warm-up and answers eagerly; once they are stored, it loads them and says so."""
    from aiayn.decoding.cache.alongside import alongside

    options = dict(device="cpu", compile=True, beam_size=2, batch_size=1)
    load_translator(trained_run, **options).warm_up()  # the steps, in the shared cache for later
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))  # a new machine's: empty
    monkeypatch.setattr(alongside, "workers", lambda: 1)
    jobs, stored = [], threading.Event()
    monkeypatch.setattr(alongside, "submit", lambda *job: jobs.append(job[1]["rows"]))
    monkeypatch.setattr(alongside, "busy", lambda: not stored.is_set())
    translator = load_translator(trained_run, **options)
    with serving([translator]) as url:
        answer = httpx.post(f"{url}/v1/translate", json={"text": ["a b c", "d e f g"]}, timeout=HANG_S)
        assert answer.status_code == 200 and len(answer.json()["translations"]) == 2
        assert jobs and whole.graphs(translator.model) == [] == graphs(translator.model)
        assert "searching eagerly while other processes compile" in capsys.readouterr().out

        monkeypatch.setenv("AIAYN_CACHE_DIR", str(compiled_cache))  # where the other process stored them
        stored.set()
        said, deadline = "", time.monotonic() + HANG_S
        while "compiled decoder steps in use" not in said:
            assert time.monotonic() < deadline, said
            time.sleep(0.05)
            said += capsys.readouterr().out
        assert whole.graphs(translator.model)  # loaded: used from now on
        answer = httpx.post(f"{url}/v1/translate", json={"text": ["a b c"]}, timeout=HANG_S)
        assert answer.status_code == 200


def _serving_line(run, *flags) -> str:
    """What `aiayn serve RUN FLAGS` says of its searches, once it serves."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "aiayn", "serve", str(run), "--port", str(port),
                               "--threads", "2", *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        with fails_if_hung():  # a server that hangs without a word fails the test too
            return next((line for line in server.stdout if line.startswith("serving on")), "")
    finally:
        server.terminate()
        server.wait(HANG_S)


def test_a_compiled_model_is_served_by_one_search_on_every_thread(trained_run, compiled_cache):
    """Compiled decoder steps run one call at a time: two one-thread searches would answer no more
    than one, so the server runs one on both threads, whether --compile says so or the cache does."""
    load_translator(trained_run, device="cpu", compile=True).translate(["a b c"], beam_size=2)  # cached
    assert "1 search at once on 2 of 2 CPU threads" in _serving_line(trained_run, "--compile")
    assert "1 search at once on 2 of 2 CPU threads" in _serving_line(trained_run)  # the cache says compiled
    assert "2 searches at once on 1 of 2 CPU threads" in _serving_line(trained_run, "--no-compile")


def test_the_warm_up_starts_a_batch_at_every_row_count_a_compiled_step_runs_at():
    """Compiled steps run at 2 and 4 rows, and one step at any count from 8: a batch of each is
    searched, the largest first (the steps its search shrinks through are compiled alongside it)."""
    from types import SimpleNamespace

    from aiayn.translation import Translator

    sizes = []
    fake = SimpleNamespace(defaults=SimpleNamespace(compile=True, batch_size=100),
                           translate=lambda texts: sizes.append(len(texts)))
    Translator.warm_up(fake)  # what the server's warm-up runs for each model
    assert sizes == [1, 8, 4, 2]
    assert row_buckets(100) == row_buckets(128) == [2, 4, 8] and row_buckets(3) == [2, 4]
