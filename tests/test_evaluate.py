import importlib.util

import pytest
from sacrebleu.metrics import BLEU, CHRF

from aiayn.cli import main
from aiayn.evaluate import ScoringError, bleu_metric, looping, score, tokenizer_for

REFS = ["Ein Hund rennt über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]


def test_perfect_translations_score_100_with_sacrebleus_default_signatures():
    s = score(REFS, REFS)
    assert (s.bleu, s.chrf) == (pytest.approx(100.0), pytest.approx(100.0))
    assert s.bleu_signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    assert s.chrf_signature.startswith("nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:")


def test_scores_are_sacrebleus_corpus_scores_and_the_lines_print_them():
    hyps = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest."]
    s = score(hyps, REFS)
    assert s.bleu == BLEU().corpus_score(hyps, [REFS]).score
    assert s.chrf == CHRF().corpus_score(hyps, [REFS]).score
    assert s.lines()[0].startswith(f"BLEU = {s.bleu:.2f}  nrefs:1") and "BP =" in s.lines()[0]


def test_a_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match="2 hypotheses for 3 references"):
        score(REFS[:2], REFS)


# Chinese is written without spaces: 13a sees each line as one word, so a near miss scores 0.
ZH_REFS = ["我喜欢吃香蕉。", "今天天气很好。", "他在图书馆看书。"]
ZH_HYPS = ["我喜欢吃苹果。", "今天天气很好。", "他在图书馆读书。"]


@pytest.mark.parametrize("language, tokenizer", [("zh", "zh"), ("zh-Hans", "zh"), ("zh_TW", "zh"),
                                                 ("ja", "ja-mecab"), ("ko", "ko-mecab"), ("de", "13a"),
                                                 ("", "13a")])
def test_the_tokeniser_follows_the_target_language(language, tokenizer):
    assert tokenizer_for(language) == tokenizer


def test_chinese_is_scored_by_characters_and_the_signature_says_so():
    by_words, by_characters = score(ZH_HYPS, ZH_REFS), score(ZH_HYPS, ZH_REFS, tokenizer_for("zh"))
    assert "tok:zh" in by_characters.bleu_signature and "tok:13a" in by_words.bleu_signature
    assert by_characters.bleu == BLEU(tokenize="zh").corpus_score(ZH_HYPS, [ZH_REFS]).score
    assert by_words.bleu < 40 < by_characters.bleu  # one of three lines whole vs most characters right


def test_evaluate_picks_the_tokeniser_and_tokenize_overrides_it(tmp_path, capsys):
    for lang, lines in (("en", ["I like bananas.", "Nice weather.", "He reads."]), ("zh", ZH_REFS)):
        (tmp_path / f"test.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    (tmp_path / "hyp.zh").write_text("".join(line + "\n" for line in ZH_HYPS), encoding="utf-8")
    common = ["evaluate", "--hypotheses", str(tmp_path / "hyp.zh"), "--test", str(tmp_path / "test"),
              "--src-lang", "en", "--tgt-lang", "zh"]
    assert main(common) == 0
    assert "tok:zh" in capsys.readouterr().out
    assert main([*common, "--tokenize", "char"]) == 0
    assert "tok:char" in capsys.readouterr().out


@pytest.mark.skipif(importlib.util.find_spec("MeCab") is not None, reason="MeCab is installed here")
def test_a_tokeniser_whose_package_is_missing_is_named(tmp_path, capsys):
    with pytest.raises(ScoringError, match=r'ja-mecab tokeniser needs .* "sacrebleu\[ja\]"'):
        bleu_metric("ja-mecab")
    (tmp_path / "t.en").write_text("a\n")
    (tmp_path / "t.ja").write_text("b\n")
    assert main(["evaluate", "--hypotheses", str(tmp_path / "t.ja"), "--test", str(tmp_path / "t"),
                 "--src-lang", "en", "--tgt-lang", "ja"]) == 2
    assert 'pip install "sacrebleu[ja]"' in capsys.readouterr().err


@pytest.mark.parametrize("text, tokenize, loops", [
    ("Ein Mann Mann Mann Mann steht.", "13a", True),  # one word 4 times in a row
    ("Ein Mann Mann Mann steht.", "13a", False),  # 3 times is no loop
    ("mit einem Hut mit einem Hut mit einem Hut mit einem Hut", "13a", True),  # 3 words, 4 times
    ("a b a b a b a c", "13a", False),
    ("a b c d a b c d a b c d a b c d", "13a", False),  # 4 words: longer than a loop counted
    ("西西西西兰", "zh", True), ("西西西兰", "zh", False), ("西西西西兰", "13a", False),
])
def test_a_loop_is_a_sequence_of_one_to_three_words_four_times_in_a_row(text, tokenize, loops):
    assert looping(text, tokenize) is loops


def test_evaluate_counts_the_translations_caught_in_loops(tmp_path, capsys):
    (tmp_path / "test.en").write_text("a\nb\nc\n", encoding="utf-8")
    (tmp_path / "test.de").write_text("".join(line + "\n" for line in REFS), encoding="utf-8")
    (tmp_path / "hyp.de").write_text("Ein Hund Hund Hund Hund.\nZwei Männer spielen Fußball.\nEine Frau\n",
                                     encoding="utf-8")
    assert main(["evaluate", "--hypotheses", str(tmp_path / "hyp.de"), "--test", str(tmp_path / "test"),
                 "--src-lang", "en", "--tgt-lang", "de"]) == 0
    assert "repetition loops: 1 of 3 translations" in capsys.readouterr().out
