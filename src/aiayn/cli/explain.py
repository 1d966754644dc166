"""`aiayn explain`: one translation's whole computation, as a page that walks through it."""

from __future__ import annotations

import argparse
import dataclasses

from aiayn.cli.options import add_config_options, add_direction_options, device_name, given, positive_int
from aiayn.config import DecodeConfig

SEARCH = ("beam_size", "length_penalty", "penalty_form", "max_output_extra", "max_output_len")


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="write a page that shows every step of one translation, with the model's own numbers",
        description="Translate SENTENCE and write one self-contained page (OUT/index.html, it opens "
                    "from the file system, offline) that follows The Illustrated Transformer with this "
                    "model's real tensors: the pieces and their embeddings plus positions; self-attention's "
                    "six steps for a chosen layer, head and word, and its matrix form; every head and W^O; "
                    "residuals, LayerNorm and the feed-forward network; the decoder's masked and "
                    "encoder-decoder attention and its output distribution at each step; and beam search "
                    "as a tree. In English and Chinese (a switch on the page).")
    p.add_argument("checkpoint", help="checkpoint directory, run directory or Marian directory")
    p.add_argument("sentence", help="the sentence to explain (one sentence: it is not split)")
    p.add_argument("--out", default="explain", metavar="DIR",
                   help="directory for index.html (default: explain)")
    p.add_argument("--lang", choices=("en", "zh"), default="en",
                   help="the page's language when it opens: en (English) or zh (Chinese) (default: en)")
    p.add_argument("--top-words", type=positive_int, default=10, metavar="K",
                   help="words shown with their probabilities at each output step (default: 10)")
    add_direction_options(p)
    p.add_argument("--device", default="cpu", type=device_name, metavar="DEVICE",
                   help="cpu, cuda or cuda:N (default: cpu)")
    others = tuple(f.name for f in dataclasses.fields(DecodeConfig) if f.name not in SEARCH)
    add_config_options(p, DecodeConfig, "search (paper section 6.1; beam size 1 is greedy search)", others)


def run(args: argparse.Namespace) -> int:
    from aiayn.explain import explain, write_page
    from aiayn.translation import load_translator

    options = given(args, DecodeConfig)
    translator = load_translator(args.checkpoint, engine="pytorch", device=args.device, compile=False,
                                 src_lang=args.src_lang, tgt_lang=args.tgt_lang, zero_shot=args.zero_shot)
    data = explain(translator, args.sentence, top_k=args.top_words, **options)
    path = write_page(data, args.out, args.lang)
    print(data["translation"])
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB): open it in a browser")
    return 0

