"""The public translation API: one loader for every format, one Translator."""

import random
import subprocess
import sys

import pytest
import torch

import aiayn
from aiayn import checkpoint
from aiayn.config import ConfigError
from aiayn.data.corpora import load_corpus
from aiayn.decoding import translator
from aiayn.decoding.translator import translate
from aiayn.translation import CONFIGS, FIRST_CHUNK, load_model, load_translator, model_format

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


def test_a_model_in_training_mode_translates_without_dropout_and_is_left_in_it(trained_run, monkeypatch):
    model, tokenizer = (loaded := load_model(trained_run)).model.eval(), loaded.tokenizer
    config = aiayn.DecodeConfig(beam_size=2)
    expected = [n[0].text for n in translate(model, tokenizer, SENTENCES, config, progress=False)]
    model.train()
    assert [n[0].text for n in translate(model, tokenizer, SENTENCES, config, progress=False)] == expected
    assert all(m.training for m in model.modules())

    def failing(model, *args):
        assert not model.training
        raise RuntimeError("the search failed")

    monkeypatch.setattr(translator, "search", failing)
    with pytest.raises(RuntimeError, match="search failed"):  # a failed search leaves the mode as it was
        translate(model, tokenizer, SENTENCES, config, progress=False)
    assert all(m.training for m in model.modules())
    monkeypatch.undo()
    model.eval()
    translate(model, tokenizer, SENTENCES, config, progress=False)
    assert not any(m.training for m in model.modules())


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


def test_settings_checked_once_come_back_and_wrong_ones_are_refused_every_time(trained_run):
    translator = load_translator(trained_run)
    first = translator.config(beam_size=2, format="text")
    assert (first.beam_size, first.format) == (2, "text")
    assert translator.config(format="text", beam_size=2) is first  # kept: not built and checked again
    for _ in range(2):  # a wrong setting is never kept
        with pytest.raises(ConfigError, match="beam_size=0"):
            translator.config(beam_size=0)
    translator.config(beam_size=1)
    with pytest.raises(ConfigError, match="beam_size=True must be an integer"):  # True == 1, not kept for it
        translator.config(beam_size=True)
    translator.defaults = translator.config(length_penalty=1.5)  # new defaults: settings built on them
    assert translator.config(beam_size=2, format="text").length_penalty == 1.5
    with pytest.raises(ConfigError, match="beam_size=\\[2\\] must be"):  # not a key: checked anyway
        translator.config(beam_size=[2])
    for alpha in range(200):  # kept settings are bounded
        translator.config(length_penalty=alpha / 10)
    assert len(translator._configs) <= CONFIGS


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


def test_a_stream_starts_with_a_small_chunk_then_whole_chunks(trained_run):
    """The first translations come after FIRST_CHUNK lines, not a whole chunk; whole chunks follow."""
    translator = load_translator(trained_run)
    lines = [" ".join("abcdefgh"[(i + j) % 8] for j in range(1 + i % 6)) for i in range(7 * FIRST_CHUNK)]
    read = []

    def source():
        for line in lines:
            read.append(line)
            yield line

    seen = [len(read) for _ in translator.translate_stream(source(), chunk=4 * FIRST_CHUNK)]
    n = FIRST_CHUNK
    assert seen == [n] * n + [5 * n] * (4 * n) + [7 * n] * (2 * n)


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


def test_attention_of_many_sentences_in_batches_is_each_ones_own(trained_run):
    """`attention_views` pads a batch: each view, cut to its sentence, holds the weights that one
    sentence run alone gets (`attention_view`), every kind, layer and head."""
    from aiayn.translation import attention_view
    from aiayn.translation.attention import attention_views

    translator = load_translator(trained_run)
    sentences = ["a b c", "d e f g h i j", "q", "k l m n"]
    pairs = list(zip(sentences, translator.translate(sentences), strict=True))
    together = attention_views(translator.model, translator.tokenizer, pairs, batch=3)
    decoder_only = attention_views(translator.model, translator.tokenizer, pairs, batch=3, encoder=False)
    for view, full in zip(decoder_only, together, strict=True):
        assert set(view.maps) == {"decoder", "cross"}
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(view.maps["cross"], full.maps["cross"],
                                                                      strict=True))
    for (sentence, translation), view in zip(pairs, together, strict=True):
        alone = attention_view(translator.model, translator.tokenizer, sentence, translation)
        labels = (view.source, view.target_in, view.target_out)
        assert labels == (alone.source, alone.target_in, alone.target_out)
        for kind, maps in alone.maps.items():
            for mine, its in zip(view.maps[kind], maps, strict=True):
                assert mine.shape == its.shape and torch.allclose(mine, its, atol=1e-5), kind


def test_mistakes_are_clear_errors(formats):
    translator = load_translator(formats["aiayn"])
    with pytest.raises(ConfigError, match="unknown DecodeConfig option.*beam_width"):
        translator.translate(["a"], beam_width=2)
    with pytest.raises(TypeError, match="a list of texts"):
        translator.translate("a b c")
    with pytest.raises(ConfigError, match="is not a CTranslate2 export"):
        load_translator(formats["aiayn"], engine="ctranslate2")
    with pytest.raises(ConfigError, match="is a CTranslate2 export"):
        load_translator(formats["ctranslate2"], engine="pytorch")
    with pytest.raises(ConfigError, match="--int8 is for --engine pytorch"):
        load_translator(formats["ctranslate2"], int8=True)
    with pytest.raises(ConfigError, match="attention weights come from the PyTorch model"):
        load_translator(formats["ctranslate2"]).translate(["a"], attention=True)


@pytest.fixture(scope="module")
def reverser(trained_run):
    return load_translator(trained_run, device="cpu")


def reversed_letters(sentence):
    return " ".join(reversed(sentence.split()))


VALID = [" ".join(random.Random(i).choices("abcdefghijklmnopqrstuvwxyz", k=3 + i % 7)) for i in range(60)]


def in_threes(items, template):
    return [template.format(*items[i:i + 3]) for i in range(0, len(items) - 2, 3)]


def test_lines_and_paragraphs_translate_as_their_sentences_one_by_one(reverser):
    """Nothing dropped: each line of a text is translated, and the text's line breaks are kept."""
    sentences = load_corpus("synthetic:reverse:val", "", "").source[:201]
    one_by_one = [t.text for t in reverser.translate(sentences, beam_size=1)]
    right = sum(o == reversed_letters(s) for o, s in zip(one_by_one, sentences, strict=True))
    assert right >= 160  # the fixture checked it: the outputs are real translations
    texts = reverser.translate(in_threes(sentences, "{}\n{}\n\n{}"), beam_size=1)
    assert [t.text for t in texts] == in_threes(one_by_one, "{}\n{}\n\n{}")


def test_a_paragraph_translates_as_its_sentences_one_by_one(reverser):
    """The paragraph check on the test model: sentences ended by "?" (the model has seen neither
    capitals nor punctuation, so its outputs are arbitrary; the equality holds whatever they are)."""
    sentences = [s[0].upper() + s[1:] + "?" for s in VALID]
    paragraphs = [" ".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]
    assert [s.layout.sentences for s in reverser.segment(paragraphs)] == [
        sentences[i:i + 3] for i in range(0, len(sentences), 3)]
    one_by_one = [t.text for t in reverser.translate(sentences, split=False)]
    expected = [" ".join(one_by_one[i:i + 3]) for i in range(0, len(one_by_one), 3)]
    assert [t.text for t in reverser.translate(paragraphs)] == expected


def test_a_text_of_several_sentences_adds_up_its_sentences(reverser):
    text = f"{VALID[0]}\n{VALID[1]}"
    whole, = reverser.translate([text], beam_size=3, nbest=2)
    first, second = reverser.translate(VALID[:2], beam_size=3, nbest=2)
    assert [s.text for s in whole.sentences] == [first.text, second.text]
    assert whole.log_prob == pytest.approx(first.log_prob + second.log_prob)
    assert whole.score == pytest.approx(first.score + second.score)
    assert whole.tokens == first.tokens + second.tokens
    alternative = f"{first.alternatives[0].text}\n{second.alternatives[0].text}"
    assert [a.text for a in whole.alternatives] == [alternative]  # each sentence's next best, joined
    with_maps, = reverser.translate([text], attention=True)
    assert with_maps.attention is None  # each sentence has its own
    assert [s.attention.sentence for s in with_maps.sentences] == VALID[:2]


def forced_log_probs(translator, sentence, tokens):
    """The model's log-probability of each of `tokens` then eos after `sentence`, by one decoder run."""
    model, tok = translator.model, translator.tokenizer
    src = torch.tensor([tok.encode([sentence])[0] + [tok.eos_id]])
    tgt = torch.tensor([[model.config.bos_id, *tokens]])
    with torch.no_grad():
        log_probs = model.log_probs(model.decode(tgt, model.encode(src), src))[0]  # (len + 1, V)
    return [log_probs[i, t].item() for i, t in enumerate([*tokens, tok.eos_id])]


@pytest.mark.parametrize("beam_size", [1, 4])
def test_confidence_is_the_log_probability_per_token_of_what_was_found(reverser, beam_size):
    """Checked against the model's own log-probabilities of the output, computed apart from the search;
    a text of several sentences pools their tokens; a text without words has none."""
    first, second = reverser.translate(VALID[:2], beam_size=beam_size)
    for sentence, t in ((VALID[0], first), (VALID[1], second)):
        forced = forced_log_probs(reverser, sentence, t.tokens)
        assert t.confidence == pytest.approx(sum(forced) / len(forced), abs=1e-4)
        assert t.confidence < 0
    whole, = reverser.translate([f"{VALID[0]} \n{VALID[1]}"], beam_size=beam_size)
    both = [*forced_log_probs(reverser, VALID[0], first.tokens),
            *forced_log_probs(reverser, VALID[1], second.tokens)]
    assert whole.confidence == pytest.approx(sum(both) / len(both), abs=1e-4)
    assert [s.confidence for s in whole.sentences] == pytest.approx([first.confidence, second.confidence])
    assert reverser.translate([" \n "])[0].confidence is None


def test_whitespace_around_a_text_is_kept_and_a_text_without_words_is_empty(reverser):
    assert [t.text for t in reverser.translate(["  a b c \n", "", " \n "])] == ["  c b a \n", "", ""]
    assert reverser.translate(["a b c"])[0].sentences == []


def test_a_sentence_too_long_for_the_model_is_cut_not_dropped(reverser):
    """Over max_source_len tokens, a sentence is cut at its best boundaries into pieces that fit,
    each translated; without a limit of its own, the model's: the longest it was trained on."""
    sentence = "a b c d e, f g h i j; k l m n o p"
    segments, = reverser.segment([sentence], max_source_len=6)  # 18 tokens ("," and ";" one each)
    assert segments.layout.sentences == ["a b c d e,", "f g h i j;", "k l m n o p"]  # first ";", then ","
    segments, = reverser.segment([sentence], max_source_len=5)
    assert segments.layout.sentences == ["a b c", "d e,", "f g h", "i j;", "k l m", "n o p"]
    pieces = [t.text for t in reverser.translate(segments.layout.sentences, split=False)]
    assert reverser.translate([sentence], max_source_len=5)[0].text == " ".join(pieces)
    assert reverser.max_source_len == 256  # aiayn train's --max-len
    assert len(reverser.segment([" ".join(["a"] * 300)])[0].ids) == 2


def test_without_splitting_a_text_is_one_sentence(reverser):
    text = f"{VALID[0]}\n{VALID[1]}"
    assert reverser.segment([text], split=False)[0].layout.sentences == [text]
    assert reverser.translate([text], split=False)[0].sentences == []
