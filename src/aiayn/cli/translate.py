"""`aiayn translate`: translate sentences with a trained model."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from aiayn.checkpoint import CheckpointError
from aiayn.cli.options import add_direction_options, add_inference_options, translator_for
from aiayn.config import ConfigError
from aiayn.data.readers import DataError, decode_lines, iter_lines
from aiayn.files import check_writable, write_atomically
from aiayn.text import documents
from aiayn.text import glossary as glossaries
from aiayn.translation import CHUNK, Translation, model_format


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="translate sentences",
        description="Translate texts given as arguments, or one per line from --input or standard input, "
                    "writing each translation as soon as its batch is done. Each text is cut into its "
                    "sentences, which are translated and joined back (--no-split: each is one sentence); "
                    "a sentence longer than the model takes is cut at its best boundaries. Writes one "
                    "line per input line (an empty line gives an empty line); with --nbest N > 1, N "
                    "lines per input in the Moses format: INDEX ||| TEXT ||| SCORE. An --input file "
                    "ending in .html, .htm, .srt, .docx, .pptx, .odt, .odp, .epub or .pdf is translated "
                    "as a whole, its structure kept (markup; cue numbers and timings; paragraph styles, "
                    "runs, tables, slides and notes; chapters and the table of contents; a PDF's text "
                    "blocks in their place).")
    p.add_argument("checkpoint", help="checkpoint directory, run directory (its newest checkpoint), "
                                      "Marian directory, or CTranslate2 export (with --engine ctranslate2)")
    p.add_argument("sentences", nargs="*", help="texts to translate (default: read lines)")
    p.add_argument("--input", "-i", metavar="FILE", help="file to translate: one text per line, UTF-8, "
                                                         "plain or .gz; or a .html, .htm, .srt, .docx, "
                                                         ".pptx, .odt, .odp, .epub or .pdf file (default: "
                                                         "standard input)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="where to write translations (default: standard output; for a .docx, .pptx, "
                        ".odt, .odp, .epub or .pdf input, INPUT-STEM.TARGET.EXT beside it)")
    p.add_argument("--constraints", action="store_true",
                   help="each input line is a sentence, then TAB-separated phrases its translation must "
                        "contain (fairseq's form: SOURCE<TAB>PHRASE<TAB>PHRASE); lines are not split "
                        "into sentences; constrained beam search (docs/text.md)")
    p.add_argument("--prefix", metavar="TEXT",
                   help="what every translation begins with; it goes on from there (with --alternatives N: "
                        "the N best ways to go on, N lines per input in the --nbest format)")
    p.add_argument("--keep", metavar="REGEX",
                   help="spans of plain text that match this regular expression (placeholders such as "
                        "'\\{[^}]*\\}', code, names) come back as they are, where their words land")
    p.add_argument("--scores", action="store_true",
                   help="after each translation, a tab and its confidence: the model's log-probability "
                        "per token, 0 for certain, below about -1 doubtful (docs/text.md); with --nbest "
                        "or --alternatives, a fourth field")
    p.add_argument("--glossary", metavar="FILE",
                   help="a glossary, SOURCE TERM<TAB>TARGET TERM per line, or a TBX termbase (.tbx): every "
                        "term found in a sentence (whole words, the file's case) is translated as the file "
                        "says (a constraint)")
    add_direction_options(p)
    add_inference_options(p)
    compile_ = next(a for a in p._actions if a.dest == "compile")
    compile_.help = compile_.help.replace("(default: auto)", f"(default: auto: compiled if cached, or for an "
                                                             f"--input of {LONG_INPUT:,} lines or more)")


def run(args: argparse.Namespace) -> int:
    if args.output:
        check_writable(Path(args.output))
        if args.input and Path(args.output).exists() and Path(args.output).samefile(args.input):
            raise DataError(f"{args.output}: --output is the --input file, which it would overwrite")
    if args.input and Path(args.input).suffix.lower() in WHOLE_FILES:
        return _translate_file(args)
    if args.compile is None and args.input and _pytorch(args) and _long(args.input):
        args.compile = True
        print(f"aiayn: {args.input} has {LONG_INPUT:,} lines or more: the decoder step is compiled, which "
              "repays itself on such a file (--no-compile: never)", file=sys.stderr)
    terms = glossaries.read(args.glossary) if args.glossary else None  # before the model loads
    keep = _pattern(args.keep)
    if args.constraints:
        args.split = False
    translator = translator_for(args)
    glossary = terms.towards(translator.src_lang, translator.tgt_lang) if terms else None
    lines, chunk = _lines(args)
    if args.constraints:
        lines = (_constrained(line) for line in lines)
    nbest = translator.defaults.alternatives or translator.defaults.nbest
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for i, translation in enumerate(translator.translate_stream(lines, chunk=chunk, progress=True,
                                                                    glossary=glossary, prefix=args.prefix,
                                                                    keep=keep)):
            write_translation(out, i, translation, nbest, args.scores)
            out.flush()
    finally:
        if args.output:
            out.close()
    return 0


WHOLE_FILES = tuple(k for k in documents.KINDS if k != ".txt")  # translated as a whole
# written beside the input, not to standard output
BINARY_FILES = tuple(k for k, kind in documents.KINDS.items() if kind in documents.BINARY)
LONG_INPUT = 40_000  # lines of an --input file from which compiling the decoder step repays itself,
# for a model not compiled before: compiling a beam search's steps takes tens of seconds once, and
# saves about a millisecond a sentence (benchmarks/detail/decode_speed.md, "When compiling repays")


def _pytorch(args: argparse.Namespace) -> bool:
    """Whether the model runs in PyTorch (a model that cannot be read is left to the translator, which
    says what is wrong)."""
    try:
        return args.engine != "ctranslate2" and model_format(args.checkpoint) != "ctranslate2"
    except CheckpointError:
        return False


def _long(path: str) -> bool:
    """Whether the file has LONG_INPUT lines or more, counted up to there (an unreadable file is left
    to the translation, which says what is wrong)."""
    try:
        return sum(1 for _ in zip(range(LONG_INPUT), iter_lines(path), strict=False)) >= LONG_INPUT
    except DataError:
        return False


def _pattern(regex: str | None) -> re.Pattern | None:
    try:
        return None if regex is None else re.compile(regex)
    except re.error as e:
        raise ConfigError(f"--keep {regex!r} is not a regular expression: {e}") from None


def _constrained(line: str) -> tuple[str, list[str]]:
    """SOURCE<TAB>PHRASE<TAB>... -> the sentence and its constraints."""
    text, *phrases = line.split("\t")
    return text, [p for p in phrases if p.strip()]


def _translate_file(args: argparse.Namespace) -> int:
    """A file translated as a whole, its structure kept (text/documents.py)."""
    source = Path(args.input)
    if not source.is_file():
        raise DataError(f"{source}: no such file")
    if args.constraints or args.prefix or args.scores:
        flag = "--constraints" if args.constraints else "--prefix" if args.prefix else "--scores"
        raise DataError(f"{source}: {flag} applies to lines of text, not to a {source.suffix} file")
    data = source.read_bytes()
    documents.read(data, str(source))  # a broken file fails before the model loads
    terms = glossaries.read(args.glossary) if args.glossary else None
    translator = translator_for(args)
    glossary = terms.towards(translator.src_lang, translator.tgt_lang) if terms else None
    out = translator.translate_file(data, str(source), progress=True, glossary=glossary)
    suffix = source.suffix.lower()
    if args.output or suffix in BINARY_FILES:
        target = Path(args.output) if args.output else source.with_suffix(f".{translator.tgt_lang}{suffix}")
        check_writable(target)
        write_atomically(target, out)
        print(f"wrote {target}", file=sys.stderr)
    else:
        sys.stdout.write(out.decode("utf-8"))
        sys.stdout.flush()
    return 0


def _lines(args: argparse.Namespace) -> tuple[Iterable[str], int]:
    """The lines to translate, read as they are needed, and how many to translate at a time (one at a
    time when a person types them)."""
    if args.sentences:
        return args.sentences, CHUNK
    if args.input:
        return iter_lines(args.input), CHUNK
    return decode_lines(sys.stdin.buffer, "<stdin>"), 1 if sys.stdin.isatty() else CHUNK


def write_translation(out: TextIO, index: int, translation: Translation, nbest: int,
                      scores: bool = False) -> None:
    """One line (INDEX ||| TEXT ||| SCORE lines with nbest > 1), with `scores` the confidence after a
    tab (a fourth field). A line break that a model spells out with byte pieces becomes a space, so
    lines stay aligned with the input."""
    if nbest == 1:
        out.write(one_line(translation.text) + (f"\t{_confidence(translation)}" if scores else "") + "\n")
    else:
        out.writelines(f"{index} ||| {one_line(t.text)} ||| {t.score:.4f}"
                       + (f" ||| {_confidence(t)}" if scores else "") + "\n"
                       for t in [translation, *translation.alternatives])


def _confidence(translation: Translation) -> str:
    """The confidence as written: 4 decimals, or "-" where it is not known."""
    return "-" if translation.confidence is None else f"{translation.confidence:.4f}"


def one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")
