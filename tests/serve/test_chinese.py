"""Chinese on the LibreTranslate API as LibreTranslate has it: a model's `zh` is `zh-Hans` in what
the server answers (/languages, /detect, detectedLanguage), and `zh`, `zh-Hans` (any case) and, with
no traditional model served, `zh-Hant` and `zt` name it in requests."""

import httpx
import pytest

from aiayn.serve.libretranslate import iso, model_code
from aiayn.translation import load_translator

from .conftest import copy_run, serving
from .test_server import post

CHINESE = "我们今天下午一起去公园散步吧。"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tuple(load_translator(copy_run(tmp_path_factory, src, tgt, steps=4), device="cpu")
                 for src, tgt in (("en", "zh"), ("zh", "en")))


@pytest.fixture(scope="module")
def server(models):
    with serving(list(models), max_wait_ms=20) as url:
        yield url


def test_codes_as_libretranslate_maps_them():
    assert [iso(c) for c in ("zh", "zt", "pb", "de")] == ["zh-Hans", "zh-Hant", "pt-BR", "de"]
    assert [model_code(c, {"zh", "en"}) for c in ("zh", "zh-Hans", "ZH-HANS", "zh-Hant", "zt", "en")] == \
        ["zh", "zh", "zh", "zh", "zh", "en"]
    assert model_code("zh-Hant", {"zh", "zt"}) == "zt" and model_code("zh", {"zt"}) == "zt"
    assert model_code("ja", {"zh"}) == "ja"  # not served: left for the error to name


def test_languages_and_settings_say_zh_hans(server):
    languages = httpx.get(f"{server}/languages").json()
    assert {"code": "zh-Hans", "name": "Chinese", "targets": ["en"]} in languages
    assert {"code": "en", "name": "English", "targets": ["zh-Hans"]} in languages
    settings = httpx.get(f"{server}/frontend/settings").json()
    assert settings["language"]["target"]["code"] in ("zh-Hans", "en")


def test_detect_answers_zh_hans(server):
    detected = post(server, "/detect", q=CHINESE).json()
    assert detected[0]["language"] == "zh-Hans" and detected[0]["confidence"] > 90
    assert post(server, "/detect", q="A man is riding a bicycle.").json()[0]["language"] == "en"
    traditional = post(server, "/detect", q="我們今天下午一起去公園散步吧。").json()
    assert traditional[0]["language"] == "zh-Hans"  # one Chinese to lingua: served by the zh model


def test_zh_and_zh_hans_are_served_both_ways(server, models):
    en_zh, zh_en = models
    into = {code: post(server, "/translate", q="a b c", source="en", target=code)
            for code in ("zh", "zh-Hans", "zh-hans", "zh-Hant")}
    expected = en_zh.translate(["a b c"])[0].text
    assert all(r.status_code == 200 and r.json()["translatedText"] == expected for r in into.values()), into
    from_ = {code: post(server, "/translate", q=CHINESE, source=code, target="en")
             for code in ("zh", "zh-Hans", "zt", "auto")}
    expected = zh_en.translate([CHINESE])[0].text
    assert all(r.status_code == 200 and r.json()["translatedText"] == expected for r in from_.values()), from_
    assert from_["auto"].json()["detectedLanguage"]["language"] == "zh-Hans"
    refused = post(server, "/translate", q="a b c", source="en", target="ja")
    assert refused.status_code == 400 and "en->ja" in refused.json()["error"]


def test_the_libretranslatepy_client_translates_chinese(server, models):
    """LibreTranslate's own client, as an application calls it: form-encoded Chinese, codes as listed."""
    libretranslatepy = pytest.importorskip("libretranslatepy")
    client = libretranslatepy.LibreTranslateAPI(server)
    en_zh, zh_en = models
    listed = {language["code"] for language in client.languages()}
    assert listed == {"en", "zh-Hans"}
    assert client.translate(CHINESE, "zh-Hans", "en") == zh_en.translate([CHINESE])[0].text
    assert client.translate(CHINESE, "zh", "en") == zh_en.translate([CHINESE])[0].text
    assert client.translate("a b c", "en", "zh-Hans") == en_zh.translate(["a b c"])[0].text
    assert client.detect(CHINESE)[0]["language"] == "zh-Hans"
