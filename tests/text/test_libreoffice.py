"""Files that LibreOffice wrote (where it is installed: Debian's libreoffice-writer-nogui and
libreoffice-impress-nogui), converted from the tests' own: each translates, every text run of it,
and opens again in the library that reads its kind. A presentation's master prompts ("Click to edit
Master title style") are left as they are."""

import io
import shutil
import subprocess
import zipfile

import pytest
from lxml import etree

from aiayn.text.documents import read
from aiayn.text.markup import Document as Html

from .test_documents import translated, word_file
from .test_office import slides_file

pytestmark = pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice is not installed")


def converted(tmp_path, name, data, to):
    """`data` (a file called `name`) as LibreOffice converts it `to` a kind ("odt", "pdf", ...)."""
    source = tmp_path / name
    source.write_bytes(data)
    out = tmp_path / "out"
    subprocess.run(["soffice", "--headless", f"-env:UserInstallation=file://{tmp_path}/profile",
                    "--convert-to", to, "--outdir", str(out), str(source)], check=True, capture_output=True,
                   timeout=120)
    return (out / f"{source.stem}.{to.split(':')[0]}").read_bytes()


def words(document):
    return " ".join(" ".join(Html.parse(t, "en").sentences) if document.format == "html" else t
                    for t in document.texts)


def test_files_libreoffice_wrote_translate_and_open_again(tmp_path):
    import pypdf
    from odf import teletype, text
    from odf.opendocument import load
    from pptx import Presentation

    odt = converted(tmp_path, "report.docx", word_file(), "odt")
    odp = converted(tmp_path, "talk.pptx", slides_file(), "odp")
    (tmp_path / "again").mkdir()
    pptx = converted(tmp_path / "again", "talk.odp", odp, "pptx:Impress MS PowerPoint 2007 XML")
    epub = converted(tmp_path, "report.odt", odt, "epub")
    pdf = converted(tmp_path, "flyer.odt", odt, "pdf")
    for name, data in (("report.odt", odt), ("talk.odp", odp), ("talk.pptx", pptx), ("report.epub", epub),
                       ("report.pdf", pdf)):
        document = read(data, name)
        assert "A dog runs." in words(document) and "Click to edit" not in words(document), name
        out = translated(document)
        if name.endswith((".odt", ".odp")):
            doc = load(io.BytesIO(out))
            found = doc.getElementsByType(text.P) + doc.getElementsByType(text.H)
            paragraphs = [teletype.extractText(p) for p in found]
            said = [p for p in paragraphs if p and not p.startswith(("<", "Click to"))]
        elif name.endswith(".pptx"):
            deck = Presentation(io.BytesIO(out))
            said = [shape.text_frame.text for slide in deck.slides for shape in slide.shapes
                    if shape.has_text_frame and shape.text_frame.text]
        elif name.endswith(".epub"):
            with zipfile.ZipFile(io.BytesIO(out)) as book:
                said = ["".join(etree.fromstring(book.read(n)).itertext()) for n in book.namelist()
                        if n.endswith(".xhtml")]
        else:
            said = [page.extract_text() for page in pypdf.PdfReader(io.BytesIO(out)).pages]
        assert said and all(t == t.upper() for t in said), (name, said)
        assert any("A DOG RUNS." in t for t in said), (name, said)
