"""Word files (.docx), their structure and formatting kept: each paragraph (in the body, tables,
content controls, text boxes, headers, footers, footnotes and endnotes; tracked insertions included,
deletions left as they are) is a text, its runs written as HTML spans so that each run's formatting
stays on the words that belong to it (text/runs.py); runs with the same formatting are merged first,
and runs holding anything but text (pictures, fields) are kept as they are. Needs python-docx.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from aiayn.text.archive import DocumentError, open_zip, refuse_entities_in, xml_safe
from aiayn.text.document import Document
from aiayn.text.runs import as_spans, span_texts

# The parts of a Word file that hold text to translate: the body, headers, footers, footnotes and
# endnotes (python-docx reads the last two as plain XML parts once told they are XML).
_STORIES = {f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}+xml"
            for kind in ("document.main", "header", "footer", "footnotes", "endnotes")}
_NOTES = [f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}+xml"
          for kind in ("footnotes", "endnotes")]


def read(data: bytes, name: str) -> Document:
    try:
        import docx
        from docx.opc.part import PartFactory, XmlPart
    except ImportError:
        raise DocumentError(f"{name}: .docx files need python-docx: pip install 'aiayn[files]'") from None
    for content_type in _NOTES:
        PartFactory.part_type_for.setdefault(content_type, XmlPart)
    with open_zip(data, name, "a Word .docx file") as archive:
        refuse_entities_in(archive, name)
    try:
        book = docx.Document(io.BytesIO(data))
    except Exception as e:  # python-docx raises zipfile, lxml and its own errors
        raise DocumentError(f"{name}: not a Word .docx file ({type(e).__name__}: {e})") from None
    paragraphs = [rs for rs in map(_text_runs, _paragraphs(book)) if "".join(r.text for r, _ in rs).strip()]
    sources = [([r.text for r, _ in rs], [form for _, form in rs]) for rs in paragraphs]
    texts = [as_spans(*source) for source in sources]

    def write(translations: Sequence[str]) -> bytes:
        for rs, source, translation in zip(paragraphs, sources, translations, strict=True):
            for (run, _), text in zip(rs, span_texts(translation, *source), strict=True):
                run.text = xml_safe(text)
        out = io.BytesIO()
        book.save(out)
        return out.getvalue()

    return Document(texts, "html", write)


def _paragraphs(book: Any) -> list[Any]:
    """Every paragraph of the body, headers, footers, footnotes and endnotes, wherever it is: in
    tables, content controls (w:sdt) and text boxes too."""
    from docx.oxml.ns import qn
    from docx.text.paragraph import Paragraph

    return [Paragraph(p, part) for part in book.part.package.iter_parts() if part.content_type in _STORIES
            for p in part.element.iter(qn("w:p"))]


def _text_runs(paragraph: Any) -> list[tuple[Any, Any]]:
    """A paragraph's runs that hold only text, each with its formatting (its properties and the
    element it is in: a tracked insertion stays one), neighbours with the same formatting merged into
    the first of them (the others emptied)."""
    runs: list[tuple[Any, Any]] = []
    last = None
    for run in _all_runs(paragraph):
        if any(child.tag.rsplit("}", 1)[-1] not in ("rPr", "t", "tab", "br", "cr")
               for child in run._r):
            last = None  # a picture or a field: kept, and it separates the runs around it
            continue
        rpr = run._r.rPr
        form = (str(rpr.xml) if rpr is not None else "", run._r.getparent())
        if runs and form == last:
            text = run.text
            run.text = ""
            runs[-1][0].text += text
        else:
            runs.append((run, form))
        last = form
    return runs


def _all_runs(paragraph: Any) -> list[Any]:
    """The paragraph's own runs in order: in hyperlinks, tracked insertions (w:ins) and inline
    content controls too; not those of deleted text, nor of paragraphs inside it (a text box's)."""
    from docx.oxml.ns import qn
    from docx.text.run import Run

    p, runs = paragraph._p, []
    skipped = {qn("w:del"), qn("w:moveFrom")}
    for r in p.iter(qn("w:r")):
        parent = r.getparent()
        while parent is not None and parent is not p and parent.tag not in skipped | {qn("w:p")}:
            parent = parent.getparent()
        if parent is p:
            runs.append(Run(r, paragraph))
    return runs
