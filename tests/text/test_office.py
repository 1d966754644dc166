"""Slides, OpenDocument files and e-books in, the same files out: every text run translated, the
formatting, tables, layout and pictures kept, and the output opened by the library that reads its
kind; broken and hostile files refused with one line naming the problem."""

import io
import zipfile

import pytest
from lxml import etree

from aiayn.text.documents import DocumentError, read
from aiayn.text.markup import Document as Html

from .test_documents import translated


def _png():
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (4, 4), (200, 30, 30)).save(out, "PNG")
    return out.getvalue()


PNG = _png()  # a red square of 4 pixels


def sentences(document):
    return [" ".join(Html.parse(t, "en").sentences) for t in document.texts]


def slides_file():
    """A presentation made by python-pptx: a title slide, a slide with a bold word in a text box, a
    table, a group of shapes, a picture and speaker notes."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    title = deck.slides.add_slide(deck.slide_layouts[0])
    title.shapes.title.text = "A dog runs."
    title.placeholders[1].text = "Two cats sleep."
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "The red bike."
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(4), Inches(1)).text_frame
    paragraph = box.paragraphs[0]
    for text, bold in (("A man rides a ", False), ("red", True), (" bike.", False)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold
    table = slide.shapes.add_table(1, 2, Inches(1), Inches(3), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell.", "Right & cell."
    group = slide.shapes.add_group_shape()
    group.shapes.add_textbox(Inches(5), Inches(5), Inches(2), Inches(1)).text_frame.text = "In a group."
    slide.shapes.add_picture(io.BytesIO(PNG), Inches(6), Inches(1))
    slide.notes_slide.notes_text_frame.text = "Say it slowly."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def test_a_presentation_keeps_its_slides_runs_tables_groups_pictures_and_notes():
    from pptx import Presentation

    document = read(slides_file(), "talk.PPTX")
    assert sentences(document) == ["A dog runs.", "Two cats sleep.", "The red bike.",
                                   "A man rides a red bike.", "Left cell.", "Right & cell.", "In a group.",
                                   "Say it slowly."]
    deck = Presentation(io.BytesIO(translated(document)))
    first, second = deck.slides
    assert first.shapes.title.text == "A DOG RUNS." and first.placeholders[1].text == "TWO CATS SLEEP."
    assert second.slide_layout.name == "Title Only" and second.shapes.title.text == "THE RED BIKE."
    box, table, group, picture = list(second.shapes)[1:]
    runs = box.text_frame.paragraphs[0].runs
    assert "".join(r.text for r in runs) == "A MAN RIDES A RED BIKE."
    assert [r.text for r in runs if r.font.bold] == ["RED"]
    assert [c.text for c in table.table.rows[0].cells] == ["LEFT CELL.", "RIGHT & CELL."]
    assert [s.text_frame.text for s in group.shapes] == ["IN A GROUP."]
    assert picture.image.blob == PNG
    assert second.notes_slide.notes_text_frame.text == "SAY IT SLOWLY."


def framed(words, **size):
    """An OpenDocument frame (draw:frame) holding a text box with one paragraph of `words`."""
    from odf import draw, text

    frame = draw.Frame(**size)
    box = draw.TextBox()
    box.addElement(text.P(text=words))
    frame.addElement(box)
    return frame


def opendocument_text():
    """A text document made by odfpy: a heading, a paragraph with a bold span and two spaces, a
    list, a table, a footnote and a frame with its own text box."""
    from odf import style, table, text
    from odf.opendocument import OpenDocumentText

    doc = OpenDocumentText()
    bold = style.Style(name="Bold", family="text")
    bold.addElement(style.TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    doc.text.addElement(text.H(outlinelevel=1, text="A dog runs."))
    p = text.P(text="A man rides a ")
    p.addElement(text.Span(stylename=bold, text="red"))
    p.addText(" bike.")
    p.addElement(text.S(c=2))
    p.addText("It is fast.")
    note = text.Note(id="n1", noteclass="footnote")
    note.addElement(text.NoteCitation(text="1"))
    body = text.NoteBody()
    body.addElement(text.P(text="In a footnote."))
    note.addElement(body)
    p.addElement(note)
    doc.text.addElement(p)
    items = text.List()
    for words in ("First item.", "Second item."):
        item = text.ListItem()
        item.addElement(text.P(text=words))
        items.addElement(item)
    doc.text.addElement(items)
    grid = table.Table(name="T")
    grid.addElement(table.TableColumn(numbercolumnsrepeated=2))
    row = table.TableRow()
    for words in ("Left cell.", "Right & cell."):
        cell = table.TableCell()
        cell.addElement(text.P(text=words))
        row.addElement(cell)
    grid.addElement(row)
    doc.text.addElement(grid)
    holder = text.P()
    holder.addElement(framed("In a frame.", width="5cm", height="2cm", anchortype="paragraph"))
    doc.text.addElement(holder)
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def test_an_opendocument_text_keeps_headings_spans_lists_tables_notes_and_frames():
    from odf import teletype, text
    from odf.opendocument import load

    document = read(opendocument_text(), "report.odt")
    assert sorted(sentences(document)) == sorted([
        "A dog runs.", "A man rides a red bike. It is fast.", "In a footnote.", "First item.", "Second item.",
        "Left cell.", "Right & cell.", "In a frame."])
    data = translated(document)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        first = archive.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
    doc = load(io.BytesIO(data))
    heading, = doc.getElementsByType(text.H)
    assert teletype.extractText(heading) == "A DOG RUNS."
    spans = doc.getElementsByType(text.Span)
    assert [teletype.extractText(s) for s in spans] == ["RED"]  # the bold span is on the same word
    paragraphs = [teletype.extractText(p) for p in doc.getElementsByType(text.P)]
    for words in ("IN A FOOTNOTE.", "FIRST ITEM.", "SECOND ITEM.", "LEFT CELL.", "RIGHT & CELL.",
                  "IN A FRAME."):
        assert words in paragraphs
    assert len(doc.getElementsByType(text.Note)) == 1


def opendocument_presentation():
    from odf import draw, presentation, style
    from odf.opendocument import OpenDocumentPresentation

    doc = OpenDocumentPresentation()
    layout = style.PageLayout(name="L")
    doc.automaticstyles.addElement(layout)
    master = style.MasterPage(name="M", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    page = draw.Page(masterpagename=master)
    page.addElement(framed("A dog runs.", width="20cm", height="3cm", x="1cm", y="1cm"))
    notes = presentation.Notes()
    notes.addElement(framed("Say it slowly.", width="20cm", height="3cm"))
    page.addElement(notes)
    doc.presentation.addElement(page)
    out = io.BytesIO()
    doc.write(out)
    return out.getvalue()


def test_an_opendocument_presentation_keeps_its_slides_and_notes():
    from odf import draw, teletype, text
    from odf.opendocument import load

    document = read(opendocument_presentation(), "talk.odp")
    assert sentences(document) == ["A dog runs.", "Say it slowly."]
    doc = load(io.BytesIO(translated(document)))
    assert len(doc.getElementsByType(draw.Page)) == 1
    paragraphs = [teletype.extractText(p) for p in doc.getElementsByType(text.P)]
    assert paragraphs == ["A DOG RUNS.", "SAY IT SLOWLY."]


CONTAINER = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xml'
             'ns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application'
             '/oebps-package+xml"/></rootfiles></container>')
PACKAGE = ('<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" vers'
           'ion="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><'
           'dc:identifier id="id">x</dc:identifier><dc:title>The dog book</dc:title><dc:language>en<'
           '/dc:language></metadata><manifest><item id="c1" href="Text/chapter%201.xhtml" media-type'
           '="application/xhtml+xml"/><item id="nav" href="nav.xhtml" media-type="application/xhtml+'
           'xml" properties="nav"/><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xm'
           'l"/><item id="img" href="Images/dot.png" media-type="image/png"/></manifest><spine toc="'
           'ncx"><itemref idref="c1"/></spine></package>')
CHAPTER = ('<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/19'
           '99/xhtml" xml:lang="en"><head><title>Chapter one</title></head><body><h1>A dog runs.</h1'
           '><p>A man rides a <b>red</b> bike.<br/>It is fast.</p><img src="../Images/dot.png" alt="'
           '"/></body></html>')
NAV = ('<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml" xmlns:e'
       'pub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head><body><nav epub:t'
       'ype="toc"><ol><li><a href="Text/chapter%201.xhtml">Chapter one</a></li></ol></nav></body'
       '></html>')
NCX = ('<?xml version="1.0" encoding="UTF-8"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
       'version="2005-1"><head/><docTitle><text>The dog book</text></docTitle><navMap><navPoint '
       'id="p1" playOrder="1"><navLabel><text>Chapter one</text></navLabel><content src="Text/ch'
       'apter%201.xhtml"/></navPoint></navMap></ncx>')


def epub_file(chapter=CHAPTER):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        for path, data in (("META-INF/container.xml", CONTAINER), ("OEBPS/content.opf", PACKAGE),
                           ("OEBPS/Text/chapter 1.xhtml", chapter), ("OEBPS/nav.xhtml", NAV),
                           ("OEBPS/toc.ncx", NCX), ("OEBPS/Images/dot.png", PNG)):
            book.writestr(path, data, compress_type=zipfile.ZIP_DEFLATED)
    return out.getvalue()


def test_an_epub_translates_its_chapters_titles_and_table_of_contents():
    document = read(epub_file(), "book.epub")
    assert sentences(document) == ["Chapter one A dog runs. A man rides a red bike. It is fast.",
                                   "Contents Chapter one", "The dog book", "The dog book", "Chapter one"]
    data = translated(document)
    with zipfile.ZipFile(io.BytesIO(data)) as book:
        first = book.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
        assert [i.filename for i in book.infolist()] == [i.filename for i in
                                                        zipfile.ZipFile(io.BytesIO(epub_file())).infolist()]
        chapter = book.read("OEBPS/Text/chapter 1.xhtml")
        parts = {name: book.read(name) for name in ("OEBPS/content.opf", "OEBPS/toc.ncx", "OEBPS/nav.xhtml")}
        assert book.read("OEBPS/Images/dot.png") == PNG
    page = etree.fromstring(chapter)  # still well-formed XML
    ns = {"h": "http://www.w3.org/1999/xhtml"}
    assert page.findtext(".//h:h1", namespaces=ns) == "A DOG RUNS."
    assert page.findtext(".//h:b", namespaces=ns) == "RED"
    assert page.findtext(".//h:title", namespaces=ns) == "CHAPTER ONE"
    assert page.find(".//h:img", namespaces=ns).get("src") == "../Images/dot.png"
    assert b"<br/>" in chapter
    assert chapter.startswith(b'<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>')
    assert b"<dc:title>THE DOG BOOK</dc:title>" in parts["OEBPS/content.opf"]
    assert [e.text for e in etree.fromstring(parts["OEBPS/toc.ncx"]).iter("{*}text")] == ["THE DOG BOOK",
                                                                                            "CHAPTER ONE"]
    assert b">CHAPTER ONE</a>" in parts["OEBPS/nav.xhtml"]


BOMB = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&l'
        'ol;">]><html xmlns="http://www.w3.org/1999/xhtml"><body><p>&lol2;</p></body></html>')


def with_member(data, path, replacement):
    """An archive with one member's bytes replaced."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            target.writestr(info, replacement if info.filename == path else source.read(info))
    return out.getvalue()


@pytest.mark.parametrize("kind, make, part, xml", [
    ("pptx", slides_file, "ppt/slides/slide1.xml", "ppt/slides/slide1.xml"),
    ("odt", opendocument_text, "content.xml", "content.xml"),
    ("odp", opendocument_presentation, "content.xml", "content.xml"),
    ("epub", epub_file, "OEBPS/Text/chapter 1.xhtml", "OEBPS/content.opf")])  # XHTML: read as HTML
def test_broken_and_hostile_files_of_each_kind_are_refused_with_one_line(kind, make, part, xml):
    good = make()
    name = f"f.{kind}"
    with pytest.raises(DocumentError, match=rf"^{name}: not .*\(not a whole zip archive: .*\)$"):
        read(good[:len(good) // 2], name)  # truncated
    with pytest.raises(DocumentError, match=rf"^{name}: {part} declares XML entities, which are not"):
        read(with_member(good, part, BOMB), name)
    with pytest.raises(DocumentError, match=rf"^{name}: {xml}, line 1: not well-formed XML"):
        read(with_member(good, xml, "<a><b></a>"), name)
    bomb = with_member(good, part, b"<" + b" " * 30_000_000 + b">")
    with pytest.raises(DocumentError, match=rf"^{name}: 3\d,\d{{3}},\d{{3}} bytes unpacked; this server"):
        read(bomb, name, max_unpacked=16 << 20)


def pdf_file():
    """Two pages written by reportlab: a heading and a paragraph of two lines over a rectangle and a
    picture; a line on the second page."""
    from reportlab.lib.utils import ImageReader
    from reportlab.pdfgen.canvas import Canvas

    out = io.BytesIO()
    canvas = Canvas(out, pagesize=(595, 842))
    canvas.setFont("Helvetica-Bold", 18)
    canvas.drawString(72, 760, "A dog runs on the beach.")
    canvas.setFont("Helvetica", 11)
    canvas.drawString(72, 720, "A man in a blue shirt is standing on a ladder.")
    canvas.drawString(72, 706, "Two young children are playing in the sand.")
    canvas.rect(60, 400, 200, 100)
    canvas.drawImage(ImageReader(io.BytesIO(PNG)), 300, 400, 50, 50)
    canvas.showPage()
    canvas.setFont("Helvetica", 12)
    canvas.drawString(72, 700, "A woman rides a bike.")
    canvas.showPage()
    canvas.save()
    return out.getvalue()


def test_a_pdf_keeps_its_pages_blocks_pictures_and_drawings():
    import pypdf

    document = read(pdf_file(), "flyer.pdf")
    assert document.format == "text" and document.texts == [
        "A dog runs on the beach.",
        "A man in a blue shirt is standing on a ladder. Two young children are playing in the sand.",
        "A woman rides a bike."]
    out = pypdf.PdfReader(io.BytesIO(translated(document)))
    first, second = out.pages
    words = first.extract_text().split()
    assert "DOG" in words and "CHILDREN" in words and "dog" not in words  # the old text is gone
    assert second.extract_text().split() == "A WOMAN RIDES A BIKE.".split()
    content = first.get_contents().get_data()
    assert b"60 400 200 100 re" in content  # the rectangle
    picture, = first["/Resources"]["/XObject"].values()
    assert picture.get_object()["/Width"] == 4  # the picture
    assert (float(first.mediabox.width), float(first.mediabox.height)) == (595, 842)


def test_a_pdf_in_chinese_is_written_in_a_font_that_has_its_characters():
    import pypdf

    document = read(pdf_file(), "flyer.pdf")
    chinese = ["一只狗在海滩上跑。", "一个人站在梯子上。", "一个女人骑自行车。"]
    out = pypdf.PdfReader(io.BytesIO(document.write(chinese)))
    assert "一只狗在海滩上跑。" in out.pages[0].extract_text().replace("\n", "")
    fonts = [f.get_object()["/BaseFont"] for f in out.pages[0]["/Resources"]["/Font"].values()]
    assert "/STSong-Light" in [str(f) for f in fonts]


def test_broken_and_oversized_pdfs_are_refused_with_one_line(monkeypatch):
    from aiayn.text import pdf

    good = pdf_file()
    with pytest.raises(DocumentError, match=r"^f.pdf: not a PDF file \("):
        read(good[:len(good) // 3], "f.pdf")
    with pytest.raises(DocumentError, match=r"^f.pdf: not a PDF file \("):
        read(b"%PDF-1.4 nothing else", "f.pdf")
    monkeypatch.setattr(pdf, "MAX_PAGES", 1)
    with pytest.raises(DocumentError, match=r"^f.pdf: 2 pages; at most 1 are translated$"):
        read(good, "f.pdf")
