"""A paragraph of formatted runs translated as one text, each run's formatting kept on the words that
belong to it: the runs are written as HTML spans (`<span id="0">A </span><span id="1">bold</span>`),
the text goes through the HTML path (text/markup.py carries inline tags onto the words aligned with
theirs), and each span's translated text goes back into its run. Word (.docx), PowerPoint (.pptx)
and OpenDocument files all hold their paragraphs this way.

    html = as_spans(["A ", "bold", " word."])
    texts = span_texts(translated_html, ["A ", "bold", " word."])   # one text per run
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Sequence
from html.parser import HTMLParser


def as_spans(texts: Sequence[str], forms: Sequence[Hashable] | None = None) -> str:
    """The runs' texts as an HTML text: each run a numbered span, except those of the paragraph's
    main formatting (`forms`: each run's formatting; the one that covers the most characters), which
    are the text around the spans, as the plain text around <b>...</b> in a web page."""
    main = _main(texts, forms)
    escaped = [html.escape(t, quote=False) for t in texts]
    return "".join(t if i in main else f'<span id="{i}">{t}</span>' for i, t in enumerate(escaped))


def _main(texts: Sequence[str], forms: Sequence[Hashable] | None) -> list[int]:
    """The runs of the formatting that covers the most characters (none without `forms`)."""
    if forms is None:
        return []
    size: dict[Hashable, int] = {}
    for text, form in zip(texts, forms, strict=True):
        size[form] = size.get(form, 0) + len(text)
    widest = max(size, key=size.__getitem__)
    return [i for i, form in enumerate(forms) if form == widest]


def span_texts(translated: str, sources: Sequence[str], forms: Sequence[Hashable] | None = None) -> list[str]:
    """The text of each run in `translated` HTML (`sources`: the runs' texts before translation;
    `forms`: their formatting, as `as_spans` was given it). A span's text goes to its run. Text
    outside every span, and that of a span without a word, goes to a run of the main formatting:
    the first after the span read last (the last before it, if none is after). Without main runs, it
    goes to a neighbouring span with a word: the one before it if that one ended with a space in the
    source and the one after did not start with one, else the one after (if any)."""
    n, main = len(sources), _main(sources, forms)
    pieces = _pieces(translated, n)
    worded = {i for i in range(n) if "".join(t for j, t in pieces if j == i).strip()}
    texts, floating, last = [""] * n, "", None
    if main:
        for span, text in pieces:
            if span not in worded:
                after = [i for i in main if last is None or i > last]
                span = after[0] if after else main[-1]
            else:
                last = span
            texts[span] += text
        return texts
    for span, text in pieces:
        if span not in worded:
            floating += text
            continue
        if last is not None and sources[last][-1:].isspace() and not sources[span][:1].isspace():
            texts[last] += floating
        else:
            texts[span] += floating
        texts[span] += text
        floating, last = "", span
    texts[last if last is not None else 0] += floating
    return texts


def _pieces(translated: str, n: int) -> list[tuple[int | None, str]]:
    """The text of `translated` HTML in order, each piece with the span (of ids 0 to n - 1) it is in."""
    pieces: list[tuple[int | None, str]] = []  # (span, text) in order; None: outside every span

    class Spans(HTMLParser):
        current: int | None = None

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            ids = [v for k, v in attrs if k == "id" and v is not None and v.isdigit() and int(v) < n]
            if tag == "span" and ids:
                self.current = int(ids[0])

        def handle_endtag(self, tag: str) -> None:
            if tag == "span":
                self.current = None

        def handle_data(self, data: str) -> None:
            pieces.append((self.current, data))

    reader = Spans(convert_charrefs=True)
    reader.feed(translated)
    reader.close()
    return pieces
