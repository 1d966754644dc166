"""Files in, files out: the text translated, the structure (lines, cues, runs, tables) kept."""

import io

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
    (b"x", "slides.pptx", "slides.pptx: cannot translate .pptx files; the kinds are .txt, .html, .htm, "
                          ".srt, .docx"),
    (b"x", "README", "README: cannot translate a file without an extension; the kinds are .txt, .html, .htm, "
                     ".srt, .docx"),
    (b"fine\nnot \xff utf-8\n", "a.txt", "a.txt, line 2: not UTF-8 text (invalid start byte)"),
    (b"1\n00:00:01,000 --> 00:00:02,000\nHi.\n\nHello\nthere\n", "a.srt",
     "a.srt, line 5: not a subtitle cue (a number, then a timing line such as 00:00:01,000 --> "
     "00:00:02,500)"),
    (b"PK not a zip", "a.docx", "a.docx: not a Word .docx file (BadZipFile: File is not a zip file)"),
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
