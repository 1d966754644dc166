"""Parity with CTranslate2: an exported model decodes exactly as aiayn does."""

import pytest
import torch

pytest.importorskip("ctranslate2")

from aiayn.cli import main  # noqa: E402
from aiayn.config import DecodeConfig  # noqa: E402
from aiayn.decoding import greedy_search, max_output_lengths  # noqa: E402
from aiayn.decoding.translator import repetition  # noqa: E402
from aiayn.interop.ctranslate2 import CTranslate2Translator, export  # noqa: E402
from tests.conftest import source_ids, tiny_model, train_reverse_model  # noqa: E402

CAP = 39


@pytest.fixture(scope="module")
def exported(reverse_model, tmp_path_factory):
    model, tokenizer, _ = reverse_model
    return export(model, tokenizer, tmp_path_factory.mktemp("ct2"), languages=("xx", "yy"))


@pytest.fixture(scope="module")
def relative_model(tmp_path_factory):
    """Trained with relative positions only (Shaw et al.): CTranslate2 implements them on its own."""
    return train_reverse_model(tmp_path_factory.mktemp("relative"), relative_positions=16, positional="none")


@pytest.mark.parametrize("which", ["reverse_model", "relative_model", "separate_model"])
def test_greedy_output_equals_aiayn_token_for_token_on_200_sentences(which, request, tmp_path):
    model, tokenizer, sources = request.getfixturevalue(which)
    exported = export(model, tokenizer, tmp_path / "ct2")
    lines = sources[:200]
    # as many threads as aiayn: the test worker's share of the CPUs (tests/conftest.py)
    theirs = CTranslate2Translator(exported, threads=torch.get_num_threads()).translate(
        tokenizer.encode(lines), DecodeConfig(beam_size=1, max_output_len=CAP, no_repeat_ngram_size=0))
    src = source_ids(tokenizer, lines)
    mine = greedy_search(model, src, max_output_lengths(src, tokenizer.pad_id, fixed=CAP))
    assert [t[0].tokens for t in theirs] == [h.tokens for h in mine]  # no tolerance needed: 0 of 200 differ
    assert sum(len(h.tokens) for h in mine) > 1000


@pytest.mark.parametrize("rules", [{"repetition_penalty": 1.5}, {"repetition_penalty": 0.7},
                                   {"no_repeat_ngram_size": 2}, {"no_repeat_ngram_size": 1}])
def test_the_rules_against_repetition_mean_what_they_mean_in_ctranslate2(reverse_model, exported, rules):
    """repetition_penalty and no_repeat_ngram_size as CTranslate2 has them: the same tokens greedily
    on 200 sentences (the reversed letters repeat, so the rules change some of aiayn's outputs)."""
    model, tokenizer, sources = reverse_model
    lines, config = sources[:200], DecodeConfig(beam_size=1, max_output_len=CAP, **rules)
    theirs = CTranslate2Translator(exported, threads=torch.get_num_threads()).translate(
        tokenizer.encode(lines), config)
    src = source_ids(tokenizer, lines)
    limits = max_output_lengths(src, tokenizer.pad_id, fixed=CAP)
    mine = greedy_search(model, src, limits, repetition=repetition(config))
    assert [t[0].tokens for t in theirs] == [h.tokens for h in mine]
    assert [h.tokens for h in mine] != [h.tokens for h in greedy_search(model, src, limits)]


def test_translate_engine_ctranslate2_from_the_command_line(exported, tmp_path, capsys):
    assert main(["translate", str(exported), "a b c", "", "x y z", "--engine", "ctranslate2",
                 "--beam-size", "4", "--compute-type", "int8", "--device", "cpu"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == ""
    assert CTranslate2Translator(exported).languages == ("xx", "yy")


def test_evaluate_with_ctranslate2_reports_its_plain_length_penalty(exported, capsys):
    assert main(["evaluate", str(exported), "--engine", "ctranslate2", "--test", "synthetic:reverse:val",
                 "--beam-size", "2", "--src-lang", "xx", "--tgt-lang", "yy", "--device", "cpu"]) == 0
    assert "length penalty 0.6 (plain)" in capsys.readouterr().out


def test_missing_cuda_libraries_are_a_clear_error(exported, capsys):
    """CTranslate2's GPU build loads CUDA 12's cuBLAS at the first translation; where it is missing
    (a machine with CUDA 13 only), the message says so and names --device cpu."""
    translator = CTranslate2Translator(exported)

    class NoCuBLAS:
        def translate_batch(self, *args, **kwargs):
            raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")

    translator.translator = NoCuBLAS()
    with pytest.raises(ImportError, match="libcublas.so.12.*--device cpu"):
        translator.translate(translator.tokenizer.encode(["a b c"]), DecodeConfig())


def test_pre_norm_gelu_model_with_concatenated_positions_exports_exactly(tmp_path):
    from aiayn.tokenizer import Tokenizer

    tokenizer = Tokenizer.train(["a b c d e f g h i j"] * 40, 300)
    model = tiny_model(vocab_size=tokenizer.vocab_size, norm_position="pre", activation="gelu",
                       pe_layout="concatenated", output_bias=True)
    with torch.no_grad():
        model.output_proj.bias.normal_()
    out = export(model, tokenizer, tmp_path / "ct2")
    ids = [[5 + (i * 7 + j) % 200 for j in range(3 + i % 6)] for i in range(40)]
    lines = [tokenizer.decode(s) for s in ids]
    theirs = CTranslate2Translator(out).translate(tokenizer.encode(lines),
                                                  DecodeConfig(beam_size=1, max_output_len=12,
                                                               no_repeat_ngram_size=0))
    src = source_ids(tokenizer, lines)
    mine = greedy_search(model, src, max_output_lengths(src, tokenizer.pad_id, fixed=12))
    assert [t[0].tokens for t in theirs] == [h.tokens for h in mine]


def test_what_ctranslate2_cannot_represent_is_a_clear_error(tmp_path):
    tokenizer = None  # refused before the tokenizer is read
    with pytest.raises(ValueError, match="no absolute positions beside relative ones: train with"):
        export(tiny_model(relative_positions=4), tokenizer, tmp_path / "a")
    with pytest.raises(ValueError, match="supports sinusoidal positions only, not learned"):
        export(tiny_model(positional="learned"), tokenizer, tmp_path / "b")


def test_a_prefix_and_alternatives_on_ctranslate2_as_on_pytorch(trained_run, tmp_path):
    """CTranslate2's target_prefix and return_alternatives give what aiayn's search does: the same
    tokens after the same prefix, alternatives that go on with the same tokens (beam 4, the plain
    length penalty)."""
    from aiayn.translation import load_translator

    assert main(["export", "ctranslate2", str(trained_run), str(tmp_path / "ct2")]) == 0
    options = {"beam_size": 4, "penalty_form": "plain"}
    ours = load_translator(trained_run, device="cpu", **options)
    theirs = load_translator(tmp_path / "ct2", compute_type="float32", **options)
    texts = ["a b c d", "e f g h i", "j k"]
    for engine in (ours, theirs):
        found = engine.translate(texts, prefix="z")
        assert all(t.text.startswith("z") for t in found)
    assert [t.tokens for t in theirs.translate(texts, prefix="z")] == \
        [t.tokens for t in ours.translate(texts, prefix="z")]
    mine, its = (e.translate(["a b c d"], prefix="d", alternatives=3)[0] for e in (ours, theirs))
    d = len(ours.tokenizer.encode(["d"], side="target")[0])
    # the same 3 tokens after the prefix (each engine completes them its own way)
    every = [{t.tokens[d] for t in [best, *best.alternatives]} for best in (mine, its)]
    assert every[0] == every[1] and len(every[0]) == 3
    with pytest.raises(Exception, match="CTranslate2 has no constrained search"):
        theirs.translate(["a b c"], constraints=[["z"]])
