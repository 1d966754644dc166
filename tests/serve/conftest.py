"""A real uvicorn server on a free port of 127.0.0.1, in a thread of the test process, and models."""

import contextlib
import socket
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import uvicorn  # noqa: E402

from aiayn.config import ServeConfig  # noqa: E402
from aiayn.serve.app import create_app  # noqa: E402
from aiayn.translation import Translator, load_translator  # noqa: E402
from tests.conftest import HANG_S  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(translators, api_keys=(), wait_ready=True, **options):
    """Serve `translators` on 127.0.0.1 until the block ends; -> the base URL."""
    config = ServeConfig(port=free_port(), **options)
    server = uvicorn.Server(uvicorn.Config(create_app(translators, config, api_keys), host="127.0.0.1",
                                           port=config.port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{config.port}"
    try:
        deadline = time.monotonic() + HANG_S
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.02)
        while wait_ready and httpx.get(f"{url}/ready").status_code != 200:
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(30)


class Gated(Translator):
    """A real translator that holds any search with a sentence containing "WAIT" until `gate` is set,
    and records the sentences it searched."""

    def __init__(self, inner: Translator) -> None:
        self.__dict__.update(inner.__dict__)
        self.gate, self.searched, self.holding = threading.Event(), [], threading.Event()

    def search(self, ids, **options):
        texts = [self.tokenizer.decode(i) for i in ids]
        self.searched.extend(texts)
        if any("WAIT" in t for t in texts):
            self.holding.set()
            self.gate.wait(HANG_S)
        return super().search(ids, **options)


@pytest.fixture(scope="session")
def en_de(trained_run):
    return load_translator(trained_run, device="cpu")


def copy_run(tmp_path_factory, src: str, tgt: str, steps: int = 10):
    """A run directory of a tiny model src->tgt (copying letters), trained for `steps` updates."""
    from aiayn.cli import main

    run = tmp_path_factory.mktemp("runs") / f"copy-{src}{tgt}"
    assert main(["train", "--preset", "tiny", "--train", "synthetic:copy", "--src-lang", src,
                 "--tgt-lang", tgt, "--out", str(run), "--max-steps", str(steps), "--batch-tokens", "512",
                 "--valid-every", "0", "--bleu-every", "0", "--threads", "1"]) == 0
    return run


@pytest.fixture(scope="session")
def de_en_run(tmp_path_factory):
    """A second tiny model, de->en (copying letters), trained for a few updates."""
    return copy_run(tmp_path_factory, "de", "en")
