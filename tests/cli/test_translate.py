import io
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.cli import main


class Stdin(io.TextIOWrapper):
    """Standard input over bytes, counting the lines read from it."""

    def __init__(self, data: bytes) -> None:
        self.counter = Counting(data)
        super().__init__(self.counter)  # type: ignore[arg-type]


class Counting(io.BytesIO):
    lines_read = 0

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        self.lines_read += 1
        return line


class Stdout(io.StringIO):
    """Standard output that notes how many bytes of standard input had been read at its first write."""

    def __init__(self, stdin: Stdin) -> None:
        super().__init__()
        self.stdin, self.read_at_first_write = stdin, None

    def write(self, text: str) -> int:
        if self.read_at_first_write is None:
            self.read_at_first_write = self.stdin.counter.tell()
        return super().write(text)


def translate_stdin(trained_run, monkeypatch, data: bytes, *options: str) -> tuple[int, Stdout]:
    stdin = Stdin(data)
    stdout = Stdout(stdin)
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    return main(["translate", str(trained_run), "--beam-size", "1", *options]), stdout


def test_stdin_is_translated_and_written_batch_by_batch(trained_run, monkeypatch):
    """Problem 8: nothing was printed until all of standard input was read and translated."""
    lines = [" ".join("abcdefghij"[(i + j) % 10] for j in range(1 + i % 7)) for i in range(1200)]
    data = "".join(f"{x}\n" for x in lines).encode()
    code, stdout = translate_stdin(trained_run, monkeypatch, data)
    assert code == 0
    assert len(stdout.getvalue().splitlines()) == 1200
    assert stdout.read_at_first_write < len(data) / 2  # first translations before most lines were read


def test_a_line_break_in_a_translation_cannot_split_its_line():
    from aiayn.cli.translate import write_translation
    from aiayn.decoding.translator import Translation

    out = io.StringIO()
    write_translation(out, 0, Translation("two\nlines\r", 0.0, 0.0, []), 1)
    write_translation(out, 1, Translation("", 0.0, 0.0, [], [Translation("a\nb", -1.0, 0.0, [])]), 2)
    assert out.getvalue() == "two lines \n1 |||  ||| 0.0000\n1 ||| a b ||| -1.0000\n"


def test_scores_add_each_translations_confidence(trained_run, monkeypatch):
    from aiayn.translation import load_translator

    lines = ["a b c", "", "d e f g"]
    translator = load_translator(trained_run)
    expected = translator.translate(lines, beam_size=1)
    data = "".join(f"{x}\n" for x in lines).encode()
    code, stdout = translate_stdin(trained_run, monkeypatch, data, "--scores")
    rows = [line.split("\t") for line in stdout.getvalue().splitlines()]
    assert code == 0 and [r[0] for r in rows] == [t.text for t in expected]
    assert rows[1][1] == "-" and [float(rows[i][1]) for i in (0, 2)] == pytest.approx(
        [expected[i].confidence for i in (0, 2)], abs=1e-4)
    code, stdout = translate_stdin(trained_run, monkeypatch, b"a b c\n", "--scores", "--nbest", "2",
                                   "--beam-size", "2")
    fields = [line.split(" ||| ") for line in stdout.getvalue().splitlines()]
    best = translator.translate(lines[:1], beam_size=2, nbest=2)[0]
    assert [float(f[3]) for f in fields] == pytest.approx(
        [t.confidence for t in (best, *best.alternatives)], abs=1e-4)


def test_stdin_is_decoded_like_a_file(trained_run, monkeypatch, capsys):
    """Problem 8: invalid UTF-8 on stdin gave a TypeError, and CRLF endings were kept."""
    code, stdout = translate_stdin(trained_run, monkeypatch, b"a b c\r\nd e\r\n")
    crlf = stdout.getvalue()
    code_lf, stdout_lf = translate_stdin(trained_run, monkeypatch, b"a b c\nd e\n")
    assert code == code_lf == 0 and crlf == stdout_lf.getvalue() and len(crlf.splitlines()) == 2
    code, _ = translate_stdin(trained_run, monkeypatch, b"a b c\nd \xff e\n")
    assert code == 2
    err = capsys.readouterr().err
    assert err == "aiayn translate: error: <stdin>:2: invalid UTF-8 (invalid start byte)\n"


def test_an_unwritable_output_fails_before_anything_is_read(trained_run, monkeypatch, tmp_path, capsys):
    """Problem 8: --output was checked only at the end, after all the translating."""
    stdin = Stdin(b"a b c\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert main(["translate", str(trained_run), "--output", str(tmp_path / "no" / "out.txt")]) == 2
    assert "no such directory" in capsys.readouterr().err and stdin.counter.lines_read == 0
    source = tmp_path / "in.txt"
    source.write_text("a b c\n")
    assert main(["translate", str(trained_run), "-i", str(source), "-o", str(source)]) == 2
    assert "--output is the --input file" in capsys.readouterr().err and source.read_text() == "a b c\n"


@pytest.mark.parametrize("command", ["evaluate", "attention"])
def test_search_options_a_command_has_no_use_for_are_refused(trained_run, command, capsys):
    """Problem 9: `attention --nbest` and `evaluate --nbest` were accepted and ignored."""
    args = [command, str(trained_run), *(["a b c"] if command == "attention" else []), "--nbest", "2"]
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2 and "unrecognized arguments: --nbest 2" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    (["--temperature", "-1"], "temperature=-1.0 must be at least 0"),
    (["--top-k", "-3"], "top_k=-3 must be at least 0"),
    (["--max-output-extra", "-100"], "max_output_extra=-100 must be at least 0"),
    (["--length-penalty", "nan"], "length_penalty=nan must be a finite number"),
])
def test_bad_search_values_are_one_line_errors(trained_run, capsys, options, message):
    """Problem 7: --temperature -1 and --top-k -3 were ignored; others gave tracebacks."""
    assert main(["translate", str(trained_run), "a b c", *options]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("options, message", [
    (["--threads", "-1"], "argument --threads: must be at least 0, not -1"),
    (["--device", "gpu9"], "argument --device: device='gpu9' is not one of"),
])
def test_bad_device_options_are_usage_errors(trained_run, capsys, options, message):
    with pytest.raises(SystemExit) as e:
        main(["translate", str(trained_run), "a b c", *options])
    assert e.value.code == 2 and message in capsys.readouterr().err


# Lines as a file can hold them: any Unicode but surrogates (not encodable) and "\n" (ends a line).
lines = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=40),
                 min_size=1, max_size=6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines)
def test_property_any_text_gives_one_line_per_input_line(trained_run, monkeypatch, texts):
    data = "".join(t + "\n" for t in texts).encode("utf-8")
    code, stdout = translate_stdin(trained_run, monkeypatch, data, "--max-output-len", "12")
    assert code == 0
    assert stdout.getvalue().count("\n") == len(texts)
    for text, out in zip(texts, stdout.getvalue().split("\n"), strict=False):
        if not text.removesuffix("\r"):
            assert out == ""


def test_html_srt_and_docx_files_are_translated_whole(trained_run, tmp_path, capsys):
    """--input FILE.html / .srt / .docx: the file translated with its structure (the translator's
    translate_file), to standard output or, for .docx, beside the input; a broken file: one line."""
    docx = pytest.importorskip("docx")
    from aiayn.translation import load_translator

    translator = load_translator(trained_run, device="cpu")
    page = tmp_path / "page.html"
    page.write_text("<p>a b c</p>\n<p>d e f</p>\n")
    assert main(["translate", str(trained_run), "--input", str(page)]) == 0
    assert capsys.readouterr().out == translator.translate_file(page.read_bytes(), "page.html").decode()
    talk = tmp_path / "talk.srt"
    talk.write_text("1\n00:00:01,000 --> 00:00:02,000\na b c\n")
    assert main(["translate", str(trained_run), "-i", str(talk), "-o", str(tmp_path / "out.srt")]) == 0
    assert (tmp_path / "out.srt").read_bytes() == translator.translate_file(talk.read_bytes(), "talk.srt")
    book = docx.Document()
    book.add_paragraph("a b c")
    book.save(tmp_path / "report.docx")
    assert main(["translate", str(trained_run), "-i", str(tmp_path / "report.docx")]) == 0
    written = tmp_path / f"report.{translator.tgt_lang}.docx"
    assert "wrote " + str(written) in capsys.readouterr().err
    expected = translator.translate(["a b c"])[0].text
    assert docx.Document(str(written)).paragraphs[0].text == expected
    (tmp_path / "broken.srt").write_text("hello\n")
    assert main(["translate", str(trained_run), "-i", str(tmp_path / "broken.srt")]) != 0
    assert capsys.readouterr().err.strip().splitlines() == [
        f"aiayn translate: error: {tmp_path / 'broken.srt'}, line 1: not a subtitle cue (a number, then a "
        "timing line such as 00:00:01,000 --> 00:00:02,500)"]
