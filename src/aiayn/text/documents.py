"""Files translated with their structure: .txt, .html, .srt, .docx, .pptx, .odt, .odp, .epub and .pdf.

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
- .docx (text/word.py), .pptx (text/slides.py), .odt and .odp (text/opendocument.py): each
  paragraph is a text, its formatted runs carried as HTML spans (text/runs.py).
- .epub (text/epub.py): each XHTML document through the HTML path; titles and the table of contents.
- .pdf (text/pdf.py): each page's text blocks, written back in their boxes over the page's images
  and drawings.

The zip-based kinds are checked before they are unpacked (text/archive.py): their size unpacked
(`max_unpacked`), and XML that declares entities is refused.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import PurePath

from aiayn.text import epub, opendocument, pdf, slides, word
from aiayn.text.archive import check_unpacked
from aiayn.text.document import Document, DocumentError

KINDS = {".txt": "txt", ".html": "html", ".htm": "html", ".srt": "srt", ".docx": "docx", ".pptx": "pptx",
         ".odt": "odf", ".odp": "odf", ".epub": "epub", ".pdf": "pdf"}
BINARY = {"docx": word.read, "pptx": slides.read, "odf": opendocument.read, "epub": epub.read,
          "pdf": pdf.read}  # the kinds read from bytes by a module of their own
ARCHIVES = ("docx", "pptx", "odf", "epub")  # those that are zip archives
__all__ = ["KINDS", "Document", "DocumentError", "kind", "read"]


def kind(name: str) -> str:
    """The kind of file `name` is, from its extension (in any case)."""
    suffix = PurePath(name).suffix.lower()
    if suffix not in KINDS:
        what = f"{suffix} files" if suffix else "a file without an extension"
        raise DocumentError(f"{name}: cannot translate {what}; the kinds are {', '.join(KINDS)}")
    return KINDS[suffix]


def read(data: bytes, name: str, max_unpacked: int | None = None) -> Document:
    """The file `name` (its kind from its extension) holding `data`; a zip-based file that would
    unpack to more than `max_unpacked` bytes is refused before it is unpacked."""
    which = kind(name)
    if which in BINARY:
        if which in ARCHIVES and max_unpacked is not None:
            check_unpacked(data, name, max_unpacked)
        return BINARY[which](data, name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DocumentError(f"{name}, line {line}: not UTF-8 text ({e.reason})") from None
    return {"txt": _txt, "html": _html, "srt": _srt}[which](text, name)


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
        for each in words:
            if out and len(out[-1]) + 1 + len(each) <= width:
                out[-1] += " " + each
            else:
                out.append(each)
        return out

    low, high = max(len(w) for w in words), len(text)
    while low < high:  # the narrowest width that needs no more lines
        middle = (low + high) // 2
        low, high = (low, middle) if len(filled(middle)) <= lines else (middle + 1, high)
    return filled(low)
