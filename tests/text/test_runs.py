"""A paragraph's formatted runs as HTML spans and back (text/runs.py)."""

from aiayn.text.runs import as_spans, span_texts


def test_runs_of_the_main_formatting_are_the_text_around_the_spans():
    texts, forms = ["A man rides a ", "red", " bike. It is ", "very", " fast."], ["", "b", "", "i", ""]
    assert as_spans(texts, forms) == ('A man rides a <span id="1">red</span> bike. It is '
                                      '<span id="3">very</span> fast.')
    translated = 'Ein Mann fährt ein <span id="1">rotes</span> Rad. Es ist <span id="3">sehr</span> schnell.'
    assert span_texts(translated, texts, forms) == ["Ein Mann fährt ein ", "rotes", " Rad. Es ist ", "sehr",
                                                    " schnell."]


def test_text_around_moved_or_emptied_spans_goes_to_the_main_run_after_the_span_read_last():
    texts, forms = ["A ", "red", " bike."], ["", "b", ""]
    assert span_texts('<span id="1">Rotes</span> Rad, ein', texts, forms) == ["", "Rotes", " Rad, ein"]
    assert span_texts('Ein Rad <span id="1"> </span>.', texts, forms) == ["Ein Rad  .", "", ""]
    assert span_texts("&lt;Rad&gt; &amp; mehr", texts, forms) == ["<Rad> & mehr", "", ""]


def test_without_formatting_every_run_is_a_span():
    texts = ["One ", "two."]
    assert as_spans(texts) == '<span id="0">One </span><span id="1">two.</span>'
    assert span_texts('<span id="1">Zwei</span> <span id="0">eins.</span>', texts) == [" eins.", "Zwei"]
