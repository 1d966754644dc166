"""aiayn serve over real HTTP: translations as `aiayn translate` gives them, batching across
requests, several models, LibreTranslate's API, health, readiness and metrics."""

import asyncio
import random

import httpx
import pytest

from aiayn.translation import load_translator
from tests.conftest import HANG_S

from .conftest import serving

SENTENCES = [" ".join(random.Random(i).choices("abcdefghijklmnopqrstuvwxyz", k=3 + i % 9)) for i in range(24)]


@pytest.fixture(scope="module")
def server(en_de, de_en_run):
    de_en = load_translator(de_en_run, device="cpu")
    with serving([en_de, de_en], max_wait_ms=200) as url:
        yield url


def post(url, path, **json):
    return httpx.post(f"{url}{path}", json=json, timeout=HANG_S)


def test_health_ready_docs_and_languages(server):
    assert httpx.get(f"{server}/health").json() == {"status": "ok"}
    assert httpx.get(f"{server}/ready").json() == {"status": "ready", "models": ["en->de", "de->en"]}
    assert httpx.get(f"{server}/docs").status_code == 200
    paths = httpx.get(f"{server}/openapi.json").json()["paths"]
    assert {"/v1/translate", "/translate", "/languages", "/health", "/ready", "/metrics"} <= set(paths)
    assert httpx.get(f"{server}/languages").json() == [{"code": "de", "name": "German", "targets": ["en"]},
                                                       {"code": "en", "name": "English", "targets": ["de"]}]


def test_translations_are_those_of_the_translator(server, en_de):
    expected = en_de.translate(SENTENCES[:6], nbest=2)
    answer = post(server, "/v1/translate", text=SENTENCES[:6], source="en", target="de", nbest=2, beam_size=4)
    assert answer.status_code == 200
    got = answer.json()["translations"]
    assert [t["text"] for t in got] == [t.text for t in expected]
    assert [t["score"] for t in got] == pytest.approx([t.score for t in expected])
    assert [[a["text"] for a in t["alternatives"]] for t in got] == [[a.text for a in t.alternatives]
                                                                    for t in expected]
    one = post(server, "/v1/translate", text=SENTENCES[0], source="en", target="de").json()["translations"]
    assert [t["text"] for t in one] == [expected[0].text]


def test_each_translation_comes_with_its_confidence(server, en_de):
    """/v1 always answers it (per text, alternative and sentence); LibreTranslate's /translate on
    request (JSON or form), its answer otherwise LibreTranslate's own."""
    texts = [SENTENCES[0], f"{SENTENCES[1]}\n{SENTENCES[2]}"]
    expected = en_de.translate(texts, beam_size=4, nbest=2)
    got = post(server, "/v1/translate", text=texts, source="en", target="de", nbest=2, beam_size=4).json()
    got = got["translations"]
    assert [t["confidence"] for t in got] == pytest.approx([t.confidence for t in expected], abs=1e-4)
    assert [a["confidence"] for a in got[0]["alternatives"]] == pytest.approx(
        [a.confidence for a in expected[0].alternatives], abs=1e-4)
    assert [s["confidence"] for s in got[1]["sentences"]] == pytest.approx(
        [s.confidence for s in expected[1].sentences], abs=1e-4)
    one = en_de.translate(texts[:1])[0]
    lt = post(server, "/translate", q=texts[0], source="en", target="de", confidence=True).json()
    assert lt == {"translatedText": one.text, "confidence": pytest.approx(one.confidence, abs=1e-4)}
    listed = post(server, "/translate", q=texts, source="en", target="de", confidence=True).json()
    assert len(listed["confidence"]) == 2 and listed["confidence"][0] == lt["confidence"]
    form = httpx.post(f"{server}/translate", data={"q": texts[0], "source": "en", "target": "de",
                                                   "confidence": "true"}).json()
    assert form == lt
    plain = httpx.post(f"{server}/translate", data={"q": texts[0], "source": "en", "target": "de",
                                                    "confidence": "0"}).json()
    assert plain == {"translatedText": one.text}
    bad = post(server, "/translate", q=texts[0], source="en", target="de", confidence="perhaps")
    assert bad.status_code == 400 and bad.json() == {"error": "Invalid request: confidence parameter is not "
                                                              "true or false"}


def test_concurrent_requests_share_searches_and_get_what_they_would_alone(server, en_de):
    """Batch invariance: each sentence, sent on its own by one of many concurrent clients, gets the
    translation that the offline translator gives it among all the others."""
    expected = [t.text for t in en_de.translate(SENTENCES)]
    before = _metric(server, "aiayn_batch_requests_sum"), _metric(server, "aiayn_batch_requests_count")

    async def send_all():
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            answers = await asyncio.gather(*(client.post(f"{server}/v1/translate", json={
                "text": s, "source": "en", "target": "de"}) for s in SENTENCES))
        return [a.json()["translations"][0]["text"] for a in answers]

    assert asyncio.run(send_all()) == expected
    requests = _metric(server, "aiayn_batch_requests_sum") - before[0]
    searches = _metric(server, "aiayn_batch_requests_count") - before[1]
    assert requests == len(SENTENCES) and searches < len(SENTENCES)  # some searches served several


def test_each_model_by_its_language_pair(server):
    de_en = post(server, "/v1/translate", text="a b c", source="de", target="en").json()
    assert (de_en["source"], de_en["target"]) == ("de", "en")
    assert post(server, "/v1/translate", text="a b c", target="en").json()["source"] == "de"
    unknown = post(server, "/v1/translate", text="a b c", source="fr", target="en")
    assert unknown.status_code == 400 and "no model translates fr->en" in unknown.json()["error"]
    both = post(server, "/v1/translate", text="a b c")
    assert both.status_code == 400 and "give source and target" in both.json()["error"]


def test_attention_comes_on_request(server, en_de):
    answer = post(server, "/v1/translate", text="a b c d", source="en", target="de", attention=True).json()
    t = answer["translations"][0]
    view = en_de.translate(["a b c d"], attention=True)[0].attention
    cross = t["attention"]["cross"]
    assert t["attention"]["source"] == view.source and t["attention"]["target"] == view.target_out
    assert (len(cross), len(cross[0]), len(cross[0][0]), len(cross[0][0][0])) == (
        len(view.maps["cross"]), *view.maps["cross"][0].shape)
    assert sum(cross[-1][0][0]) == pytest.approx(1, abs=1e-3)
    assert "attention" not in post(server, "/v1/translate", text="a b", target="de").json()["translations"][0]


def test_libretranslate_api_with_json_and_form_bodies(server, en_de):
    texts = SENTENCES[:3]
    expected = en_de.translate(texts, beam_size=4, nbest=3)
    single = post(server, "/translate", q=texts[0], source="en", target="de").json()
    assert single == {"translatedText": en_de.translate(texts[:1])[0].text}
    listed = post(server, "/translate", q=texts, source="en", target="de", alternatives=2).json()
    assert listed["translatedText"] == [t.text for t in expected]
    assert listed["alternatives"] == [unique([a.text for a in t.alternatives], t.text) for t in expected]
    form = httpx.post(f"{server}/translate", data={"q": texts[0], "source": "en", "target": "de"}).json()
    assert form == single
    html = post(server, "/translate", q=f"<p>{texts[0]}</p><!-- x -->", source="en", target="de",
                format="html")
    assert html.json() == {"translatedText": f"<p>{single['translatedText']}</p><!-- x -->"}
    xml = post(server, "/translate", q="a", source="en", target="de", format="xml")
    assert xml.status_code == 400 and xml.json() == {"error": "xml format is not supported"}
    missing = httpx.post(f"{server}/translate", data={"source": "en", "target": "de"})
    assert missing.status_code == 400 and missing.json() == {"error": "Invalid request: missing q parameter"}


def unique(texts, translation):
    """LibreTranslate's alternatives: each different text once, not the translation itself."""
    return [t for i, t in enumerate(texts) if t != translation and t not in texts[:i]]


def test_the_libretranslatepy_client_works_unchanged(server, en_de):
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(server)
    assert client.translate("a b c", "en", "de") == en_de.translate(["a b c"])[0].text
    assert {"code": "en", "name": "English", "targets": ["de"]} in client.languages()
    detected = client.detect("Ein Hund läuft über die Wiese.")
    assert detected[0]["language"] == "de" and detected[0]["confidence"] > 90
    assert {d["language"] for d in detected} == {"de", "en"}  # the languages this server translates from


def test_source_auto_detects_the_language_among_those_served(server, en_de):
    english = "A man is riding a bicycle down the street."
    answer = post(server, "/translate", q=english, source="auto", target="de").json()
    assert answer["translatedText"] == en_de.translate([english])[0].text
    assert answer["detectedLanguage"]["language"] == "en" and answer["detectedLanguage"]["confidence"] > 90
    listed = post(server, "/translate", q=[english, english], source="auto", target="de").json()
    assert [d["language"] for d in listed["detectedLanguage"]] == ["en", "en"]
    v1 = post(server, "/v1/translate", text=english, source="auto", target="de").json()
    assert v1["source"] == "en"


def test_pages_of_other_origins_may_call_the_api(server):
    preflight = httpx.options(f"{server}/translate", headers={
        "Origin": "https://example.org", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "Content-Type"})
    assert preflight.status_code == 200 and preflight.headers["access-control-allow-origin"] == "*"
    answer = httpx.get(f"{server}/languages", headers={"Origin": "https://example.org"})
    assert answer.headers["access-control-allow-origin"] == "*"


def test_libretranslate_frontend_settings_and_suggest(server):
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert settings["charLimit"] == 4000 and settings["suggestions"] is False
    assert settings["language"]["source"] == {"code": "auto", "name": "Auto Detect"}
    assert set(settings) >= {"frontendTimeout", "apiKeys", "keyRequired", "filesTranslation",
                             "supportedFilesFormat"}
    refused = post(server, "/suggest", q="a", s="b", source="en", target="de")
    assert refused.status_code == 403
    assert refused.json() == {"error": "Suggestions are disabled on this server."}


def test_files_translate_and_download_with_their_structure(server, en_de):
    """LibreTranslate's /translate_file and its download link, for each kind of file: the file
    comes back in its own format, each text translated as the translator translates it."""
    docx = pytest.importorskip("docx")
    import io

    texts = SENTENCES[:3]
    each = [t.text for t in en_de.translate(texts)]
    book = docx.Document()
    for text in texts:
        book.add_paragraph(text, style="Heading 1" if text == texts[0] else None)
    word = io.BytesIO()
    book.save(word)
    files = {
        "notes.txt": ("\n".join(texts).encode(), "\n".join(each)),
        "page.html": (f"<h1>{texts[0]}</h1><p>{texts[1]}</p>".encode(),
                      f"<h1>{each[0]}</h1><p>{each[1]}</p>"),
        "talk.srt": (f"1\n00:00:01,000 --> 00:00:02,000\n{texts[2]}\n".encode(),
                     f"1\n00:00:01,000 --> 00:00:02,000\n{each[2]}\n"),
        "report.docx": (word.getvalue(), None),
    }
    for name, (data, expected) in files.items():
        answer = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                            files={"file": (name, data)}, timeout=HANG_S)
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        assert url.startswith(f"{server}/download_file/") and url.endswith(name)
        download = httpx.get(url)
        assert download.status_code == 200
        assert download.headers["content-disposition"] == f'attachment; filename="{name}"'
        if expected is not None:
            assert download.content.decode() == expected
        else:
            out = docx.Document(io.BytesIO(download.content))
            assert [p.text for p in out.paragraphs] == each
            assert out.paragraphs[0].style.name == "Heading 1"
    refused = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                         files={"file": ("slides.key", b"x")})
    assert refused.status_code == 400
    assert refused.json() == {"error": "Invalid request: file format not supported"}
    broken = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                        files={"file": ("a.docx", b"x")})
    assert broken.status_code == 400 and "a.docx: not a Word .docx file" in broken.json()["error"]
    missing = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"})
    assert missing.json() == {"error": "Invalid request: missing file parameter"}
    assert httpx.get(f"{server}/download_file/nothing.txt").status_code == 404
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert settings["filesTranslation"] and ".docx" in settings["supportedFilesFormat"]


def test_slides_opendocuments_and_ebooks_translate_and_download(server, en_de):
    """/translate_file with the kinds LibreTranslate's argos-translate-files takes beside Word's: each
    comes back as a file its library opens, a one-sentence paragraph translated as the translator
    translates the sentence; settings list them; a bomb is refused with 400 before it is unpacked."""
    pytest.importorskip("pptx")
    pytest.importorskip("odf")
    import io

    from pptx import Presentation

    from tests.text import test_office as made

    alone = en_de.translate(["A dog runs."])[0].text

    def download(name, data):
        answer = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                            files={"file": (name, data)}, timeout=HANG_S)
        assert answer.status_code == 200, answer.text
        return httpx.get(answer.json()["translatedFileUrl"]).content

    deck = Presentation(io.BytesIO(download("talk.pptx", made.slides_file())))
    assert deck.slides[0].shapes.title.text == alone
    from odf import teletype, text
    from odf.opendocument import load

    heading, = load(io.BytesIO(download("report.odt", made.opendocument_text()))).getElementsByType(text.H)
    assert teletype.extractText(heading) == alone
    slides = load(io.BytesIO(download("talk.odp", made.opendocument_presentation())))
    first = slides.getElementsByType(text.P)[0]
    assert teletype.extractText(first) == alone
    import zipfile

    with zipfile.ZipFile(io.BytesIO(download("book.epub", made.epub_file()))) as book:
        assert f"<h1>{alone}</h1>".encode() in book.read("OEBPS/Text/chapter 1.xhtml")
    import pypdf

    page = pypdf.PdfReader(io.BytesIO(download("flyer.pdf", made.pdf_file()))).pages[0]
    heading = en_de.translate(["A dog runs on the beach."])[0].text
    assert " ".join(heading.split()) in " ".join(page.extract_text().split())
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert {".pptx", ".odt", ".odp", ".epub", ".pdf"} <= set(settings["supportedFilesFormat"])
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("content.xml", b"<" + b" " * 40_000_000 + b">")
    refused = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                         files={"file": ("bomb.odt", bomb.getvalue())}, timeout=HANG_S)
    assert refused.status_code == 400 and "bomb.odt: 40,000,002 bytes unpacked" in refused.json()["error"]


@pytest.mark.parametrize("name, fallback", [
    ("日本語.docx", "translated.docx"), ("Отчёт 2026.docx", "2026.docx"),
    ("Café (mai).docx", "Cafe_mai.docx")])
def test_a_file_of_any_name_downloads_under_that_name(server, name, fallback):
    """RFC 6266: an ASCII filename for old clients and the UTF-8 filename* that browsers take; the file
    opens, and is not sniffed into another type."""
    docx = pytest.importorskip("docx")
    import io
    import urllib.parse

    book = docx.Document()
    book.add_paragraph(SENTENCES[0])
    word = io.BytesIO()
    book.save(word)
    answer = httpx.post(f"{server}/translate_file", data={"source": "en", "target": "de"},
                        files={"file": (name, word.getvalue())}, timeout=HANG_S)
    assert answer.status_code == 200, answer.text
    url = answer.json()["translatedFileUrl"]
    assert url.isascii() and url.endswith(fallback)
    download = httpx.get(url)
    assert download.status_code == 200, download.text
    disposition = download.headers["content-disposition"]
    assert disposition.startswith(f'attachment; filename="{fallback}"; filename*=UTF-8\'\'')
    assert urllib.parse.unquote(disposition.split("''", 1)[1]) == name
    assert download.headers["x-content-type-options"] == "nosniff"
    assert len(docx.Document(io.BytesIO(download.content)).paragraphs) == 1


def test_metrics_in_prometheus_format(server):
    post(server, "/v1/translate", text="a b", target="de")
    text = httpx.get(f"{server}/metrics").text
    for name in ("aiayn_requests_total", "aiayn_request_seconds_bucket", "aiayn_batch_sentences_bucket",
                 "aiayn_queue_sentences", "aiayn_output_tokens_per_second", "aiayn_output_tokens_total"):
        assert name in text, name
    assert 'aiayn_requests_total{endpoint="/v1/translate",status="200"}' in text
    assert _metric(server, "aiayn_output_tokens_per_second") > 0


def test_the_web_page_and_its_files_are_served(server):
    page = httpx.get(f"{server}/")
    assert page.status_code == 200 and "<textarea" in page.text and "/static/app.js" in page.text
    script = httpx.get(f"{server}/static/app.js")
    assert script.status_code == 200 and 'post("/v1/translate"' in script.text
    assert "http" not in page.text + script.text  # everything from this server: no CDN
    for name in ("explain.js", "words.js", "explain.css"):  # the Explain tab's files
        assert f"/static/explain/{name}" in page.text
        assert httpx.get(f"{server}/static/explain/{name}").status_code == 200


def _metric(url, name):
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


def test_the_readme_curl_example(server):
    import json
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    body = re.search(r"curl -s localhost:8000/v1/translate .*?-d '(.*?)'", readme, re.S)[1]
    answer = httpx.post(f"{server}/v1/translate", json=json.loads(body), timeout=HANG_S)
    assert answer.status_code == 200
    translations = answer.json()["translations"]
    assert len(translations) == 1 and len(translations[0]["alternatives"]) == 1


def test_a_paragraph_is_translated_sentence_by_sentence_nothing_dropped(server, en_de):
    """LibreTranslate's /translate and /v1/translate cut a text into its sentences, as the translator
    does: all of a paragraph's sentences are translated (it once answered the first alone)."""
    sentences = ["A b c?", "D e f g?", "H i j?"]
    each = [t.text for t in en_de.translate(sentences, split=False)]
    paragraph = f"{sentences[0]} {sentences[1]}\n\n{sentences[2]}"
    expected = f"{each[0]} {each[1]}\n\n{each[2]}"
    libre = post(server, "/translate", q=paragraph, source="en", target="de").json()
    assert libre == {"translatedText": expected}
    v1 = post(server, "/v1/translate", text=paragraph, source="en", target="de").json()["translations"][0]
    assert v1["text"] == expected and [s["text"] for s in v1["sentences"]] == each
    whole = post(server, "/v1/translate", text=paragraph, source="en", target="de", split=False).json()
    assert whole["translations"][0]["text"] == en_de.translate([paragraph], split=False)[0].text
    assert "sentences" not in whole["translations"][0]
