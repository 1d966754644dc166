"""OpenDocument text and presentations (.odt, .odp), their structure and formatting kept: every
paragraph and heading (`text:p`, `text:h`) of the document is a text: in lists, tables, frames and
text boxes, slides and their notes, footnotes and comments; and of a text document's styles, its
headers and footers (a presentation's styles hold its masters' placeholder prompts: left as they are). In
OpenDocument a paragraph's text is mixed content: text between elements, formatted by the spans
(`text:span`) and links (`text:a`) around it. Each stretch of text is a run, carried as an HTML span
(text/runs.py); a space element (`text:s`) becomes spaces in its run, tabs, line breaks and anything
else stay where they are, and a paragraph nested inside another (a footnote, a frame's text) is a
text of its own. Read and written with lxml.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aiayn.text.archive import DocumentError, member, open_zip, parse_xml, rewrite, xml_bytes, xml_safe
from aiayn.text.document import Document
from aiayn.text.runs import as_spans, span_texts

TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
PARAGRAPHS = (f"{TEXT}p", f"{TEXT}h")
INLINE = (f"{TEXT}span", f"{TEXT}a")  # elements whose text is the paragraph's, formatted
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
PARTS = {"application/vnd.oasis.opendocument.text": ("content.xml", "styles.xml"),  # styles: headers, footers
         "application/vnd.oasis.opendocument.presentation": ("content.xml",)}  # styles: master prompts


class Run:
    """A stretch of a paragraph's text: the `text` or the `tail` of an element."""

    def __init__(self, element: Any, slot: str) -> None:
        self.element, self.slot = element, slot

    @property
    def form(self) -> tuple[tuple[str, str], ...]:
        """Its formatting: the spans and links around it, with their styles."""
        inside = self.element if self.slot == "text" else self.element.getparent()
        chain = []
        while inside is not None and inside.tag in INLINE:
            chain.append((inside.tag, inside.get(f"{TEXT}style-name", "") + inside.get(XLINK_HREF, "")))
            inside = inside.getparent()
        return tuple(chain)

    @property
    def text(self) -> str:
        return getattr(self.element, self.slot) or ""

    @text.setter
    def text(self, value: str) -> None:
        setattr(self.element, self.slot, value)


def read(data: bytes, name: str) -> Document:
    archive = open_zip(data, name, "an OpenDocument file")
    mimetype = member(archive, "mimetype", name).decode("ascii", "replace").strip()
    if mimetype not in PARTS:
        raise DocumentError(f"{name}: an OpenDocument file of type {mimetype!r}; text (.odt) and "
                            "presentations (.odp) are translated")
    trees = {path: parse_xml(member(archive, path, name), name, path) for path in PARTS[mimetype]
             if path in archive.namelist()}
    paragraphs: list[list[Run]] = []
    for tree in trees.values():
        for p in list(tree.iter(*PARAGRAPHS)):
            _spaces_to_text(p)
            runs = [r for r in _runs(p) if r.text]
            if "".join(r.text for r in runs).strip():
                paragraphs.append(runs)
    sources = [([r.text for r in runs], [r.form for r in runs]) for runs in paragraphs]
    texts = [as_spans(*source) for source in sources]

    def write(translations: Sequence[str]) -> bytes:
        for runs, source, translation in zip(paragraphs, sources, translations, strict=True):
            for run, text in zip(runs, span_texts(translation, *source), strict=True):
                run.text = xml_safe(text)
        return rewrite(archive, {path: xml_bytes(tree) for path, tree in trees.items()})

    return Document(texts, "html", write)


def _runs(element: Any) -> list[Run]:
    """The runs of a paragraph (or of a span or link in it), in order: its own text, then each
    child's runs (a span's, a link's) and the text after the child. A nested paragraph's text, and
    that of notes, frames and comments, is not this paragraph's."""
    runs = [Run(element, "text")]
    for child in element:
        if child.tag in INLINE:
            runs += _runs(child)
        runs.append(Run(child, "tail"))
    return runs


def _spaces_to_text(paragraph: Any) -> None:
    """Each `text:s` (c spaces) of the paragraph's own text becomes spaces in the text around it."""
    for s in [e for e in paragraph.iter(f"{TEXT}s") if _owner(e) is paragraph]:
        count = s.get(f"{TEXT}c", "1")
        spaces = " " * min(int(count) if count.isdigit() else 1, 64)  # a layout's spaces, not a bomb
        parent, previous = s.getparent(), s.getprevious()
        joined = spaces + (s.tail or "")
        if previous is not None:
            previous.tail = (previous.tail or "") + joined
        else:
            parent.text = (parent.text or "") + joined
        parent.remove(s)


def _owner(element: Any) -> Any:
    """The paragraph whose own text holds `element`: up through spans and links only."""
    parent = element.getparent()
    while parent is not None and parent.tag in INLINE:
        parent = parent.getparent()
    return parent
