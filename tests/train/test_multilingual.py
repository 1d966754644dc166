"""One model, several directions (`aiayn train --pairs`): one vocabulary with a piece per language,
the target language's piece before every source sentence, the directions sampled by temperature
and validated one by one."""

import importlib.util
import json

import numpy as np
import pytest
import torch

from aiayn import checkpoint
from aiayn.cli import main
from aiayn.config import ConfigError
from aiayn.data import multi30k
from aiayn.data.batching import TokenizedCorpus, collate
from aiayn.data.multilingual import Direction, told
from aiayn.data.readers import DataError
from aiayn.tokenizer import Tokenizer
from aiayn.translation import load_translator
from tests.conftest import multiway_files

TINY = ["--preset", "tiny", "--vocab-size", "700", "--batch-tokens", "1024", "--warmup-steps", "20",
        "--save-every", "0", "--threads", "1"]


@pytest.fixture
def small_valid(data_dir, tmp_path):
    """The first 20 captions of Multi30k val in en, de and cs: PREFIX.en, PREFIX.de, PREFIX.cs."""
    return str(multiway_files(tmp_path / "valid"))


SOURCE_TOLD = ["--language-token", "source"]  # >>xx<< before the source, as OPUS-MT


def records(run, kind):
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == kind]


def test_a_multilingual_run_learns_one_vocabulary_and_validates_each_direction(small_valid, tmp_path,
                                                                                capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", "multi30k:val", "--valid", small_valid, "--pairs",
                 "en-de,de-en,en-cs", "--sampling-temperature", "5", "--max-steps", "4", "--valid-every", "4",
                 "--bleu-every", "4", "--bleu-beam", "1", "--out", str(run)]) == 0
    out = capsys.readouterr().out
    assert "mixing 3 corpora: 3,042 pairs an epoch (sampling temperature 5)" in out
    assert "multi30k:val en-cs: 1,014 pairs" in out
    ck = checkpoint.load(checkpoint.resolve(run))
    assert ck.data.pairs == ("en-de", "de-en", "en-cs")
    assert ck.tokenizer.languages() == ["cs", "de", "en"]  # one piece per language, >>xx<<
    valid, bleu = records(run, "valid")[-1], records(run, "bleu")[-1]
    assert set(valid["directions"]) == set(bleu["directions"]) == {"en-de", "de-en", "en-cs"}
    tokens = sum(d["tokens"] for d in valid["directions"].values())
    assert valid["tokens"] == tokens  # the pooled loss is over every direction's tokens
    pooled = sum(d["loss"] * d["tokens"] for d in valid["directions"].values()) / tokens
    assert valid["loss"] == pytest.approx(pooled)
    assert bleu["bleu"] == pytest.approx(sum(d["bleu"] for d in bleu["directions"].values()) / 3)


def test_a_multilingual_run_resumes_with_the_command_that_started_it(small_valid, tmp_path, capsys):
    """Its languages are its first direction's (de-en here, whatever --src-lang and --tgt-lang
    say), as the run saved them: repeating --pairs with --resume is the same run, and another
    first direction is not."""
    run = tmp_path / "run"
    started = ["train", *TINY, "--train", small_valid, "--valid", small_valid, "--src-lang", "en",
               "--tgt-lang", "de", "--pairs", "de-en,en-cs", "--out", str(run)]
    assert main([*started, "--max-steps", "1"]) == 0
    assert main([*started, "--max-steps", "2", "--resume"]) == 0
    assert checkpoint.resolve(run).name == "step_00000002"
    capsys.readouterr()
    assert main([*started[:-4], "--pairs", "en-cs,de-en", "--out", str(run), "--max-steps", "3",
                 "--resume"]) == 2
    assert "cannot change pairs (the run has de-en,en-cs, asked en-cs,de-en)" in capsys.readouterr().err


def test_each_source_sentence_starts_with_its_target_languages_piece():
    tokenizer = Tokenizer.learn_languages({"en": ["a dog runs"] * 20, "de": ["ein hund rennt"] * 20}, 300)
    corpus = TokenizedCorpus(tokenizer.encode(["a dog", "a cat"]), tokenizer.encode(["ein hund", "eine"]))
    into_german = told(corpus, tokenizer, Direction("en", "de"))
    de = tokenizer.language_id("de")
    assert [s[0] for s in into_german.source] == [de, de] and into_german.target == corpus.target
    assert [s[1:] for s in into_german.source] == corpus.source
    with pytest.raises(DataError, match="no piece >>fr<< to ask for en-fr"):
        told(corpus, tokenizer, Direction("en", "fr"))


@pytest.mark.parametrize("flags, message", [
    (["--pairs", "en-en"], "'en-en' is not a direction SRC-TGT"),
    (["--pairs", "en-de,en-de"], "names a direction twice"),
    (["--pairs", "en-de,de-en", "--vocabulary", "separate", "--no-share-embeddings"],
     "--pairs learns one vocabulary over all the languages"),
    (["--pairs", "en-de", "--train", "multi30k:val", "--train", "multi30k:val", "--train-weights", "1,1"],
     "with --pairs the directions are sampled by --sampling-temperature"),
])
def test_a_multilingual_option_that_cannot_work_is_a_one_line_error(data_dir, tmp_path, capsys, flags,
                                                                    message):
    out = tmp_path / "run"
    assert main(["train", *TINY, *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_a_multilingual_model_translates_the_direction_asked_with_its_piece_first(small_valid, tmp_path,
                                                                                  capsys):
    """The direction's piece reaches the encoder before every sentence; another direction of the
    same model puts its own; a direction it lacks is a one-line error naming those it has."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 *SOURCE_TOLD, "--max-steps", "1", "--out", str(run)]) == 0
    translator = load_translator(run, device="cpu", beam_size=1, max_output_len=3)
    assert (translator.src_lang, translator.tgt_lang, translator.pairs) == ("en", "de", ("en-de", "en-cs"))
    seen = []
    encode = translator.model.encode
    translator.model.encode = lambda src, *a, **k: seen.append(src[:, 0].tolist()) or encode(src, *a, **k)
    translator.translate(["A dog runs.", "Two cats sleep."])
    czech = translator.towards("en", "cs")
    czech.translate(["A dog runs."])
    tokenizer = translator.tokenizer
    assert seen == [[tokenizer.language_id("de")] * 2, [tokenizer.language_id("cs")]]
    view = czech.translate(["A dog runs."], attention=True)[0].attention
    assert view.prefix == 1 and view.source[0] == ">>cs<<" and view.source[1:-1] == tokenizer.pieces(
        tokenizer.encode(["A dog runs."])[0], "source")
    with pytest.raises(ConfigError, match="has no direction en-fr; it has en-de, en-cs"):
        translator.towards("en", "fr")
    capsys.readouterr()
    assert main(["translate", str(run), "--tgt-lang", "fr", "A dog runs."]) == 2
    assert "has no direction en-fr; it has en-de, en-cs" in capsys.readouterr().err
    assert main(["translate", str(run), "--tgt-lang", "cs", "--beam-size", "1", "A dog runs."]) == 0


def test_evaluate_scores_every_direction_of_a_multilingual_model_or_the_one_asked(small_valid, tmp_path,
                                                                                 capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 "--max-steps", "1", "--out", str(run)]) == 0
    scores, output = tmp_path / "scores.json", tmp_path / "hyp"
    assert main(["evaluate", str(run), "--test", small_valid, "--beam-size", "1", "--max-output-len", "3",
                 "--scores", str(scores), "--output", str(output)]) == 0
    record = json.loads(scores.read_text())
    assert set(record["directions"]) == {"en-de", "en-cs"}
    assert record["bleu"] == pytest.approx(sum(d["bleu"] for d in record["directions"].values()) / 2)
    assert all(output.with_suffix(f".{pair}").is_file() for pair in ("en-de", "en-cs"))
    assert main(["evaluate", str(run), "--test", small_valid, "--tgt-lang", "cs", "--beam-size", "1",
                 "--max-output-len", "3", "--scores", str(scores)]) == 0
    assert json.loads(scores.read_text())["languages"] == "en-cs"


def test_each_direction_keeps_the_search_settings_swept_on_it(small_valid, tmp_path, capsys):
    """A sweep of one direction keeps its choice beside the other directions'; translating in a
    direction uses its own (else the model's), and an option given at loading still wins."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs",
                 "en-de,en-cs,de-en", "--max-steps", "1", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(run), "--sweep", "--test", small_valid, "--src-lang", "en",
                 "--tgt-lang", "cs", "--sweep-beams", "1", "--sweep-penalties", "0.6",
                 "--max-output-len", "3"]) == 0
    assert "used when translating en-cs with this model" in capsys.readouterr().out
    kept = checkpoint.resolve(run)
    checkpoint.save_decoding(kept, {"beam_size": 2, "length_penalty": 1.4}, {"on": "val"}, "en-de")
    saved = json.loads((kept / "decoding.json").read_text())
    assert "beam_size" not in saved  # none for the whole model
    assert saved["directions"]["en-cs"]["beam_size"] == 1 and saved["directions"]["en-cs"]["chosen"]["trials"]
    assert saved["directions"]["en-de"]["beam_size"] == 2  # the sweep's en-cs kept beside it
    translator = load_translator(run, device="cpu")  # en-de, the first direction
    czech = translator.towards("en", "cs")
    assert (translator.defaults.beam_size, translator.defaults.length_penalty) == (2, 1.4)
    assert (czech.defaults.beam_size, czech.defaults.length_penalty) == (1, 0.6)
    assert czech.towards("en", "de").defaults == translator.defaults
    assert czech.towards("de", "en").defaults.beam_size == 4  # never swept: the model's (none kept: 4)
    assert load_translator(run, device="cpu", tgt_lang="cs").defaults.beam_size == 1
    told = load_translator(run, device="cpu", beam_size=5, tgt_lang="cs")
    assert (told.defaults.beam_size, told.defaults.length_penalty) == (5, 0.6)
    assert told.towards("en", "de").defaults.beam_size == 5
    checkpoint.save_decoding(kept, {"beam_size": 3}, {"on": "val"})  # the model's, under the directions'
    assert load_translator(run, device="cpu").defaults.beam_size == 2
    assert load_translator(run, device="cpu", tgt_lang="cs").towards("de", "en").defaults.beam_size == 3
    for damaged in ('{"directions": {"en-cs": {"beam_size": 0}}}', '{"directions": {"en-cs": "x"}}',
                    '{"directions": {"en_cs": {"beam_size": 2}}}'):
        (kept / "decoding.json").write_text(damaged)
        with pytest.raises(checkpoint.CheckpointError, match="decoding.json"):
            load_translator(run, device="cpu")


def test_a_ctranslate2_export_translates_each_direction_as_aiayn_does(small_valid, tmp_path, capsys):
    pytest.importorskip("ctranslate2")
    run, ct2 = tmp_path / "run", tmp_path / "ct2"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 *SOURCE_TOLD, "--max-steps", "3", "--out", str(run)]) == 0
    assert main(["export", "ctranslate2", str(run), str(ct2)]) == 0
    sources = multi30k.load("val", "en", "de").source[:20]
    for tgt in ("de", "cs"):
        ours = load_translator(run, device="cpu", tgt_lang=tgt, beam_size=1, max_output_len=6)
        theirs = load_translator(ct2, tgt_lang=tgt, beam_size=1, max_output_len=6, compute_type="float32")
        assert theirs.pairs == ("en-de", "en-cs") and theirs.tgt_lang == tgt
        assert [t.tokens for t in theirs.translate(sources)] == [t.tokens for t in ours.translate(sources)]
    capsys.readouterr()
    assert main(["export", "argos", str(run), str(tmp_path / "x.argosmodel")]) == 2
    err = capsys.readouterr().err
    assert "is a multilingual model (en-de, en-cs)" in err and len(err.strip().splitlines()) == 1


def test_a_multilingual_model_goes_to_marian_and_back_with_its_directions(small_valid, tmp_path):
    """to-marian writes the >>xx<< pieces HuggingFace's MarianTokenizer reads as language codes; read
    back, the Marian directory has the same directions and translates each as the checkpoint."""
    transformers = pytest.importorskip("transformers")
    run, hf = tmp_path / "run", tmp_path / "hf"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 *SOURCE_TOLD, "--max-steps", "3", "--out", str(run)]) == 0
    assert main(["convert", "to-marian", str(run), str(hf)]) == 0
    theirs = transformers.MarianTokenizer.from_pretrained(hf)
    cs = load_translator(run, device="cpu").tokenizer.language_id("cs")
    assert theirs(">>cs<< A dog runs.")["input_ids"][0] == cs  # the code HuggingFace users write
    sources = multi30k.load("val", "en", "de").source[:10]
    for tgt in ("de", "cs"):
        ours = load_translator(run, device="cpu", tgt_lang=tgt, beam_size=2, max_output_len=6)
        marian = load_translator(hf, device="cpu", tgt_lang=tgt, beam_size=2, max_output_len=6)
        assert marian.pairs == ("en-de", "en-cs")
        assert [t.tokens for t in marian.translate(sources)] == [t.tokens for t in ours.translate(sources)]


def test_a_multi_target_opus_mt_directory_translates_into_each_language_it_has_a_piece_for(tmp_path):
    """An OPUS-MT-style multi-target model (no aiayn metadata): its directions come from its source
    language and the >>xxx<< pieces of its vocabulary."""
    pytest.importorskip("transformers")
    from aiayn.interop import marian
    from tests.conftest import tiny_model

    tokenizer = Tokenizer.learn_languages({"en": ["a dog runs"] * 30, "fra": ["un chien"] * 30,
                                           "spa": ["un perro"] * 30}, 300)
    model = tiny_model(vocab_size=tokenizer.vocab_size)
    hf = marian.save_marian(model, tokenizer, tmp_path / "opus-mt-en-ROMANCE", "en", "ROMANCE")
    translator = load_translator(hf, device="cpu", tgt_lang="spa", beam_size=1, max_output_len=3)
    assert translator.pairs == ("en-fra", "en-spa") and translator.source_prefix == (
        tokenizer.language_id("spa"),)
    translator.translate(["a dog runs"])


def test_explain_shows_the_direction_asked_with_its_piece_first(small_valid, tmp_path):
    from aiayn.explain import explain

    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 *SOURCE_TOLD, "--max-steps", "1", "--out", str(run)]) == 0
    czech = load_translator(run, device="cpu", tgt_lang="cs", max_output_len=4)
    data = explain(czech, "A dog runs.", beam_size=2)
    assert data["source"]["pieces"][0] == ">>cs<<" and data["languages"] == {"source": "en", "target": "cs"}
    assert data["translation"] == czech.translate(["A dog runs."], beam_size=2)[0].text
    assert main(["explain", str(run), "A dog runs.", "--tgt-lang", "cs", "--max-output-len", "4",
                 "--out", str(tmp_path / "page")]) == 0


def test_a_zero_shot_direction_is_translated_only_when_asked_for_and_says_so(small_valid, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs",
                 "en-de,de-en,en-cs", *SOURCE_TOLD, "--max-steps", "1", "--out", str(run)]) == 0
    translator = load_translator(run, device="cpu", max_output_len=3)
    with pytest.raises(ConfigError, match=r"no direction de-cs; .* \(untrained: zero-shot with "
                       r"load_translator\(\.\.\., zero_shot=True\) or --zero-shot\)"):
        translator.towards("de", "cs")
    with pytest.raises(ConfigError, match="no direction cs-de"):  # cs was never a source
        translator.towards("cs", "de", zero_shot=True)
    german_czech = translator.towards("de", "cs", zero_shot=True)
    assert german_czech.zero_shot and not translator.zero_shot
    assert german_czech.source_prefix == (translator.tokenizer.language_id("cs"),)
    every = {(t.src_lang, t.tgt_lang): t.zero_shot for t in translator.directions(zero_shot=True)}
    assert every == {("en", "de"): False, ("de", "en"): False, ("en", "cs"): False, ("de", "cs"): True}
    capsys.readouterr()
    assert main(["translate", str(run), "--src-lang", "de", "--tgt-lang", "cs", "Ein Hund."]) == 2
    assert "--zero-shot" in capsys.readouterr().err
    assert main(["translate", str(run), "--src-lang", "de", "--tgt-lang", "cs", "--zero-shot",
                 "--max-output-len", "3", "Ein Hund."]) == 0
    assert "de->cs is zero-shot: the model was not trained on it" in capsys.readouterr().err


def test_one_language_given_picks_the_first_direction_that_fits_and_limits_leave_room(small_valid, tmp_path):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs",
                 "en-de,de-en,en-cs", *SOURCE_TOLD, "--max-len", "40", "--max-steps", "1",
                 "--out", str(run)]) == 0
    german = load_translator(run, device="cpu", src_lang="de", max_output_len=3)
    assert (german.src_lang, german.tgt_lang) == ("de", "en")
    czech = load_translator(run, device="cpu", tgt_lang="cs", max_output_len=3)
    assert (czech.src_lang, czech.tgt_lang) == ("en", "cs")
    assert czech.max_source_len == 41  # the 40 tokens it was trained on, and its >>cs<<
    assert czech.translate([""])[0].text == ""  # an empty sentence gets no piece, and no words
    assert checkpoint.load(checkpoint.resolve(run)).data.src_lang == "en"  # the first direction's


def test_a_marian_model_with_one_target_piece_stays_bilingual(tmp_path):
    pytest.importorskip("transformers")
    from aiayn.interop import marian
    from tests.conftest import tiny_model

    tokenizer = Tokenizer.learn_languages({"en": ["a dog runs"] * 30, "deu": ["ein hund"] * 30}, 300)
    model = tiny_model(vocab_size=tokenizer.vocab_size)
    hf = marian.save_marian(model, tokenizer, tmp_path / "m", "en", "de")
    translator = load_translator(hf, device="cpu", beam_size=1, max_output_len=3)
    assert translator.pairs == () and translator.source_prefix == ()


def test_told_in_the_target_each_target_starts_with_its_language_which_starts_the_decoder():
    """--language-token target: the piece begins every target; `collate` feeds it in place of <s>
    and never asks the model to predict it."""
    tokenizer = Tokenizer.learn_languages({"en": ["a dog runs"] * 20, "de": ["ein hund rennt"] * 20}, 300)
    corpus = TokenizedCorpus(tokenizer.encode(["a dog", "a cat"]), tokenizer.encode(["ein hund", "eine"]))
    into_german = told(corpus, tokenizer, Direction("en", "de"), "target")
    de, t = tokenizer.language_id("de"), tokenizer
    assert into_german.source == corpus.source and [s[0] for s in into_german.target] == [de, de]
    batch = collate(np.arange(2), into_german, t.pad_id, None, t.eos_id)
    plain = collate(np.arange(2), corpus, t.pad_id, t.bos_id, t.eos_id)
    assert batch.tgt_in[:, 0].tolist() == [de, de] and plain.tgt_in[:, 0].tolist() == [t.bos_id] * 2
    assert torch.equal(batch.tgt_in[:, 1:], plain.tgt_in[:, 1:])  # then the same words
    assert torch.equal(batch.tgt_out, plain.tgt_out) and batch.n_tgt_tokens == plain.n_tgt_tokens


def test_a_model_told_in_the_target_starts_its_decoder_with_the_language_asked(small_valid, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 "--language-token", "target", "--max-steps", "2", "--valid-every", "2", "--bleu-every", "2",
                 "--bleu-beam", "1", "--out", str(run)]) == 0
    assert set(records(run, "bleu")[-1]["directions"]) == {"en-de", "en-cs"}
    translator = load_translator(run, device="cpu", tgt_lang="cs", beam_size=2, max_output_len=3)
    tokenizer, cs = translator.tokenizer, translator.tokenizer.language_id("cs")
    first, encoded = [], []
    decode, encode = translator.model.decode, translator.model.encode
    translator.model.decode = lambda tgt, *a, **k: first.append(tgt[:, 0].tolist()) or decode(tgt, *a, **k)
    translator.model.encode = lambda src, *a, **k: encoded.append(src[0].tolist()) or encode(src, *a, **k)
    czech = translator.translate(["A dog runs."], attention=True)[0]
    translator.model.decode, translator.model.encode = decode, encode
    assert first[0] == [cs] and translator.start == cs  # the decoder starts with >>cs<<, one row
    assert encoded[0][:-1] == tokenizer.encode(["A dog runs."])[0]  # the source has no piece
    assert czech.attention.prefix == 0 and czech.attention.target_in[0] == ">>cs<<"
    assert ">>" not in czech.text
    german = translator.towards("en", "de")
    assert german.start == tokenizer.language_id("de") and german.source_prefix == ()
    sentence = ["A dog runs."]
    assert translator.translate(sentence, target="de")[0].tokens == german.translate(sentence)[0].tokens
    with pytest.raises(ConfigError, match="has no direction en-fr"):
        translator.translate(["A dog runs."], target="fr")
    from aiayn.explain import explain

    data = explain(translator, "A dog runs.", beam_size=2)
    assert data["target"]["pieces"][0] == ">>cs<<" and data["translation"] == czech.text
    capsys.readouterr()
    assert main(["info", str(run)]) == 0
    assert "directions: en-de, en-cs (target language told in the target" in capsys.readouterr().out
    assert main(["convert", "to-marian", str(run), str(tmp_path / "marian")]) == 2
    err = capsys.readouterr().err
    assert "--language-token target" in err and len(err.strip().splitlines()) == 1, err
    if importlib.util.find_spec("ctranslate2") is None:
        return
    # CTranslate2 takes the piece as a one-token target prefix, starts from it and leaves it out.
    assert main(["export", "ctranslate2", str(run), str(tmp_path / "ct2")]) == 0
    sources = multi30k.load("val", "en", "de").source[:20]
    for tgt in ("de", "cs"):
        ours = load_translator(run, device="cpu", tgt_lang=tgt, beam_size=2, max_output_len=6,
                               penalty_form="plain")  # CTranslate2's
        theirs = load_translator(tmp_path / "ct2", tgt_lang=tgt, beam_size=2, max_output_len=6,
                                 compute_type="float32")
        assert theirs.start == tokenizer.language_id(tgt)
        assert [t.tokens for t in theirs.translate(sources)] == [t.tokens for t in ours.translate(sources)]


def test_a_multilingual_model_is_told_in_the_decoder_by_default_and_an_older_one_in_the_source(
        small_valid, tmp_path):
    """The decoder token measured better (benchmarks/detail/multilingual.md): it is the default. A
    checkpoint saved before the choice existed was told in the source, and still loads as such."""
    run = tmp_path / "run"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 "--max-steps", "1", "--out", str(run)]) == 0
    saved = checkpoint.resolve(run)
    assert checkpoint.load(saved).data.language_token == "target"
    config = saved / checkpoint.CONFIG_FILE
    meta = json.loads(config.read_text())
    del meta["data"]["language_token"]
    config.write_text(json.dumps(meta))
    assert checkpoint.load(saved).data.language_token == "source"


def test_a_run_from_a_model_told_in_the_source_must_say_so_too(small_valid, tmp_path, capsys):
    """--init-from a multilingual model told the target in the source: a child told in the decoder
    (the default) would not read what its parent learned; it is a one-line error naming the flag."""
    parent, child = tmp_path / "parent", tmp_path / "child"
    assert main(["train", *TINY, "--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs",
                 *SOURCE_TOLD, "--max-steps", "1", "--out", str(parent)]) == 0
    capsys.readouterr()
    common = ["--train", small_valid, "--valid", small_valid, "--pairs", "en-de,en-cs", "--max-steps", "1",
              "--threads", "1", "--out", str(child)]
    assert main(["train", "--init-from", str(parent), *common]) == 2
    err = capsys.readouterr().err
    assert "is told the target language in the source: train on from it with --language-token source" in err
    assert len(err.strip().splitlines()) == 1 and not child.exists()
    assert main(["train", "--init-from", str(parent), *common, *SOURCE_TOLD]) == 0
