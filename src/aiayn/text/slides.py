"""PowerPoint files (.pptx), their structure and formatting kept: every paragraph of every slide
(titles, text boxes, placeholders, shapes inside groups, table cells, SmartArt, chart titles) and of
its speaker notes is a text. A paragraph (DrawingML's `a:p`) holds runs (`a:r`: formatting `a:rPr`,
text `a:t`), line breaks and fields (a slide number, a date: kept as they are); neighbouring runs
with the same formatting are merged, and the runs are carried as HTML spans (text/runs.py). Slide
layouts and masters (their placeholder prompts) are left as they are. Read and written with lxml.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from aiayn.text.archive import DocumentError, member, open_zip, parse_xml, rewrite, xml_bytes, xml_safe
from aiayn.text.document import Document
from aiayn.text.runs import as_spans, span_texts

A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
# The parts with text to translate, in the order a reader meets them (slides, then their notes, ...).
PARTS = [re.compile(rf"ppt/{folder}/{stem}(\d+)\.xml") for folder, stem in
         (("slides", "slide"), ("notesSlides", "notesSlide"), ("diagrams", "data"), ("charts", "chart"))]


def read(data: bytes, name: str) -> Document:
    archive = open_zip(data, name, "a PowerPoint .pptx file")
    if "ppt/presentation.xml" not in archive.namelist():
        raise DocumentError(f"{name}: not a PowerPoint .pptx file (no ppt/presentation.xml)")
    trees: dict[str, Any] = {}
    paragraphs: list[list[tuple[Any, bytes]]] = []  # each paragraph's runs: (a:t element, formatting)
    for pattern in PARTS:
        numbered = ((m, path) for path in archive.namelist() if (m := pattern.fullmatch(path)))
        for _, path in sorted((int(m.group(1)), path) for m, path in numbered):
            trees[path] = tree = parse_xml(member(archive, path, name), name, path)
            paragraphs += [runs for p in tree.iter(f"{A}p") if (runs := _runs(p))]
    sources = [([t.text or "" for t, _ in runs], [form for _, form in runs]) for runs in paragraphs]
    texts = [as_spans(*source) for source in sources]

    def write(translations: Sequence[str]) -> bytes:
        for runs, source, translation in zip(paragraphs, sources, translations, strict=True):
            for (t, _), text in zip(runs, span_texts(translation, *source), strict=True):
                t.text = xml_safe(text)
        return rewrite(archive, {path: xml_bytes(tree) for path, tree in trees.items()})

    return Document(texts, "html", write)


def _runs(paragraph: Any) -> list[tuple[Any, bytes]]:
    """The text elements (`a:t`) of a paragraph's runs with their formatting (`a:rPr`), neighbours
    with the same formatting merged into the first (the others emptied); [] for a paragraph without
    words. A line break or a field between two runs keeps them apart."""
    out: list[tuple[Any, bytes]] = []
    last = None
    for child in paragraph:
        if child.tag != f"{A}r":
            last = None
            continue
        t = child.find(f"{A}t")
        if t is None:
            continue
        rpr = child.find(f"{A}rPr")
        form = _xml(rpr) if rpr is not None else b""
        if out and form == last:
            out[-1][0].text = (out[-1][0].text or "") + (t.text or "")
            t.text = ""
        else:
            out.append((t, form))
        last = form
    return out if "".join(t.text or "" for t, _ in out).strip() else []


def _xml(element: Any) -> bytes:
    from lxml import etree

    return etree.tostring(element)
