"""`aiayn prepare`: learn the joint BPE vocabulary and encode the corpora into a data directory."""

from __future__ import annotations

import argparse

from aiayn import config as cfg
from aiayn.cli.options import field_help, positive_int
from aiayn.data import prepared
from aiayn.data.binarized import MappedCorpus
from aiayn.files import check_out


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="learn the vocabulary and encode the corpora for training",
        description="Learn one SentencePiece BPE vocabulary from the source and target sides of the "
                    "training data (on a bounded random sample of a big corpus), then encode the "
                    "training and validation corpora in one streaming pass each into DIR, as token "
                    "arrays that training reads through memory maps: `aiayn train --data DIR`. "
                    "Memory does not grow with the corpus. DIR/tokenizer.model also serves as "
                    "`aiayn train --tokenizer DIR`.")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="data directory to write: tokenizer.model, data.json, train/, valid/")
    one = field_help(cfg.DataConfig, "train").split(". Given more than once")[0]
    p.add_argument("--train", default="multi30k", metavar="SPEC",
                   help=f"{one}; one corpus (`aiayn train` mixes several)")
    p.add_argument("--valid", default=None, metavar="SPEC",
                   help="validation data, same forms as --train (default: the named dataset's own "
                        "val split; none for files); '' for none")
    p.add_argument("--src-lang", default="en", metavar="LANG", help="source language code (default: en)")
    p.add_argument("--tgt-lang", default="de", metavar="LANG", help="target language code (default: de)")
    p.add_argument("--vocab-size", type=int, default=8000, metavar="INT",
                   help="BPE pieces to learn (default: 8000); with --vocabulary separate, the target's")
    p.add_argument("--vocabulary", choices=("joint", "separate"), default="joint",
                   help="joint (default): one BPE vocabulary for both languages; separate: one per language "
                        "(train with --vocabulary separate --no-share-embeddings)")
    p.add_argument("--src-vocab-size", type=positive_int, default=None, metavar="INT",
                   help="with --vocabulary separate: the source's BPE pieces (default: --vocab-size)")
    p.add_argument("--max-len", type=positive_int, default=cfg.DataConfig.max_len, metavar="INT",
                   help="leave out training pairs with more subword tokens than this on either side "
                        f"(default: {cfg.DataConfig.max_len}; `train --max-len` can lower it later)")
    p.add_argument("--seed", type=int, default=1, metavar="INT", help="seed (default: 1)")
    p.add_argument("--sample-pairs", type=positive_int, default=2_000_000, metavar="INT",
                   help="learn the vocabulary from a uniform random sample of at most this many pairs, "
                        "read in one pass in bounded memory (default: 2,000,000; a smaller corpus is "
                        "used whole)")
    p.add_argument("--force", action="store_true",
                   help="replace DIR even if it holds something other than prepared data")


def run(args: argparse.Namespace) -> int:
    check_out(args.out, "prepared data directory", prepared.is_data_dir, args.force)  # before any work
    separate = args.vocabulary == "separate"
    if args.src_vocab_size and not separate:
        raise cfg.ConfigError("--src-vocab-size sets the source vocabulary of --vocabulary separate")
    src_vocab_size = (args.src_vocab_size or args.vocab_size) if separate else None
    tokenizer, read = prepared.learn_tokenizer(args.train, args.src_lang, args.tgt_lang, args.vocab_size,
                                               args.seed, args.sample_pairs, src_vocab_size)
    sizes = (f"{tokenizer.source_vocab_size:,} source and {tokenizer.vocab_size:,} target pieces" if separate
             else f"{tokenizer.vocab_size:,} pieces")
    print(f"tokenizer: {sizes} from {read} of {args.train}")
    data = prepared.prepare(args.out, args.train, args.valid, args.src_lang, args.tgt_lang, tokenizer,
                            args.max_len, args.force)
    for name, spec in (("train", data.train), ("valid", data.valid)):
        if spec:
            corpus = MappedCorpus(data.path / name)
            meta = corpus.meta
            pairs = max(meta["pairs"], 1)
            print(f"{corpus.summary(spec)}; {meta['source_tokens'] / pairs:.1f} ({data.src_lang}) and "
                  f"{meta['target_tokens'] / pairs:.1f} ({data.tgt_lang}) pieces per sentence")
    if not data.valid:
        print("no validation set (give --valid SPEC to encode one)")
    print(f"wrote {args.out}; train with: aiayn train --data {args.out} --out RUN_DIR")
    return 0
