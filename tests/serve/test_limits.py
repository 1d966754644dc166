"""Bad input, limits and failures: each answers a clear JSON error, and the server goes on."""

import asyncio
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import HANG_S

from .conftest import Gated, free_port, serving


async def queued_becomes(url, n):
    """Wait until the server's queue holds `n` sentences (its metrics say so)."""
    async with httpx.AsyncClient() as client:
        while True:
            text = (await client.get(f"{url}/metrics")).text
            if f"aiayn_queue_sentences {float(n)}" in text:
                return
            await asyncio.sleep(0.02)

LIMITS = dict(max_texts=4, max_chars=60, max_tokens=20, max_body_bytes=20_000, max_beam_size=6,
              max_output_tokens=50)


@pytest.fixture(scope="module")
def server(en_de):
    with serving([en_de], **LIMITS) as url:
        yield url


def still_translates(url):
    """The server translates a sentence right (the test model reverses letters)."""
    answer = httpx.post(f"{url}/v1/translate", json={"text": "a b c"}, timeout=HANG_S)
    assert answer.status_code == 200 and answer.json()["translations"][0]["text"] == "c b a"


V1, LT = "/v1/translate", "/translate"
DEEP = b"[" * 5000 + b"]" * 5000  # deeper than Python's JSON decoder goes


@pytest.mark.parametrize("path, body, status, message", [
    (V1, b'{"text": 5}', 422, "text"),
    (V1, b'{"text": ["a", 5]}', 422, "text"),
    (V1, b'{"text": "a", "beam_size": "4"}', 422, "beam_size"),
    (V1, b'{"text": "a", "beam_size": 0}', 422, "beam_size"),
    (V1, b'{"text": "a", "colour": "blue"}', 422, "colour: Extra inputs are not permitted"),
    (V1, b'{"text": "a", ', 422, "invalid JSON at character"),
    (V1, b'["a"]', 422, "valid dictionary"),
    (V1, b'{"text": "a \xff b"}', 400, "not valid UTF-8 (byte 12"),
    (V1, b'{"text": "' + b"a" * 61 + b'"}', 400, "text 0: 61 characters; at most 60"),
    (V1, b'{"text": "' + b"a " * 25 + b'"}', 400, "tokens; at most 20"),
    (V1, b'{"text": ["a", "b", "c", "d", "e"]}', 400, "5 texts in one request; at most 4"),
    (V1, b'{"text": "' + b"a" * 30_000 + b'"}', 413, "larger than this server accepts (20,000 bytes)"),
    (V1, b'{"text": "a", "source": "fr", "target": "de"}', 400, "no model translates fr->de"),
    (V1, b'{"text": "a", "beam_size": 7}', 422, "beam_size=7 is more than this server allows (6)"),
    (V1, b'{"text": "a", "nbest": 7}', 422, "nbest=7 is more than this server allows (6)"),
    (V1, b'{"text": "a", "beam_size": 2, "nbest": 3}', 422, "nbest=3 must be at most beam_size=2"),
    (V1, DEEP, 400, "error parsing the body"),
    (LT, DEEP, 422, "invalid JSON: nested too deeply"),
    (LT, b'{"q": "a", "source": "en", "target": "de", "alternatives": 1000}', 400,
     "Invalid request: alternatives parameter must be <= 5"),  # LibreTranslate's words
    (LT, b'{"q": "a", "source": "en", "target": "de", "alternatives": [1]}', 400,
     "Invalid request: alternatives parameter is not a number"),
    (V1, b'{"text": "a", "max_len": 51}', 422, "max_len=51 is more than this server allows (50)"),
    (V1, b'{"text": "' + b"a" * 61 + b'", "source": "auto"}', 400, "text 0: 61 characters; at most 60"),
    (LT, b'{"q": "' + b"a" * 61 + b'", "source": "auto", "target": "de"}', 400, "text 0: 61 characters"),
    ("/detect", b'{"q": "' + b"a" * 61 + b'"}', 400, "text 0: 61 characters; at most 60"),
    ("/detect", b'{"q": ["a", "b", "c", "d", "e"]}', 400, "5 texts in one request; at most 4"),
    ("/detect", b'{"q": ""}', 400, "Invalid request: missing q parameter"),
    ("/detect", b'{"q": 5}', 422, "q: must be a text or a list of texts"),
    ("/suggest", b'{"q": "a", "s": "b", "source": "en", "target": "de"}', 403, "Suggestions are disabled"),
    (LT, b'{"q": "a", "source": "en", "target": "de", "format": "pdf"}', 400, "pdf format is not supported"),
    (LT, b'{"q": "a", "source": "en"}', 400, "Invalid request: missing target parameter"),
    (LT, b'[1, 2]', 422, "the body must be a JSON object"),
    ("/no/such/path", b"{}", 404, "Not Found"),
])
def test_bad_requests_get_clear_errors_and_the_server_goes_on(server, path, body, status, message):
    answer = httpx.post(f"{server}{path}", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]
    still_translates(server)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                  max_size=4),
                    max_leaves=12)
TEXTS = st.text(max_size=40) | st.lists(st.text(max_size=20), max_size=5)
LANGUAGES = st.sampled_from(["en", "de", "fr", "auto", ""]) | JSON
NUMBERS = st.integers(-3, 40) | st.floats(-2, 40) | JSON
V1_FIELDS = st.fixed_dictionaries({}, optional={
    "text": TEXTS | JSON, "source": LANGUAGES, "target": LANGUAGES, "beam_size": NUMBERS, "nbest": NUMBERS,
    "length_penalty": NUMBERS, "max_len": NUMBERS, "attention": st.booleans() | JSON})
LT_FIELDS = st.fixed_dictionaries({}, optional={
    "q": TEXTS | JSON, "source": LANGUAGES, "target": LANGUAGES,
    "format": st.sampled_from(["text", "html"]) | JSON, "alternatives": NUMBERS, "api_key": JSON})


@given(path_and_body=st.tuples(st.just(V1), V1_FIELDS | JSON) | st.tuples(st.just(LT), LT_FIELDS | JSON))
@settings(max_examples=200, deadline=None, database=None)
def test_any_json_gets_an_answer_never_a_500(server, path_and_body):
    """Arbitrary JSON, and objects of each API's fields with values of any type, sent to both APIs:
    a translation or a JSON error (4xx), never a server error; and the server goes on translating."""
    path, body = path_and_body
    answer = httpx.post(f"{server}{path}", content=json.dumps(body).encode(),
                        headers={"Content-Type": "application/json"}, timeout=HANG_S)
    assert answer.status_code == 200 or 400 <= answer.status_code < 500, (answer.status_code, answer.text)
    assert answer.status_code == 200 or isinstance(answer.json()["error"], str)
    still_translates(server)


def test_an_empty_text_gets_an_empty_translation(server):
    answer = httpx.post(f"{server}/v1/translate", json={"text": ["", "a b", "  "]}).json()
    assert [t["text"] for t in answer["translations"]][::2] == ["", ""]


def test_libretranslate_errors_too(server):
    wrong = httpx.post(f"{server}/translate", json={"q": 5, "source": "en", "target": "de"})
    assert wrong.status_code == 422 and "q" in wrong.json()["error"]
    bad = httpx.post(f"{server}/translate", content=b"q=a%20b&source=en&target=de&alternatives=x",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 400 and "alternatives parameter is not a number" in bad.json()["error"]
    still_translates(server)


def test_requests_per_minute_per_address_and_per_key_get_429_with_retry_after(en_de):
    with serving([en_de], api_keys=["k1", "k2"], req_limit=3, key_req_limit=2) as url:
        def translate(key):
            body = {"q": "a b", "source": "en", "target": "de", "api_key": key}
            return httpx.post(f"{url}/translate", json=body)

        assert [translate("k1").status_code for _ in range(2)] == [200, 200]
        over = translate("k1")  # the key's third this minute
        assert over.status_code == 429 and over.headers["Retry-After"].isdigit()
        assert over.json()["error"] == "Slowdown: 2 per 1 minute (per API key)"
        assert translate("k2").status_code == 200  # the address's third: the refused one did not count
        over = translate("k2")
        assert over.status_code == 429 and "per client address" in over.json()["error"]
        assert httpx.get(f"{url}/health").status_code == 200  # only the translating endpoints count


def test_api_keys(en_de):
    with serving([en_de], api_keys=["s3cret"]) as url:
        missing = httpx.post(f"{url}/v1/translate", json={"text": "a"})
        assert missing.status_code == 401 and "API key is required" in missing.json()["error"]
        wrong = httpx.post(f"{url}/v1/translate", json={"text": "a"}, headers={"X-API-Key": "guess"})
        assert wrong.status_code == 403
        for headers in ({"X-API-Key": "s3cret"}, {"Authorization": "Bearer s3cret"}):
            assert httpx.post(f"{url}/v1/translate", json={"text": "a"}, headers=headers).status_code == 200
        form = {"q": "a", "source": "en", "target": "de"}
        assert httpx.post(f"{url}/translate", data={**form, "api_key": "s3cret"}).status_code == 200
        assert httpx.post(f"{url}/translate", data=form).status_code == 401
        assert httpx.get(f"{url}/health").status_code == 200  # health, readiness and metrics stay open


def test_a_full_queue_answers_503_with_retry_after(en_de):
    gated = Gated(en_de)
    with serving([gated], max_queue=4) as url, httpx.Client(timeout=HANG_S) as client:
        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, HANG_S)  # the worker is busy
                queued = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": ["a", "b", "c"]}))
                await queued_becomes(url, 3)
                full = await a.post(f"{url}/v1/translate", json={"text": ["d", "e"]})
                gated.gate.set()
                return full, await held, await queued

        full, held, queued = asyncio.run(scenario())
        assert full.status_code == 503 and full.headers["Retry-After"] == "1"
        assert "the server is busy" in full.json()["error"]
        assert held.status_code == 200 and queued.status_code == 200
        assert client.post(f"{url}/v1/translate", json={"text": ["d", "e"]}).status_code == 200


def test_a_request_past_its_timeout_gets_504_and_its_sentences_leave(en_de):
    gated = Gated(en_de)
    with serving([gated], timeout=0.5) as url:
        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, HANG_S)
                late = await a.post(f"{url}/v1/translate", json={"text": "late one"})
                gated.gate.set()
                return late, await held

        late, held = asyncio.run(scenario())
        assert late.status_code == 504 and "timeout (0.5 s)" in late.json()["error"]
        assert held.status_code == 504  # it ran past the timeout too, in the search
        still_translates(url)
        assert "late one" not in gated.searched


def test_a_client_that_goes_away_has_its_sentences_withdrawn_and_nothing_logged(en_de, caplog):
    """It is counted (499) and its sentence withdrawn, and asyncio logs no error never retrieved (it
    did for every hang-up, from a cancelled asyncio.gather)."""
    gated = Gated(en_de)
    with serving([gated]) as url, caplog.at_level(logging.WARNING):
        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, HANG_S)
                sent = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "gone away"}))
                await queued_becomes(url, 1)
                sent.cancel()  # the client goes away
                with pytest.raises(asyncio.CancelledError):
                    await sent
                await queued_becomes(url, 0)  # the server noticed, and withdrew the sentence
                gated.gate.set()
                return await held

        assert asyncio.run(scenario()).status_code == 200
        still_translates(url)
        assert "gone away" not in gated.searched
        gc.collect()  # asyncio reports an error never retrieved when its future is collected
        metrics = httpx.get(f"{url}/metrics").text
        assert 'aiayn_requests_total{endpoint="/v1/translate",status="499"} 1.0' in metrics
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def test_requests_before_warm_up_ends_get_503(en_de):
    gated = Gated(en_de)  # the warm-up's search holds on a sentence with WAIT: none, so block it here
    gated.translate_first = gated.translate
    release = gated.gate

    def slow_warm_up(texts, **options):
        release.wait(HANG_S)
        return gated.translate_first(texts, **options)

    gated.translate = slow_warm_up
    with serving([gated], wait_ready=False) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/ready").status_code == 503
        early = httpx.post(f"{url}/v1/translate", json={"text": "a"})
        assert early.status_code == 503 and early.headers["Retry-After"] == "1"
        release.set()
        deadline = time.monotonic() + HANG_S
        while httpx.get(f"{url}/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        still_translates(url)


def test_sigterm_finishes_the_requests_in_flight_then_exits(trained_run):
    """A request whose body is half sent when SIGTERM arrives: the server stops listening, waits for
    the rest of the body (for up to --drain-timeout), translates it, answers, and only then exits."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "aiayn", "serve", str(trained_run), "--port", str(port),
                               "--threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + HANG_S
        while not _answers(f"{url}/ready", 200):
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
            time.sleep(0.1)

        async def scenario():
            rest = asyncio.Event()

            async def body():
                yield b'{"text": "a b'
                await rest.wait()
                yield b' c"}'

            async with httpx.AsyncClient(timeout=HANG_S) as client:
                in_flight = asyncio.create_task(client.post(
                    f"{url}/v1/translate", content=body(), headers={"Content-Type": "application/json"}))
                in_progress = 'aiayn_requests_in_progress{endpoint="/v1/translate"}'
                await _until(lambda: _metric(url, in_progress) == 1)
                os.kill(server.pid, signal.SIGTERM)  # the request is in flight: its body is half sent
                await _until(lambda: not _answers(f"{url}/health"))  # shutting down: no new connections
                await asyncio.sleep(0.5)  # well past uvicorn's own 0.1 s: only draining keeps it waiting
                assert server.poll() is None, "the server exited with a request in flight"
                rest.set()
                return await in_flight

        answer = asyncio.run(scenario())
        assert answer.status_code == 200 and answer.json()["translations"][0]["text"] == "c b a"
        # uvicorn, once drained, exits by the signal it caught (older versions exit 0)
        assert server.wait(HANG_S) in (0, -signal.SIGTERM)
    finally:
        if server.poll() is None:
            server.kill()


def _answers(url, status=None):
    """Whether a new connection to the server gets an answer (with `status`, if given)."""
    try:
        return status in (None, httpx.get(url, timeout=HANG_S).status_code)
    except httpx.TransportError:
        return False


def _metric(url, name):
    for line in httpx.get(f"{url}/metrics", timeout=HANG_S).text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


async def _until(condition):
    """Wait until `condition()` (which blocks: run in a thread) holds."""
    while not await asyncio.to_thread(condition):
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("flags, message", [
    (["--port", "99999"], "port=99999 must be in [1, 65535]"),
    (["--port", "0"], "port=0 must be in [1, 65535]"),
    (["--max-beam-size", "0"], "max_beam_size=0 must be at least 1"),
    (["--timeout", "0"], "timeout=0.0 must be greater than 0"),
    (["--file-timeout", "0"], "file_timeout=0.0 must be greater than 0"),
    (["--max-bulk", "0"], "max_bulk=0 must be at least 1"),
    (["--max-file-bytes", "0"], "max_file_bytes=0 must be at least 1"),
    (["--max-file-tokens", "0"], "max_file_tokens=0 must be at least 1"),
    (["--max-output-tokens", "0"], "max_output_tokens=0 must be at least 1"),
    (["--prep-threads", "0"], "prep_threads=0 must be at least 1"),
])
def test_bad_serve_flags_are_one_line_errors_before_anything_loads(tmp_path, capsys, flags, message):
    from aiayn.cli import main

    assert main(["serve", str(tmp_path / "no-model"), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err


def test_rate_limit_windows_last_a_minute():
    from aiayn.serve.errors import Problem
    from aiayn.serve.ratelimit import RateLimits

    now = [100.0]
    limits = RateLimits(per_address=2, per_key=0, clock=lambda: now[0])
    limits.check("1.2.3.4", None)
    limits.check("1.2.3.4", None)
    with pytest.raises(Problem) as refused:
        limits.check("1.2.3.4", None)
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "60"}
    limits.check("5.6.7.8", "any key")  # another address; keys are not limited
    now[0] += 45
    with pytest.raises(Problem) as refused:
        limits.check("1.2.3.4", None)
    assert refused.value.headers == {"Retry-After": "15"}
    now[0] += 15  # the window has ended
    limits.check("1.2.3.4", None)
