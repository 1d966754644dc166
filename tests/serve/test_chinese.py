"""Chinese on the LibreTranslate API as LibreTranslate has it: a model's `zh` is `zh-Hans` in what
the server answers (/languages, /detect, detectedLanguage), and `zh`, `zh-Hans` (any case) and, with
no traditional model served, `zh-Hant` and `zt` name it in requests."""

import httpx
import pytest

from aiayn.cli import main
from aiayn.serve.libretranslate import iso, model_code
from aiayn.translation import load_translator
from tests.conftest import HANG_S

from .conftest import serving

CHINESE = "我们今天下午一起去公园散步吧。"


def copy_run(tmp_path_factory, src: str, tgt: str):
    """A tiny model src->tgt (copying letters), trained for a few updates."""
    run = tmp_path_factory.mktemp("runs") / f"{src}{tgt}"
    assert main(["train", "--preset", "tiny", "--train", "synthetic:copy", "--src-lang", src, "--tgt-lang",
                 tgt, "--out", str(run), "--max-steps", "4", "--batch-tokens", "512", "--valid-every", "0",
                 "--bleu-every", "0", "--threads", "1"]) == 0
    return load_translator(run, device="cpu")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return copy_run(tmp_path_factory, "en", "zh"), copy_run(tmp_path_factory, "zh", "en")


@pytest.fixture(scope="module")
def server(models):
    with serving(list(models), max_wait_ms=20) as url:
        yield url


def post(url, path, **json):
    return httpx.post(f"{url}{path}", json=json, timeout=HANG_S)


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
