"""Every request's work bounded where it enters; CPU work beside the event loop."""

import asyncio
import io
import sys
import threading
import tracemalloc
import zipfile

import httpx
import pytest

from tests.conftest import HANG_S

from .conftest import Gated, serving
from .test_limits import queued_becomes, still_translates

ANSWERS_S = 30  # an idle server answers /health in milliseconds; a blocked event loop never does


def lines(n):
    """A text of `n` sentences, one a line (the test model reverses letters)."""
    return "\n".join(f"{'abcdefgh'[i % 8]} b" for i in range(n))


def held_translation(client, url):
    """A request whose search holds the worker until the Gated translator's gate opens."""
    return asyncio.create_task(client.post(f"{url}/v1/translate", json={"text": "WAIT a"}))


def test_a_word_zip_bomb_is_refused_before_it_is_unpacked(en_de):
    """A 200 MB document.xml in a 200 kB .docx: 400 naming the limit, and nothing near the file's unpacked
    size is ever allocated (traced while the server handles it, in this process)."""
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<" + b" " * 200_000_000 + b">")
    limit = 4 << 20
    with serving([en_de], max_file_bytes=limit) as url:
        tracemalloc.start()
        try:
            answer = httpx.post(f"{url}/translate_file", data={"source": "en", "target": "de"},
                                files={"file": ("bomb.docx", bomb.getvalue())}, timeout=HANG_S)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert answer.status_code == 400
        assert answer.json()["error"] == \
            "bomb.docx: 200,000,002 bytes unpacked; this server unpacks at most 4,194,304"
        assert peak < limit
        still_translates(url)


def test_a_file_has_one_deadline_for_all_of_it_and_a_token_limit(en_de):
    gated = Gated(en_de)
    with serving([gated], file_timeout=0.5, max_file_tokens=40) as url:
        def post(text):
            return httpx.post(f"{url}/translate_file", data={"source": "en", "target": "de"},
                              files={"file": ("notes.txt", text.encode())}, timeout=HANG_S)

        too_long = post(lines(30))
        assert too_long.status_code == 400
        assert too_long.json()["error"] == "notes.txt: 60 tokens; a file may have at most 40"
        held = post("WAIT a\n" + lines(3))  # the first search holds past the file's deadline
        gated.gate.set()
        assert held.status_code == 504 and "file timeout (0.5 s)" in held.json()["error"]
        assert post(lines(3)).status_code == 200


def test_the_queue_counts_sentences_not_texts(en_de):
    """A queue of four holds one text of three sentences, and no room is left for a text of two; a text
    of more sentences than the queue holds waits apart, as bulk, and is translated."""
    gated = Gated(en_de)
    with serving([gated], max_queue=4) as url:
        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as client:
                held = held_translation(client, url)
                await asyncio.to_thread(gated.holding.wait, HANG_S)
                three = asyncio.create_task(client.post(f"{url}/v1/translate", json={"text": lines(3)}))
                await queued_becomes(url, 3)
                two = await client.post(f"{url}/v1/translate", json={"text": lines(2)})
                five = asyncio.create_task(client.post(f"{url}/v1/translate", json={"text": lines(5)}))
                await queued_becomes(url, 8)
                gated.gate.set()
                return two, await three, await five, await held

        two, three, five, held = asyncio.run(scenario())
        assert two.status_code == 503 and "3 sentences are waiting (at most 4)" in two.json()["error"]
        assert three.status_code == five.status_code == held.status_code == 200
        assert five.json()["translations"][0]["text"].count("\n") == 4


def test_explain_goes_through_the_queue_and_the_timeout(en_de):
    gated = Gated(en_de)
    with serving([gated], max_queue=1, timeout=0.5) as url:
        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as client:
                held = held_translation(client, url)
                await asyncio.to_thread(gated.holding.wait, HANG_S)
                late = await client.post(f"{url}/v1/explain", json={"text": "a b c"})  # waits: 504
                queued = asyncio.create_task(client.post(f"{url}/v1/translate", json={"text": "c d"}))
                await queued_becomes(url, 1)
                full = await client.post(f"{url}/v1/explain", json={"text": "a b c"})
                gated.gate.set()
                await queued
                return late, full, await held

        late, full, _ = asyncio.run(scenario())
        assert late.status_code == 504 and "timeout (0.5 s)" in late.json()["error"]
        assert full.status_code == 503 and full.headers["Retry-After"] == "1"
        explained = httpx.post(f"{url}/v1/explain", json={"text": "a b c"}, timeout=HANG_S)
        assert explained.status_code == 200 and explained.json()["source"]["pieces"]


class Watched(Gated):
    """Records the thread that cuts each request's texts into sentences."""

    def segment(self, texts, **options):
        self.cut_on = getattr(self, "cut_on", []) + [threading.current_thread().name]
        return super().segment(texts, **options)


def test_files_and_texts_are_prepared_beside_the_event_loop(en_de, monkeypatch):
    """While a file is being read (held here, on a preparing thread), the server answers /health and
    translates a sentence; texts are cut into sentences on the preparing threads too."""
    from aiayn.text import documents

    reading, release, read_on = threading.Event(), threading.Event(), []
    real_read = documents.read

    def held_read(data, name, *args):
        read_on.append(threading.current_thread().name)
        if name == "held.txt":
            reading.set()
            release.wait(HANG_S)
        return real_read(data, name, *args)

    monkeypatch.setattr(documents, "read", held_read)
    watched = Watched(en_de)
    with serving([watched]) as url:
        watched.cut_on = []  # not the warm-up's, on the search thread

        async def scenario():
            async with httpx.AsyncClient(timeout=HANG_S) as client:
                file = asyncio.create_task(client.post(
                    f"{url}/translate_file", data={"source": "en", "target": "de"},
                    files={"file": ("held.txt", b"a b c\n")}))
                await asyncio.to_thread(reading.wait, HANG_S)
                health = await client.get(f"{url}/health", timeout=ANSWERS_S)
                sentence = await client.post(f"{url}/v1/translate", json={"text": "a b c"}, timeout=ANSWERS_S)
                release.set()
                return health, sentence, await file

        try:
            health, sentence, file = asyncio.run(scenario())
        finally:
            release.set()
        assert health.status_code == 200 and sentence.json()["translations"][0]["text"] == "c b a"
        assert file.status_code == 200
    assert read_on and all(name.startswith("aiayn-prep") for name in read_on)
    assert watched.cut_on and all(name.startswith("aiayn-prep") for name in watched.cut_on)


def test_without_lingua_source_auto_is_a_clear_error(en_de, monkeypatch):
    monkeypatch.setitem(sys.modules, "lingua", None)  # as if lingua-language-detector were not installed
    with serving([en_de]) as url:
        answer = httpx.post(f"{url}/detect", json={"q": "a b c"})
        assert answer.status_code == 501
        assert answer.json()["error"] == ("source auto: detecting languages needs the serve extra (lingua "
                                          "is missing): pip install -e \".[serve]\"; or give the source "
                                          "language")
        still_translates(url)


def test_api_keys_are_compared_in_constant_time_each_of_them(en_de, monkeypatch):
    import hmac

    from aiayn.config import ServeConfig
    from aiayn.serve.errors import Problem
    from aiayn.serve.service import Service

    compared = []

    def compare_digest(a, b):
        compared.append(b)
        return a == b

    monkeypatch.setattr(hmac, "compare_digest", compare_digest)
    service = Service([en_de], ServeConfig(), ["first", "second"])

    class Request:
        headers = {"x-api-key": "first"}

    assert service.check_key(Request()) == "first"
    assert sorted(compared) == [b"first", b"second"]  # not stopping at the first that matches
    Request.headers = {"x-api-key": "wrong"}
    with pytest.raises(Problem):
        service.check_key(Request())
