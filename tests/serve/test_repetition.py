"""The rules against repetition loops through the server: `/v1/translate`'s fields and the same
names as extension fields of LibreTranslate's `/translate` (JSON or a form), checked on a model made
to loop."""

import httpx
import pytest
import torch

from aiayn.translation import load_translator

from .conftest import serving
from .test_server import post

TEXT = "a b c"


@pytest.fixture(scope="module")
def looping(trained_run):
    """The letter-reversing model with its output bias set so that it says "x x x ..." to its length
    limit, then "y" as the next best: a weak model's loop, whatever its input."""
    translator = load_translator(trained_run, device="cpu")
    x, y = (translator.tokenizer.encode([letter])[0][-1] for letter in "xy")
    model = translator.model
    with torch.no_grad():
        model.output_proj.bias[:] = 0.0
        model.output_proj.bias[x], model.output_proj.bias[y] = 1000.0, 900.0
        model.output_proj.bias[model.config.eos_id] = -1000.0
    return translator, x, y


@pytest.fixture(scope="module")
def server(looping):
    with serving([looping[0]], max_wait_ms=20) as url:
        yield url


def test_the_looping_model_loops_and_the_rules_stop_it(looping):
    translator, x, y = looping
    plain = translator.translate([TEXT], max_output_len=12, no_repeat_ngram_size=0)[0]
    assert plain.tokens == [x] * 12
    default = translator.translate([TEXT], max_output_len=12)[0]  # no 3-gram twice
    grams = [tuple(default.tokens[i:i + 3]) for i in range(len(default.tokens) - 2)]
    assert default.tokens[:4] == [x, x, x, y] and len(set(grams)) == len(grams)
    penalised = translator.translate([TEXT], max_output_len=12, repetition_penalty=2.0,
                                     no_repeat_ngram_size=0)[0]
    assert penalised.tokens[:3] == [x, y, x]  # x 1000 -> 500 after once: y (900), then x (500 > 450) again
    # No token twice: x and y once each (any other token costs about 900 more than either), in an
    # order that the model's own logits decide (the scores are not renormalised after the ban).
    once = translator.translate([TEXT], max_output_len=12, no_repeat_ngram_size=1)[0]
    assert {x, y} <= set(once.tokens) and len(set(once.tokens)) == len(once.tokens) == 12


@pytest.mark.parametrize("rules", [{"repetition_penalty": 2.0}, {"no_repeat_ngram_size": 2},
                                   {"repetition_penalty": 1.5, "no_repeat_ngram_size": 3}])
def test_v1_and_libretranslate_apply_the_rules_asked_for(server, looping, rules):
    translator = looping[0]
    expected = translator.translate([TEXT], **rules)[0].text
    assert expected != translator.translate([TEXT])[0].text
    v1 = post(server, "/v1/translate", text=TEXT, **rules).json()
    assert v1["translations"][0]["text"] == expected
    lt = post(server, "/translate", q=TEXT, source="en", target="de", **rules).json()
    assert lt["translatedText"] == expected
    form = httpx.post(f"{server}/translate", data={"q": TEXT, "source": "en", "target": "de",
                                                   **{k: str(v) for k, v in rules.items()}}).json()
    assert form["translatedText"] == expected


def test_bad_values_are_refused_with_the_fields_name(server):
    bad = httpx.post(f"{server}/translate", data={"q": TEXT, "source": "en", "target": "de",
                                                  "repetition_penalty": "lots"})
    assert bad.status_code == 400 and bad.json() == {"error": "Invalid request: repetition_penalty parameter "
                                                              "is not a number"}
    zero = post(server, "/translate", q=TEXT, source="en", target="de", repetition_penalty=0)
    assert zero.status_code == 422 and "repetition_penalty" in zero.json()["error"]
    negative = post(server, "/v1/translate", text=TEXT, no_repeat_ngram_size=-1)
    assert negative.status_code == 422 and "no_repeat_ngram_size" in negative.text
