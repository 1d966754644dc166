import pytest
from sacrebleu.metrics import BLEU, CHRF

from aiayn.evaluate import score

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
