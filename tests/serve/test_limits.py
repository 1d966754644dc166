"""Bad input, limits and failures: each answers a clear JSON error, and the server goes on."""

import asyncio
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

from .conftest import Gated, free_port, serving


async def queued_becomes(url, n):
    """Wait until the server's queue holds `n` sentences (its metrics say so)."""
    async with httpx.AsyncClient() as client:
        while True:
            text = (await client.get(f"{url}/metrics")).text
            if f"aiayn_queue_sentences {float(n)}" in text:
                return
            await asyncio.sleep(0.02)

LIMITS = dict(max_texts=4, max_chars=60, max_tokens=20, max_body_bytes=2000, max_beam_size=6)


@pytest.fixture(scope="module")
def server(en_de):
    with serving([en_de], **LIMITS) as url:
        yield url


def still_translates(url):
    answer = httpx.post(f"{url}/v1/translate", json={"text": "a b c"}, timeout=60)
    assert answer.status_code == 200 and answer.json()["translations"][0]["text"]


@pytest.mark.parametrize("body, status, message", [
    (b'{"text": 5}', 422, "text"),
    (b'{"text": ["a", 5]}', 422, "text"),
    (b'{"text": "a", "beam_size": "4"}', 422, "beam_size"),
    (b'{"text": "a", "beam_size": 0}', 422, "beam_size"),
    (b'{"text": "a", "colour": "blue"}', 422, "colour: Extra inputs are not permitted"),
    (b'{"text": "a", ', 422, "invalid JSON at character"),
    (b'["a"]', 422, "valid dictionary"),
    (b'{"text": "a \xff b"}', 400, "not valid UTF-8 (byte 12"),
    (b'{"text": "' + b"a" * 61 + b'"}', 400, "text 0: 61 characters; at most 60"),
    (b'{"text": "' + b"a " * 25 + b'"}', 400, "tokens; at most 20"),
    (b'{"text": ["a", "b", "c", "d", "e"]}', 400, "5 texts in one request; at most 4"),
    (b'{"text": "' + b"a" * 3000 + b'"}', 413, "larger than this server accepts (2,000 bytes)"),
    (b'{"text": "a", "source": "fr", "target": "de"}', 400, "no model translates fr->de"),
    (b'{"text": "a", "beam_size": 7}', 422, "beam_size=7 is more than this server allows (6)"),
    (b'{"text": "a", "beam_size": 2, "nbest": 3}', 422, "nbest=3 must be at most beam_size=2"),
])
def test_bad_requests_get_clear_errors_and_the_server_goes_on(server, body, status, message):
    answer = httpx.post(f"{server}/v1/translate", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == status, answer.text
    assert message in answer.json()["error"]
    still_translates(server)


def test_an_empty_text_gets_an_empty_translation(server):
    answer = httpx.post(f"{server}/v1/translate", json={"text": ["", "a b", "  "]}).json()
    assert [t["text"] for t in answer["translations"]][::2] == ["", ""]


def test_libretranslate_errors_too(server):
    wrong = httpx.post(f"{server}/translate", json={"q": 5, "source": "en", "target": "de"})
    assert wrong.status_code == 422 and "q" in wrong.json()["error"]
    bad = httpx.post(f"{server}/translate", content=b"q=a%20b&source=en&target=de&alternatives=x",
                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 422 and "alternatives" in bad.json()["error"]
    still_translates(server)


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
    with serving([gated], max_queue=4) as url, httpx.Client(timeout=60) as client:
        async def scenario():
            async with httpx.AsyncClient(timeout=60) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, 30)  # the worker is busy
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
            async with httpx.AsyncClient(timeout=60) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, 30)
                late = await a.post(f"{url}/v1/translate", json={"text": "late one"})
                gated.gate.set()
                return late, await held

        late, held = asyncio.run(scenario())
        assert late.status_code == 504 and "timeout (0.5 s)" in late.json()["error"]
        assert held.status_code == 504  # it ran past the timeout too, in the search
        still_translates(url)
        assert "late one" not in gated.searched


def test_a_client_that_goes_away_has_its_sentences_withdrawn(en_de):
    gated = Gated(en_de)
    with serving([gated]) as url:
        async def scenario():
            async with httpx.AsyncClient(timeout=60) as a:
                held = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "WAIT a"}))
                await asyncio.to_thread(gated.holding.wait, 30)
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


def test_requests_before_warm_up_ends_get_503(en_de):
    gated = Gated(en_de)  # the warm-up's search holds on a sentence with WAIT: none, so block it here
    gated.translate_first = gated.translate
    release = gated.gate

    def slow_warm_up(texts, **options):
        release.wait(30)
        return gated.translate_first(texts, **options)

    gated.translate = slow_warm_up
    with serving([gated], wait_ready=False) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/ready").status_code == 503
        early = httpx.post(f"{url}/v1/translate", json={"text": "a"})
        assert early.status_code == 503 and early.headers["Retry-After"] == "1"
        release.set()
        deadline = time.monotonic() + 60
        while httpx.get(f"{url}/ready").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        still_translates(url)


def test_sigterm_finishes_the_requests_in_flight_then_exits(trained_run):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "aiayn", "serve", str(trained_run), "--port", str(port),
                               "--max-wait-ms", "2000", "--threads", "1"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
        while True:
            assert server.poll() is None and time.monotonic() < deadline, server.stdout.read()
            try:
                if httpx.get(f"{url}/ready").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)

        async def scenario():
            async with httpx.AsyncClient(timeout=60) as a:
                in_flight = asyncio.create_task(a.post(f"{url}/v1/translate", json={"text": "a b c"}))
                await asyncio.sleep(0.5)  # it waits 2 s for others to share its search
                os.kill(server.pid, signal.SIGTERM)
                return await in_flight

        answer = asyncio.run(scenario())
        assert answer.status_code == 200 and answer.json()["translations"][0]["text"]
        # uvicorn, once drained, exits by the signal it caught (older versions exit 0)
        assert server.wait(30) in (0, -signal.SIGTERM)
    finally:
        if server.poll() is None:
            server.kill()
