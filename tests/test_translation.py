"""The public translation API: one loader for every format, one Translator."""

import subprocess
import sys

import pytest
import torch

import aiayn
from aiayn import checkpoint
from aiayn.config import ConfigError
from aiayn.decoding.translator import translate
from aiayn.translation import load_model, load_translator, model_format

SENTENCES = ["a b c", "", "d e f g h", "q r"]


@pytest.fixture(scope="module")
def formats(trained_run, tmp_path_factory):
    """The trained run as an aiayn run directory, a Marian directory and a CTranslate2 export."""
    from aiayn.interop.ctranslate2 import export
    from aiayn.interop.marian import save_marian

    root = tmp_path_factory.mktemp("formats")
    loaded = load_model(trained_run)
    save_marian(loaded.model, loaded.tokenizer, root / "marian")
    export(loaded.model, loaded.tokenizer, root / "ct2")
    return {"aiayn": trained_run, "marian": root / "marian", "ctranslate2": root / "ct2"}


def test_the_format_of_a_path_is_recognised(formats, tmp_path):
    assert {kind: model_format(path) for kind, path in formats.items()} == {
        "aiayn": "aiayn", "marian": "marian", "ctranslate2": "ctranslate2"}
    assert model_format(checkpoint.resolve(formats["aiayn"])) == "aiayn"
    with pytest.raises(checkpoint.CheckpointError, match="not a model aiayn can read"):
        model_format(tmp_path)


@pytest.mark.parametrize("kind", ["aiayn", "marian", "ctranslate2"])
def test_every_format_translates_like_the_model_itself(formats, kind):
    loaded = load_model(formats["aiayn"])
    search = {"beam_size": 1, "max_output_len": 12}  # CTranslate2 caps lengths per batch, aiayn per sentence
    expected = [n[0].text for n in translate(loaded.model.eval(), loaded.tokenizer, SENTENCES,
                                             aiayn.DecodeConfig(**search), progress=False)]
    translator = aiayn.load_translator(formats[kind], device="cpu", **search)
    assert [t.text for t in translator.translate(SENTENCES)] == expected
    assert translator.translate(SENTENCES)[1].text == ""
    assert translator.description.startswith("ctranslate2" if kind == "ctranslate2" else "pytorch float32")


@pytest.mark.parametrize("kind", ["aiayn", "marian", "ctranslate2"])
def test_the_one_line_example_works_for_every_format(formats, kind):
    """Acceptance: `aiayn.load_translator(PATH).translate([...])[0].text` in a fresh process."""
    search = "beam_size=1, max_output_len=12"  # greedy: CTranslate2's beam search differs in details
    code = (f"import aiayn; t = aiayn.load_translator({str(formats[kind])!r}, {search}); "
            "print(t.translate(['a b c'])[0].text)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    expected = load_translator(formats["aiayn"], beam_size=1, max_output_len=12).translate(["a b c"])[0].text
    assert out.strip() == expected


def test_options_per_call_override_the_defaults_and_nbest_gives_alternatives(trained_run):
    translator = load_translator(trained_run, beam_size=1)
    assert translator.defaults.beam_size == 1
    best, = translator.translate(["a b c d"], beam_size=3, nbest=3)
    assert len(best.alternatives) == 2
    scores = [t.score for t in (best, *best.alternatives)]
    assert scores == sorted(scores, reverse=True)
    assert translator.translate(["a b c d"])[0].alternatives == []


def test_a_stream_translates_like_a_list_and_reads_only_what_it_needs(trained_run):
    translator = load_translator(trained_run)
    lines = [" ".join("abcdefgh"[(i + j) % 8] for j in range(1 + i % 6)) for i in range(50)]
    read = []

    def source():
        for line in lines:
            read.append(line)
            yield line

    stream = translator.translate_stream(source(), chunk=8)
    first = next(stream)
    assert len(read) == 8  # one chunk, not the whole input
    assert [first.text, *(t.text for t in stream)] == [t.text for t in translator.translate(lines)]


def test_attention_weights_come_on_request(trained_run):
    translator = load_translator(trained_run)
    plain, = translator.translate(["a b c"])
    with_maps, = translator.translate(["a b c"], attention=True)
    assert plain.attention is None and with_maps.text == plain.text
    view = with_maps.attention
    assert view.sentence == "a b c" and view.translation == plain.text
    queries, keys = view.labels("cross")
    assert view.maps["cross"][0].shape == (4, len(queries), len(keys))
    assert torch.allclose(view.maps["cross"][0].sum(-1), torch.ones(4, len(queries)), atol=1e-5)


def test_mistakes_are_clear_errors(formats):
    translator = load_translator(formats["aiayn"])
    with pytest.raises(ConfigError, match="unknown DecodeConfig option.*beam_width"):
        translator.translate(["a"], beam_width=2)
    with pytest.raises(TypeError, match="a list of sentences"):
        translator.translate("a b c")
    with pytest.raises(ConfigError, match="is not a CTranslate2 export"):
        load_translator(formats["aiayn"], engine="ctranslate2")
    with pytest.raises(ConfigError, match="is a CTranslate2 export"):
        load_translator(formats["ctranslate2"], engine="pytorch")
    with pytest.raises(ConfigError, match="--int8 is for --engine pytorch"):
        load_translator(formats["ctranslate2"], int8=True)
    with pytest.raises(ConfigError, match="attention weights come from the PyTorch model"):
        load_translator(formats["ctranslate2"]).translate(["a"], attention=True)
