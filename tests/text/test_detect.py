"""Detecting the source language among those a server translates from (aiayn.text.detect)."""

import pytest

pytest.importorskip("lingua")

from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.text.detect import DetectionError, LanguageDetector  # noqa: E402


def test_multi30k_test_sentences_are_detected_among_english_german_and_french(data_dir):
    detector = LanguageDetector(["en", "de", "fr"])
    for lang, other in (("en", "de"), ("de", "en"), ("fr", "en")):
        sentences = load_corpus("multi30k:test_2016_flickr", lang, other).source[:300]
        right = sum(detector.confidences(s)[0][0] == lang for s in sentences)
        assert right >= 297, (lang, right)  # 1,000 of 1,000 in each language when measured


def test_confidences_are_ranked_and_a_batch_is_detected_as_a_whole():
    detector = LanguageDetector(["de", "en"])
    ranked = detector.confidences("Zwei Hunde spielen im Schnee.")
    assert [code for code, _ in ranked] == ["de", "en"] and ranked[0][1] > 0.9
    assert sum(c for _, c in ranked) == pytest.approx(1)
    assert detector.detect(["A dog.", "Two dogs play in the snow in the park."])[0][0] == "en"


def test_one_language_needs_no_detection_and_an_unknown_one_is_an_error():
    assert LanguageDetector(["de"]).detect(["whatever"]) == [("de", 1.0)]
    assert LanguageDetector(["de", "en"]).confidences("123 !!") == [("de", 0.0)]  # no letters
    with pytest.raises(DetectionError, match="cannot detect xx"):
        LanguageDetector(["en", "xx"])
