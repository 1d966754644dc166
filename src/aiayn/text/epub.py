"""E-books (.epub, EPUB 2 and 3): every XHTML document of the book (chapters, the EPUB 3 table of
contents) through the HTML path (text/markup.py: only text changes, markup kept), the EPUB 2 table
of contents (toc.ncx: its title and each entry's label), and the book's titles (the package's
`dc:title`). Everything else (images, styles, fonts, the spine and manifest) is copied as it was,
the `mimetype` member first and stored, as EPUB readers require.
"""

from __future__ import annotations

import html
import posixpath
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from aiayn.text import archive as zipped
from aiayn.text.archive import DocumentError, member, open_zip, parse_xml, refuse_entities
from aiayn.text.document import Document

CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
OPF = "{http://www.idpf.org/2007/opf}"
DC = "{http://purl.org/dc/elements/1.1/}"
NCX = "{http://www.daisy.org/z3986/2005/ncx/}"
XHTML_TYPES = ("application/xhtml+xml", "text/html")


def read(data: bytes, name: str) -> Document:
    archive = open_zip(data, name, "an EPUB e-book")
    if member(archive, "mimetype", name).strip() != b"application/epub+zip":
        raise DocumentError(f"{name}: not an EPUB e-book (its mimetype is not application/epub+zip)")
    container = parse_xml(member(archive, "META-INF/container.xml", name), name, "META-INF/container.xml")
    rootfile = container.find(f".//{CONTAINER}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        raise DocumentError(f"{name}: META-INF/container.xml names no package document")
    opf_path = rootfile.get("full-path")
    package = parse_xml(member(archive, opf_path, name), name, opf_path)
    chapters, tocs = _manifest(package, posixpath.dirname(opf_path), archive, name)
    pages = []  # (path, XHTML text)
    for path in chapters:
        raw = member(archive, path, name)
        refuse_entities(raw, name, path)
        try:
            pages.append((path, raw.decode("utf-8-sig")))
        except UnicodeDecodeError as e:
            raise DocumentError(f"{name}: {path} is not UTF-8 ({e.reason})") from None
    trees = {opf_path: package} | {path: parse_xml(member(archive, path, name), name, path) for path in tocs}
    labels = [*package.iter(f"{DC}title"), *(e for path in tocs for e in trees[path].iter(f"{NCX}text"))]
    labels = [e for e in labels if (e.text or "").strip()]
    texts = [text for _, text in pages] + [html.escape(e.text, quote=False) for e in labels]

    def write(translations: Sequence[str]) -> bytes:
        for element, translation in zip(labels, translations[len(pages):], strict=True):
            element.text = zipped.xml_safe(html.unescape(translation))
        replaced = {path: zipped.xml_safe(text).encode("utf-8")
                    for (path, _), text in zip(pages, translations[:len(pages)], strict=True)}
        replaced |= {path: zipped.xml_bytes(tree) for path, tree in trees.items()}
        return zipped.rewrite(archive, replaced)

    return Document(texts, "html", write)


def _manifest(package: Any, base: str, archive: Any, name: str) -> tuple[list[str], list[str]]:
    """The archive paths of the book's XHTML documents (in the spine's order, then the others) and
    of its NCX tables of contents."""
    items = {}
    for item in package.iter(f"{OPF}item"):
        path = posixpath.normpath(posixpath.join(base, unquote(item.get("href", ""))))
        if path in archive.namelist():
            items[item.get("id")] = (path, item.get("media-type", ""))
    spine = [items[ref.get("idref")][0] for ref in package.iter(f"{OPF}itemref") if ref.get("idref") in items]
    pages = [p for p, kind in items.values() if kind in XHTML_TYPES]
    if not pages:
        raise DocumentError(f"{name}: the package lists no XHTML document to translate")
    ordered = [p for p in dict.fromkeys(spine) if p in pages] + [p for p in pages if p not in spine]
    tocs = [p for p, kind in items.values() if kind == "application/x-dtbncx+xml"]
    return ordered, tocs
