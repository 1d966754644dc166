"""Files that are zip archives of XML (Word, PowerPoint, OpenDocument, EPUB), opened with care: the
size they unpack to is checked before anything is unpacked, XML that declares entities is refused
(an entity bomb expands a few bytes into gigabytes), and an archive is written back member by member
in its own order, each compressed as it was (OpenDocument and EPUB need their `mimetype` first and
stored).
"""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

from aiayn.text.document import DocumentError

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` without the characters XML 1.0 cannot hold (control characters but tab and line
    breaks), which a model that spells bytes out can write."""
    return _NOT_XML.sub("", text)


def check_unpacked(data: bytes, name: str, most: int) -> None:
    """A zip archive's members add up to at most `most` bytes unpacked, as its directory says (a
    member that unpacks to more than it says is cut there by zipfile, and then fails its checksum)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            size = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return  # not a zip archive: the reader of its kind says what is wrong with it
    if size > most:
        raise DocumentError(f"{name}: {size:,} bytes unpacked; this server unpacks at most {most:,}")


def open_zip(data: bytes, name: str, what: str) -> zipfile.ZipFile:
    """`data` as a zip archive; `what`: the kind of file it should be, for the error."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise DocumentError(f"{name}: not {what} (not a whole zip archive: {e})") from None


def member(archive: zipfile.ZipFile, path: str, name: str) -> bytes:
    """One member's bytes; a damaged one is a DocumentError naming it."""
    try:
        return archive.read(path)
    except KeyError:
        raise DocumentError(f"{name}: {path} is missing") from None
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as e:  # a bad checksum, a truncated member
        raise DocumentError(f"{name}: {path} is damaged ({e})") from None


def refuse_entities(data: bytes, name: str, path: str) -> None:
    """XML or XHTML that declares entities is refused before it is parsed."""
    if b"<!ENTITY" in data:
        raise DocumentError(f"{name}: {path} declares XML entities, which are not expanded here")


def refuse_entities_in(archive: zipfile.ZipFile, name: str) -> None:
    """`refuse_entities` for every XML member of an archive."""
    for info in archive.infolist():
        if info.filename.endswith((".xml", ".rels", ".opf", ".ncx", ".xhtml", ".htm", ".html")):
            refuse_entities(member(archive, info.filename, name), name, info.filename)


def parse_xml(data: bytes, name: str, path: str) -> Any:
    """A member's XML as an lxml tree: no entities, no DTD loaded, nothing fetched."""
    try:
        from lxml import etree
    except ImportError:
        raise DocumentError(f"{name}: reading it needs lxml: pip install 'aiayn[files]'") from None

    refuse_entities(data, name, path)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False,
                             remove_blank_text=False)
    try:
        return etree.fromstring(data, parser).getroottree()
    except etree.XMLSyntaxError as e:
        raise DocumentError(f"{name}: {path}, line {e.lineno}: not well-formed XML ({e.msg})") from None


def xml_bytes(tree: Any) -> bytes:
    """A tree written back as its member: UTF-8 with the XML declaration, standalone as it was."""
    from lxml import etree

    return etree.tostring(tree, xml_declaration=True, encoding="UTF-8", standalone=tree.docinfo.standalone)


def rewrite(archive: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    """The archive with the members in `replaced` given new bytes, every other copied as it was, in
    the same order and with the same compression."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as written:
        for info in archive.infolist():
            data = replaced[info.filename] if info.filename in replaced else archive.read(info)
            written.writestr(info, data, compress_type=info.compress_type)
    return out.getvalue()
