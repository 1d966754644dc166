"""`aiayn convert`: move models between aiayn and HuggingFace MarianMTModel (OPUS-MT) directories."""

from __future__ import annotations

import argparse

from aiayn import checkpoint
from aiayn.cli.options import positive_int
from aiayn.files import check_out
from aiayn.interop import ConversionError, marian
from aiayn.translation import load_model


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="convert between aiayn checkpoints and HuggingFace Marian directories",
        description="from-marian: a MarianMTModel directory (config.json, model weights, source.spm, "
                    "target.spm, vocab.json) into an aiayn checkpoint. to-marian: an aiayn checkpoint into "
                    "a MarianMTModel directory that transformers loads with from_pretrained. Both are "
                    "exact: logits agree to float precision. `aiayn translate` also reads Marian "
                    "directories directly.")
    p.add_argument("direction", choices=("from-marian", "to-marian"), help="which way to convert")
    p.add_argument("source", help="the Marian directory (from-marian) or aiayn checkpoint/run (to-marian)")
    p.add_argument("out", help="directory to write: new, empty, or an earlier conversion of the same kind")
    p.add_argument("--force", action="store_true",
                   help="replace OUT even if it holds something else (never a training run)")
    p.add_argument("--max-positions", type=positive_int, default=1024, metavar="INT",
                   help="to-marian: Marian's position table size, the longest input it accepts "
                        "(default: 1024)")


def run(args: argparse.Namespace) -> int:
    if args.direction == "from-marian":
        if not marian.is_marian_dir(args.source):
            raise ConversionError(f"{args.source}: not a Marian directory (its config.json has no "
                                  "model_type marian)")
        loaded = load_model(args.source)
        out = checkpoint.save(args.out, loaded.model, loaded.tokenizer, loaded.data, loaded.train,
                              force=args.force)
    else:
        check_out(args.out, "Marian model", marian.is_marian_dir, args.force)  # before loading
        loaded = load_model(args.source)
        if loaded.data.told_in_decoder:
            raise ConversionError(f"{args.source} is told its target language as the decoder's first token "
                                  "(--language-token target); Marian's multi-target models read it from the "
                                  "source: train with --language-token source to convert")
        out = marian.save_marian(loaded.model, loaded.tokenizer, args.out, loaded.src_lang, loaded.tgt_lang,
                                 args.max_positions, args.force, loaded.data.pairs)
    print(f"wrote {out}")
    return 0
