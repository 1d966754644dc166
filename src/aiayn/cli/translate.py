"""`aiayn translate`: translate sentences with a trained model."""

from __future__ import annotations

import argparse
import sys

from aiayn.cli.options import add_inference_options, load_for_inference
from aiayn.data.corpora import read_lines


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="translate sentences",
        description="Translate sentences given as arguments, or one per line from --input or standard "
                    "input. Writes one line per input line (an empty line gives an empty line); with "
                    "--nbest N > 1, N lines per input in the Moses format: INDEX ||| TEXT ||| SCORE.")
    p.add_argument("checkpoint", help="checkpoint directory, run directory (its newest checkpoint), "
                                      "Marian directory, or CTranslate2 export (with --engine ctranslate2)")
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read lines)")
    p.add_argument("--input", "-i", help="file to translate, one sentence per line, plain or .gz "
                                         "(default: standard input)")
    p.add_argument("--output", "-o", help="where to write translations (default: standard output)")
    add_inference_options(p)


def run(args: argparse.Namespace) -> int:
    inference = load_for_inference(args)
    if args.sentences:
        lines = args.sentences
    elif args.input:
        lines = read_lines(args.input)
    else:
        lines = sys.stdin.read().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
    decode = inference.decode
    results = inference.translate(lines, decode)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        for i, nbest in enumerate(results):
            if decode.nbest == 1:
                out.write(nbest[0].text + "\n")
            else:
                out.writelines(f"{i} ||| {t.text} ||| {t.score:.4f}\n" for t in nbest)
    finally:
        if args.output:
            out.close()
    return 0
