"""PDF files: each page's text blocks translated and written back in their place, the page's images
and drawings kept. pdfminer.six finds the text blocks (their boxes and font sizes); pypdf removes the
page's text (its text objects, `BT` ... `ET`, from the page's content) and keeps everything else;
reportlab writes each block's translation into its box, wrapped, at the block's font size or smaller
until it fits, in a font that covers it (DejaVu Sans, which matplotlib ships, for Latin, Greek and
Cyrillic; a CID font that PDF readers carry for Chinese, Japanese and Korean). All three are
permissively licensed (MIT, BSD). Formatting inside a block (bold words, colours) is not kept: a
block is written in one font and colour; text drawn inside a form (an XObject) is left as it is.
"""

from __future__ import annotations

import io
import re
import statistics
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.text.archive import DocumentError, xml_safe
from aiayn.text.document import Document

MAX_PAGES = 2_000  # pages of one file at most: counted from its page tree before anything is read
SMALLEST = 4.0  # points: a translation is shrunk down to this size to fit its box, then overflows
CJK_FONTS = {"zh": "STSong-Light", "ja": "HeiseiMin-W3", "ko": "HYSMyeongJo-Medium"}  # reportlab's CID fonts


@dataclass
class Block:
    """A text block of a page: its text, box (x0, y0, x1, y1 in points) and font size."""

    page: int
    text: str
    box: tuple[float, float, float, float]
    size: float


def read(data: bytes, name: str) -> Document:
    try:
        import pdfminer  # noqa: F401
        import pypdf
        import reportlab  # noqa: F401
    except ImportError:
        raise DocumentError(f"{name}: PDF files need pdfminer.six, pypdf and reportlab: "
                            "pip install 'aiayn[files]'") from None
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise DocumentError(f"{name}: the PDF is encrypted")
        pages = len(reader.pages)
    except DocumentError:
        raise
    except Exception as e:  # pypdf raises its own errors, and ValueError and KeyError on damaged files
        raise DocumentError(f"{name}: not a PDF file ({type(e).__name__}: {e})") from None
    if pages > MAX_PAGES:
        raise DocumentError(f"{name}: {pages:,} pages; at most {MAX_PAGES:,} are translated")
    blocks = _blocks(data, name)
    texts = [b.text for b in blocks]

    def write(translations: Sequence[str]) -> bytes:
        return _written(reader, blocks, list(translations))

    return Document(texts, "text", write)


def _blocks(data: bytes, name: str) -> list[Block]:
    """Every page's text blocks, in reading order as pdfminer finds them."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTTextBox

    blocks = []
    try:
        for number, page in enumerate(extract_pages(io.BytesIO(data), laparams=LAParams())):
            for box in page:
                if not isinstance(box, LTTextBox):
                    continue
                text = re.sub(r"\s+", " ", box.get_text()).strip()
                sizes = [c.size for line in box for c in line if isinstance(c, LTChar)]
                if text:
                    blocks.append(Block(number, text, box.bbox, statistics.median(sizes) if sizes else 10.0))
    except Exception as e:  # pdfminer raises its own errors on damaged files
        raise DocumentError(f"{name}: its text cannot be read ({type(e).__name__}: {e})") from None
    return blocks


def _written(reader: Any, blocks: list[Block], translations: list[str]) -> bytes:
    """The PDF with its text objects removed and each block's translation written in its box."""
    import pypdf
    from pypdf.generic import ContentStream, NameObject

    writer = pypdf.PdfWriter(clone_from=reader)
    for number, page in enumerate(writer.pages):
        content = page.get_contents()
        if content is not None:
            stream = ContentStream(content, writer)
            stream.operations = _without_text(stream.operations)
            page[NameObject("/Contents")] = writer._add_object(stream)
        here = [(b, t) for b, t in zip(blocks, translations, strict=True) if b.page == number]
        if here:
            page.merge_page(_overlay(page, here))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _without_text(operations: list[tuple[Any, bytes]]) -> list[tuple[Any, bytes]]:
    """A content stream's operations without its text objects (BT ... ET)."""
    kept, inside = [], False
    for operands, operator in operations:
        if operator == b"BT":
            inside = True
        elif operator == b"ET":
            inside = False
        elif not inside:
            kept.append((operands, operator))
    return kept


def _overlay(page: Any, blocks: list[tuple[Block, str]]) -> Any:
    """A one-page PDF of the page's size holding each translation in its block's box."""
    import pypdf
    from reportlab.pdfgen.canvas import Canvas

    box = page.mediabox
    out = io.BytesIO()
    canvas = Canvas(out, pagesize=(float(box.width), float(box.height)))
    canvas.translate(-float(box.left), -float(box.bottom))
    for block, text in blocks:
        _draw(canvas, block, xml_safe(text).replace("\n", " ").strip())
    canvas.save()
    return pypdf.PdfReader(io.BytesIO(out.getvalue())).pages[0]


def _draw(canvas: Any, block: Block, text: str) -> None:
    """`text` wrapped into the block's box from its top, at the block's size or smaller to fit."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    if not text:
        return
    font = _font(text)
    x0, y0, x1, y1 = block.box
    width, height = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    size = block.size
    while True:
        lines = _wrapped(text, lambda s, size=size: stringWidth(s, font, size), width)
        if (len(lines) - 1) * size * 1.15 + size * 0.75 <= height or size <= SMALLEST:
            break
        size = max(SMALLEST, size * 0.9)
    canvas.setFont(font, size)
    for i, line in enumerate(lines):
        canvas.drawString(x0, y1 - size * (0.9 + 1.15 * i), line)


def _wrapped(text: str, width_of: Any, width: float) -> list[str]:
    """`text` cut into lines no wider than `width`: at spaces, and between characters in scripts
    written without them."""
    lines: list[str] = []
    for word in re.findall(r"\S+\s*", text):
        pieces = [word] if width_of(word.strip()) <= width or " " in text.strip() else list(word)
        for piece in pieces:
            if lines and width_of((lines[-1] + piece).rstrip()) <= width:
                lines[-1] += piece
            else:
                lines.append(piece)
    return [line.rstrip() for line in lines] or [text]


def _font(text: str) -> str:
    """The name of a font (registered with reportlab on first use) that has the characters of `text`."""
    from reportlab.pdfbase import pdfmetrics

    script = _cjk(text)
    name = CJK_FONTS[script] if script else "DejaVuSans"
    if name not in pdfmetrics.getRegisteredFontNames():
        if script:
            from reportlab.pdfbase.cidfonts import UnicodeCIDFont

            pdfmetrics.registerFont(UnicodeCIDFont(name))
        else:
            import matplotlib
            from reportlab.pdfbase.ttfonts import TTFont

            path = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"
            pdfmetrics.registerFont(TTFont(name, str(path)))
    return name


def _cjk(text: str) -> str | None:
    """"ja", "ko" or "zh" when `text` is written in that script (kana, hangul, Han), else None."""
    names = [unicodedata.name(c, "") for c in text if ord(c) > 0x2E7F]
    if any(n.startswith(("HIRAGANA", "KATAKANA")) for n in names):
        return "ja"
    if any(n.startswith("HANGUL") for n in names):
        return "ko"
    if any(n.startswith("CJK") for n in names):
        return "zh"
    return None
