"""With a compiled decoder step, the server compiles before /ready: no request pays for it."""

import httpx

from aiayn.decoding.compiled import graphs
from aiayn.translation import load_translator
from tests.conftest import HANG_S

from .conftest import serving


def test_no_request_compiles_after_ready(trained_run, compiled_cache):
    translator = load_translator(trained_run, device="cpu", compile=True, beam_size=2, batch_size=4)
    with serving([translator]) as url:
        compiled = graphs(translator.model)
        assert compiled  # the warm-up compiled
        for n in (1, 12, 3, 9):  # searches of 1 to 4 sentences, some finishing early
            texts = [" ".join("abcdefgh"[: 1 + (i * 3) % 8]) for i in range(n)]
            answer = httpx.post(f"{url}/v1/translate", json={"text": texts}, timeout=HANG_S)
            assert answer.status_code == 200
        assert graphs(translator.model) == compiled
