"""`aiayn prepare`: learn the joint BPE vocabulary (SentencePiece) from the training data."""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from aiayn import config as cfg
from aiayn.cli.options import field_help, positive_int
from aiayn.data.corpora import DataError, iter_pairs, sample_pairs
from aiayn.tokenizer import Tokenizer


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(name, help="learn the joint source/target BPE vocabulary",
                            description="Learn one SentencePiece BPE vocabulary from the source and "
                                        "target sides of the training data; pass it to `aiayn train "
                                        "--tokenizer`.")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory to write the tokenizer into (tokenizer.model)")
    p.add_argument("--train", default="multi30k", metavar="SPEC", help=field_help(cfg.DataConfig, "train"))
    p.add_argument("--src-lang", default="en", metavar="LANG", help="source language code (default: en)")
    p.add_argument("--tgt-lang", default="de", metavar="LANG", help="target language code (default: de)")
    p.add_argument("--vocab-size", type=int, default=8000, metavar="INT",
                   help="BPE pieces to learn (default: 8000)")
    p.add_argument("--seed", type=int, default=1, metavar="INT", help="seed (default: 1)")
    p.add_argument("--sample-pairs", type=positive_int, default=2_000_000, metavar="INT",
                   help="learn from a uniform random sample of at most this many pairs, read in one "
                        "pass in bounded memory (default: 2,000,000; a smaller corpus is used whole)")


def run(args: argparse.Namespace) -> int:
    pairs, total = sample_pairs(iter_pairs(args.train, args.src_lang, args.tgt_lang), args.sample_pairs,
                                args.seed)
    source, target = [s for s, _ in pairs], [t for _, t in pairs]
    if not any(source) and not any(target):
        raise DataError(f"{args.train}: no text to learn a tokenizer from ({total:,} empty pairs)")
    tokenizer = Tokenizer.train(source + target, args.vocab_size, args.seed)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    tokenizer.save(args.out)
    src_len = statistics.mean(map(len, tokenizer.encode(source)))
    tgt_len = statistics.mean(map(len, tokenizer.encode(target, "target")))
    read = (f"{total:,} pairs" if len(pairs) == total
            else f"a random sample of {len(pairs):,} of {total:,} pairs")
    print(f"{args.out}: {tokenizer.vocab_size:,} pieces from {read} of {args.train}; "
          f"{src_len:.1f} ({args.src_lang}) and {tgt_len:.1f} ({args.tgt_lang}) pieces per sentence")
    return 0
