"""A glossary per request: `/v1/translate` and LibreTranslate's `/translate` (aiayn's extension field)
translate each term as the request says, on the model that reverses letters ("a b c" -> "c b a")."""

import httpx
import pytest

from tests.conftest import HANG_S

from .conftest import serving


@pytest.fixture(scope="module")
def server(en_de):
    with serving([en_de]) as url:
        yield url


def post(url, path, **json):
    return httpx.post(f"{url}{path}", json=json, timeout=HANG_S)


def test_v1_translate_applies_the_requests_glossary_to_the_sentences_with_its_terms(server):
    texts = ["a b c", "d e f"]
    plain = post(server, "/v1/translate", text=texts, source="en", target="de").json()["translations"]
    asked = post(server, "/v1/translate", text=texts, source="en", target="de", glossary={"b": "q r"})
    found = asked.json()["translations"]
    assert asked.status_code == 200 and "q r" in found[0]["text"] and "q" not in plain[0]["text"]
    assert found[1]["text"] == plain[1]["text"]  # no term, translated as before


def test_libretranslate_translate_takes_a_glossary_and_ignores_its_absence(server):
    asked = post(server, "/translate", q="a b c", source="en", target="de", glossary={"c": "w"})
    assert asked.status_code == 200 and "w" in asked.json()["translatedText"].split()
    plain = post(server, "/translate", q="a b c", source="en", target="de")
    assert plain.json()["translatedText"] == "c b a"


@pytest.mark.parametrize("fields, status, message", [
    ({"glossary": {"b": " "}}, 422, "both terms must have text"),
    ({"glossary": {"b": "q"}, "beam_size": 1}, 400, "a glossary needs beam search"),
])
def test_a_glossary_the_server_cannot_apply_is_refused_with_the_reason(server, fields, status, message):
    answer = post(server, "/v1/translate", text="a b c", source="en", target="de", **fields)
    assert answer.status_code == status and message in answer.text
