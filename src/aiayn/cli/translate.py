"""`aiayn translate`: translate sentences with a trained model."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TextIO

from aiayn.cli.options import add_inference_options, load_for_inference
from aiayn.data.corpora import DataError, decode_lines, iter_lines
from aiayn.files import check_writable

CHUNK = 512  # lines translated (sorted by length into batches) before their translations are written


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="translate sentences",
        description="Translate sentences given as arguments, or one per line from --input or standard "
                    "input, writing each translation as soon as its batch is done. Writes one line per "
                    "input line (an empty line gives an empty line); with --nbest N > 1, N lines per "
                    "input in the Moses format: INDEX ||| TEXT ||| SCORE.")
    p.add_argument("checkpoint", help="checkpoint directory, run directory (its newest checkpoint), "
                                      "Marian directory, or CTranslate2 export (with --engine ctranslate2)")
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read lines)")
    p.add_argument("--input", "-i", metavar="FILE", help="file to translate, one sentence per line, UTF-8, "
                                                         "plain or .gz (default: standard input)")
    p.add_argument("--output", "-o", metavar="FILE",
                   help="where to write translations (default: standard output)")
    add_inference_options(p)


def run(args: argparse.Namespace) -> int:
    if args.output:
        check_writable(Path(args.output))
        if args.input and Path(args.output).exists() and Path(args.output).samefile(args.input):
            raise DataError(f"{args.output}: --output is the --input file, which it would overwrite")
    inference = load_for_inference(args)
    lines, chunk = _lines(args)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        first = 0
        for batch in _chunks(lines, chunk):
            results = inference.translate(batch, inference.decode)
            write_translations(out, first, results, inference.decode.nbest)
            out.flush()
            first += len(batch)
    finally:
        if args.output:
            out.close()
    return 0


def _lines(args: argparse.Namespace) -> tuple[Iterable[str], int]:
    """The lines to translate, read as they are needed, and how many to translate at a time (one at a
    time when a person types them)."""
    if args.sentences:
        return args.sentences, CHUNK
    if args.input:
        return iter_lines(args.input), CHUNK
    return decode_lines(sys.stdin.buffer, "<stdin>"), 1 if sys.stdin.isatty() else CHUNK


def _chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(lines)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def write_translations(out: TextIO, first: int, results: list, nbest: int) -> None:
    """One line per translation (INDEX ||| TEXT ||| SCORE lines with nbest > 1). A line break that a
    model spells out with byte pieces becomes a space, so lines stay aligned with the input."""
    for i, hypotheses in enumerate(results, start=first):
        if nbest == 1:
            out.write(one_line(hypotheses[0].text) + "\n")
        else:
            out.writelines(f"{i} ||| {one_line(t.text)} ||| {t.score:.4f}\n" for t in hypotheses)


def one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")
