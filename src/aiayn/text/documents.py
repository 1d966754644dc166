"""Files translated with their structure: .txt, .html, .srt and .docx.

Each kind of file is read into the texts a Translator takes (and the format they are in), and
written back around their translations:

    document = read(data, "talk.srt")
    translations = translator.translate(document.texts, format=document.format)
    data = document.write([t.text for t in translations])

- .txt: each line is a text (line endings kept; the paragraphs of a line cut into sentences). Lines
  end at line feeds and carriage returns only: a form feed or a line separator (U+2028) stays
  inside its line, as in .srt.
- .html, .htm: the whole page is one HTML text (text/markup.py).
- .srt: each cue's text, its lines taken as one text; its number and timing kept, and its
  translation wrapped into as many lines as the cue had.
- .docx: each paragraph (in the body, tables, content controls, text boxes, headers, footers,
  footnotes and endnotes; tracked insertions included, deletions left as they are) is a text, its
  runs written as HTML spans so that each run's formatting stays on the words that belong to it
  (the machinery of HTML's inline tags); runs with the same formatting are merged first, and runs
  holding anything but text (pictures, fields) are kept as they are. Needs python-docx.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import PurePath
from typing import Any

from aiayn.errors import AiaynError

KINDS = {".txt": "txt", ".html": "html", ".htm": "html", ".srt": "srt", ".docx": "docx"}


class DocumentError(AiaynError, ValueError):
    """A file that cannot be translated: its kind, or what is wrong with it and where."""


@dataclass
class Document:
    """A file's texts in the format the translator reads them in, and how to write the file back."""

    texts: list[str]
    format: str  # "text" or "html"
    write: Callable[[Sequence[str]], bytes]  # the translations, in order -> the translated file


def kind(name: str) -> str:
    """The kind of file `name` is, from its extension."""
    suffix = PurePath(name).suffix.lower()
    if suffix not in KINDS:
        what = f"{suffix} files" if suffix else "a file without an extension"
        raise DocumentError(f"{name}: cannot translate {what}; the kinds are {', '.join(KINDS)}")
    return KINDS[suffix]


def read(data: bytes, name: str, max_unpacked: int | None = None) -> Document:
    """The file `name` (its kind from its extension) holding `data`; a .docx file that would unpack
    to more than `max_unpacked` bytes is refused before it is unpacked."""
    which = kind(name)
    if which == "docx":
        if max_unpacked is not None:
            _check_unpacked(data, name, max_unpacked)
        return _docx(data, name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DocumentError(f"{name}, line {line}: not UTF-8 text ({e.reason})") from None
    return {"txt": _txt, "html": _html, "srt": _srt}[which](text, name)


def _check_unpacked(data: bytes, name: str, most: int) -> None:
    """A zip archive's members add up to at most `most` bytes unpacked, as its directory says (a
    member that unpacks to more than it says is cut there by zipfile, and then fails its checksum)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            size = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip archive: `_docx` says what is wrong with it
    if size > most:
        raise DocumentError(f"{name}: {size:,} bytes unpacked; this server unpacks at most {most:,}")


def _lines(text: str) -> list[str]:
    """`text` cut after each line break (a line feed, a carriage return, or both; not the form feeds,
    line separators and others that str.splitlines also takes), each line with its break."""
    return [line for line in re.split(r"(?<=\n)|(?<=\r)(?!\n)", text) if line]


def _encoded(text: str) -> bytes:
    return text.encode("utf-8")


def _txt(text: str, name: str) -> Document:
    lines = _lines(text)
    bodies = [line.rstrip("\r\n") for line in lines]

    def write(translations: Sequence[str]) -> bytes:
        return _encoded("".join(t.replace("\n", " ") + line[len(body):]
                                for t, line, body in zip(translations, lines, bodies, strict=True)))

    return Document(bodies, "text", write)


def _html(text: str, name: str) -> Document:
    return Document([text], "html", lambda translations: _encoded(translations[0]))


_TIMING = re.compile(r"^\s*\d+:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d+:\d{2}:\d{2}[,.]\d{1,3}")


def _srt(text: str, name: str) -> Document:
    """Cues: a number, a timing line, text lines, a blank line."""
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = [line.rstrip("\r\n") for line in _lines(text)]
    cues: list[tuple[list[str], list[str]]] = []  # (number and timing lines, text lines)
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        head = [lines[i]]
        if not _TIMING.match(lines[i]):
            head.append(lines[i + 1] if i + 1 < len(lines) else "")
            if not lines[i].strip().isdigit() or not _TIMING.match(head[1]):
                raise DocumentError(f"{name}, line {i + 1}: not a subtitle cue (a number, then a timing "
                                    f"line such as 00:00:01,000 --> 00:00:02,500)")
        i += len(head)
        body = []
        while i < len(lines) and lines[i].strip():
            body.append(lines[i])
            i += 1
        cues.append((head, body))

    def write(translations: Sequence[str]) -> bytes:
        out = [newline.join(head + _wrap(t, len(body))) for (head, body), t in
               zip(cues, translations, strict=True)]
        return _encoded(newline.join(cue + newline for cue in out))

    return Document([" ".join(line.strip() for line in body) for _, body in cues], "text", write)


def _wrap(text: str, lines: int) -> list[str]:
    """`text` in (at most) `lines` lines: at its dialogue dashes ("- Who? - Me.") if it has one per
    line, else cut at spaces into lines as short as they can be."""
    words = text.split()
    if lines <= 1 or len(words) < 2:
        return [text] if text or lines else []
    turns = re.split(r"\s+(?=[-–—]\s)", text)
    if len(turns) == lines and text.lstrip()[:1] in "-–—":
        return turns

    def filled(width: int) -> list[str]:
        out: list[str] = []
        for word in words:
            if out and len(out[-1]) + 1 + len(word) <= width:
                out[-1] += " " + word
            else:
                out.append(word)
        return out

    low, high = max(len(w) for w in words), len(text)
    while low < high:  # the narrowest width that needs no more lines
        middle = (low + high) // 2
        low, high = (low, middle) if len(filled(middle)) <= lines else (middle + 1, high)
    return filled(low)


# The parts of a Word file that hold text to translate: the body, headers, footers, footnotes and
# endnotes (python-docx reads the last two as plain XML parts once told they are XML).
_STORIES = {f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}+xml"
            for kind in ("document.main", "header", "footer", "footnotes", "endnotes")}
_NOTES = [f"application/vnd.openxmlformats-officedocument.wordprocessingml.{kind}+xml"
          for kind in ("footnotes", "endnotes")]


def _docx(data: bytes, name: str) -> Document:
    try:
        import docx
        from docx.opc.part import PartFactory, XmlPart
    except ImportError:
        raise DocumentError(f"{name}: .docx files need python-docx: pip install 'aiayn[files]'") from None
    for content_type in _NOTES:
        PartFactory.part_type_for.setdefault(content_type, XmlPart)
    try:
        book = docx.Document(io.BytesIO(data))
    except Exception as e:  # python-docx raises zipfile, lxml and its own errors
        raise DocumentError(f"{name}: not a Word .docx file ({type(e).__name__}: {e})") from None
    runs = [rs for rs in map(_text_runs, _paragraphs(book)) if "".join(r.text for r in rs).strip()]
    texts = ["".join(f'<span id="{i}">{html.escape(r.text, quote=False)}</span>' for i, r in enumerate(rs))
             for rs in runs]

    def write(translations: Sequence[str]) -> bytes:
        for rs, translation in zip(runs, translations, strict=True):
            for run, text in zip(rs, _span_texts(translation, [r.text for r in rs]), strict=True):
                run.text = text
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


def _text_runs(paragraph: Any) -> list[Any]:
    """A paragraph's runs that hold only text, neighbours with the same formatting (in the same
    element: a tracked insertion stays one) merged into the first of them (the others emptied)."""
    runs, last = [], None
    for run in _all_runs(paragraph):
        if any(child.tag.rsplit("}", 1)[-1] not in ("rPr", "t", "tab", "br", "cr")
               for child in run._r):
            last = None  # a picture or a field: kept, and it separates the runs around it
            continue
        rpr = run._r.rPr
        form = (rpr.xml if rpr is not None else "", run._r.getparent())
        if runs and form == last:
            text = run.text
            run.text = ""
            runs[-1].text += text
        else:
            runs.append(run)
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


def _span_texts(translated: str, sources: list[str]) -> list[str]:
    """The text of each span <span id="i"> in `translated` HTML (`sources`: the spans' texts before
    translation). Text outside every span (the space between them), and that of a span without a
    word, goes to a neighbouring span with a word: the one before it if that one ended with a space
    in the source and the one after did not start with one, else the one after (if any)."""
    n = len(sources)
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
    worded = {i for i in range(n) if "".join(t for j, t in pieces if j == i).strip()}
    texts, floating, last = [""] * n, "", None
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
