"""Files in, files out: the text translated, the structure (lines, cues, runs, tables) kept."""

import io
import re

import docx
import pytest

from aiayn.text import documents
from aiayn.text.blocks import proportional
from aiayn.text.documents import DocumentError, read
from aiayn.text.markup import Document as Html
from aiayn.translation import load_translator


def translated(document, translate=str.upper):
    """The file written back, each text (its sentences, for HTML) put through `translate`."""
    if document.format == "text":
        return document.write([translate(t) for t in document.texts])
    out = []
    for text in document.texts:
        page = Html.parse(text, "en")
        done = [translate(s) for s in page.sentences]
        out.append(page.join(done, "de", lambda i, done=done, page=page:
                             proportional(len(page.sentences[i]), done[i])))
    return document.write(out)


def test_a_text_file_keeps_its_lines_and_line_endings():
    data = b"A dog runs. A cat sleeps.\r\n\r\nThe end.\nNo newline at the end"
    document = read(b"\xef\xbb\xbf" + data, "notes.txt")  # a byte-order mark is not text
    assert document.texts == ["A dog runs. A cat sleeps.", "", "The end.", "No newline at the end"]
    assert translated(document) == data.upper()


def test_a_subtitle_file_keeps_numbers_timings_and_line_counts():
    srt = ("1\n00:00:01,000 --> 00:00:02,500\nA man is riding\na red bicycle.\n\n"
           "2\n00:00:03,000 --> 00:00:04,000 X1:40\nTwo dogs play.\n\n\n"
           "3\n00:01:00,000 --> 00:01:02,000\n- Who?\n- Me.\n")
    document = read(srt.encode(), "talk.srt")
    assert document.texts == ["A man is riding a red bicycle.", "Two dogs play.", "- Who? - Me."]
    out = translated(document, lambda t: t.upper() + " JA").decode()
    assert out == ("1\n00:00:01,000 --> 00:00:02,500\nA MAN IS RIDING A\nRED BICYCLE. JA\n\n"
                   "2\n00:00:03,000 --> 00:00:04,000 X1:40\nTWO DOGS PLAY. JA\n\n"
                   "3\n00:01:00,000 --> 00:01:02,000\n- WHO?\n- ME. JA\n")


def test_an_html_file_is_one_page():
    page = '<html><body><p>A <b>dog</b>.</p><script>x = "a";</script></body></html>'
    document = read(page.encode(), "index.HTM")
    assert (document.texts, document.format) == ([page], "html")
    assert translated(document).decode() == page.replace("A <b>dog</b>.", "A <b>DOG</b>.")


def word_file():
    book = docx.Document()
    book.sections[0].header.paragraphs[0].text = "The header."
    book.add_heading("A dog runs.", 1)
    p = book.add_paragraph("A man rides a ")
    p.add_run("red").bold = True
    p.add_run(" bike.")
    p.add_run(" It is")  # two runs with one formatting: merged
    p.add_run(" fast.")
    table = book.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell.", "Right & cell."
    book.add_paragraph("")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_a_word_file_keeps_paragraph_styles_runs_tables_and_headers():
    document = read(word_file(), "report.docx")
    assert [Html.parse(t, "en").sentences for t in document.texts] == [
        ["A dog runs."], ["A man rides a red bike.", "It is fast."], ["Left cell."], ["Right & cell."],
        ["The header."]]
    book = docx.Document(io.BytesIO(translated(document)))
    heading, body, empty = book.paragraphs
    assert (heading.style.name, heading.text) == ("Heading 1", "A DOG RUNS.")
    assert body.text == "A MAN RIDES A RED BIKE. IT IS FAST."
    assert [r.text for r in body.runs if r.bold] == ["RED"]  # the bold run is on the same word
    assert empty.text == ""
    assert [c.text for c in book.tables[0].rows[0].cells] == ["LEFT CELL.", "RIGHT & CELL."]
    assert book.sections[0].header.paragraphs[0].text == "THE HEADER."


@pytest.mark.parametrize("data, name, message", [
    (b"x", "slides.key", "slides.key: cannot translate .key files; the kinds are .txt, .html, .htm, "
                         ".srt, .docx, .pptx, .odt, .odp, .epub, .pdf"),
    (b"x", "README", "README: cannot translate a file without an extension; the kinds are .txt, .html, .htm, "
                     ".srt, .docx, .pptx, .odt, .odp, .epub, .pdf"),
    (b"fine\nnot \xff utf-8\n", "a.txt", "a.txt, line 2: not UTF-8 text (invalid start byte)"),
    (b"1\n00:00:01,000 --> 00:00:02,000\nHi.\n\nHello\nthere\n", "a.srt",
     "a.srt, line 5: not a subtitle cue (a number, then a timing line such as 00:00:01,000 --> "
     "00:00:02,500)"),
    (b"PK not a zip", "a.docx", "a.docx: not a Word .docx file (not a whole zip archive: File is not a zip "
                                "file)"),
])
def test_files_that_cannot_be_translated_get_one_line_errors(data, name, message):
    with pytest.raises(DocumentError) as e:
        read(data, name)
    assert str(e.value) == message


def test_the_test_model_translates_each_kind_of_file_like_its_texts(trained_run):
    """Through `Translator.translate_file`: whatever the model writes, each text of the file is
    translated as it would be alone (HTML: as its text alone)."""
    translator = load_translator(trained_run, device="cpu")
    lines = ["a b c", "d e f g", "", "b c d"]
    alone = {t: r.text for t, r in zip(lines, translator.translate(lines), strict=True)}
    assert translator.translate_file("\n".join(lines).encode(), "x.txt").decode() == \
        "\n".join(alone[t] for t in lines)
    srt = "1\n00:00:01,000 --> 00:00:02,000\na b c\n"
    assert translator.translate_file(srt.encode(), "x.srt").decode() == \
        f"1\n00:00:01,000 --> 00:00:02,000\n{alone['a b c']}\n"
    page = "<p>a b c</p><p>d e f g</p>"
    assert translator.translate_file(page.encode(), "x.html").decode() == \
        f"<p>{alone['a b c']}</p><p>{alone['d e f g']}</p>"
    book = docx.Document()
    book.add_paragraph("b c d")
    data = io.BytesIO()
    book.save(data)
    out = docx.Document(io.BytesIO(translator.translate_file(data.getvalue(), "x.docx")))
    assert out.paragraphs[0].text == alone["b c d"]
    assert documents.kind("x.docx") == "docx"


W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
STORIES = (  # a tracked insertion and deletion, a content control, a text box, a footnote reference
    '<w:p><w:r><w:t xml:space="preserve">Kept </w:t></w:r><w:ins w:id="1" w:author="A"><w:r><w:t>inserted '
    'words.</w:t></w:r></w:ins><w:del w:id="2" w:author="A"><w:r><w:delText>deleted words.</w:delText></w:r>'
    '</w:del></w:p>'
    '<w:sdt><w:sdtContent><w:p><w:r><w:t>In a content control.</w:t></w:r></w:p></w:sdtContent></w:sdt>'
    '<w:p><w:r><w:t>Before the box.</w:t></w:r><w:r><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml">'
    '<v:textbox><w:txbxContent><w:p><w:r><w:t>In a text box.</w:t></w:r></w:p></w:txbxContent></v:textbox>'
    '</v:shape></w:pict></w:r><w:r><w:footnoteReference w:id="1"/></w:r></w:p>')
FOOTNOTES = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes {W}><w:footnote w:id="1">'
             '<w:p><w:r><w:t>In a footnote.</w:t></w:r></w:p></w:footnote></w:footnotes>')


def word_file_with_stories():
    """A Word file whose text sits in a tracked insertion, a content control, a text box and a
    footnote (made from python-docx's own by editing its XML, as Word would write them)."""
    import zipfile

    book = docx.Document()
    book.add_paragraph("PLACEHOLDER")
    plain = io.BytesIO()
    book.save(plain)
    out = io.BytesIO()
    with zipfile.ZipFile(plain) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target:
        for item in source.infolist():
            data = source.read(item.filename)
            if item.filename.endswith((".xml", ".rels")):
                data = data.decode()
            if item.filename == "word/document.xml":
                start = [m.start() for m in re.finditer(r"<w:p[ >]", data)
                         if m.start() < data.index("PLACEHOLDER")][-1]
                data = data[:start] + STORIES + data[data.index("</w:p>", start) + len("</w:p>"):]
            elif item.filename == "[Content_Types].xml":
                data = data.replace("</Types>", '<Override PartName="/word/footnotes.xml" ContentType="'
                                    'application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes'
                                    '+xml"/></Types>')
            elif item.filename == "word/_rels/document.xml.rels":
                data = data.replace("</Relationships>", '<Relationship Id="rIdNotes" Type="http://'
                                    'schemas.openxmlformats.org/officeDocument/2006/relationships/'
                                    'footnotes" Target="footnotes.xml"/></Relationships>')
            target.writestr(item, data)
        target.writestr("word/footnotes.xml", FOOTNOTES)
    return out.getvalue()


def test_text_in_insertions_content_controls_text_boxes_and_footnotes_is_translated():
    import zipfile

    document = read(word_file_with_stories(), "stories.docx")
    assert sorted(" ".join(Html.parse(t, "en").sentences) for t in document.texts) == [
        "Before the box.", "In a content control.", "In a footnote.", "In a text box.",
        "Kept inserted words."]
    with zipfile.ZipFile(io.BytesIO(translated(document))) as out:
        body, notes = out.read("word/document.xml").decode(), out.read("word/footnotes.xml").decode()
    for text in ("KEPT", "INSERTED WORDS.", "IN A CONTENT CONTROL.", "BEFORE THE BOX.", "IN A TEXT BOX."):
        assert text in body
    assert "<w:delText>deleted words.</w:delText>" in body  # deleted text is not translated
    assert "<w:ins" in body and "IN A FOOTNOTE." in notes


def test_a_word_file_that_unpacks_past_the_limit_is_refused_before_it_is_unpacked():
    import zipfile

    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("word/document.xml", b"<" + b" " * 50_000_000 + b">")  # 50 MB of XML, 50 kB zipped
    assert len(bomb.getvalue()) < 100_000
    with pytest.raises(DocumentError, match=r"bomb.docx: 50,000,002 bytes unpacked; this server unpacks at "
                                            r"most 16,777,216"):
        read(bomb.getvalue(), "bomb.docx", max_unpacked=16 << 20)
    assert read(word_file(), "report.docx", max_unpacked=1 << 20).texts  # a real file is well within it


def test_only_line_breaks_end_lines_of_text_and_subtitle_files():
    """Form feeds, \\u2028 and the other characters str.splitlines takes stay inside their line."""
    text = "Page one.\x0cPage two.\nA line\u2028with a separator.\r\nLast\x1c."
    document = read(text.encode(), "notes.txt")
    assert document.texts == ["Page one.\x0cPage two.", "A line\u2028with a separator.", "Last\x1c."]
    assert translated(document, lambda t: t).decode() == text
    cue = "1\n00:00:01,000 --> 00:00:02,000\nOne\u2028two\x0bthree\n"
    subtitles = read(cue.encode(), "a.srt")
    assert subtitles.texts == ["One\u2028two\x0bthree"] and translated(subtitles, lambda t: t).decode() == cue
