"""`aiayn export ctranslate2`: write a model in CTranslate2's format for fast CPU and GPU inference."""

from __future__ import annotations

import argparse

from aiayn.cli.options import positive_int
from aiayn.files import check_out
from aiayn.interop.ctranslate2 import export, is_ctranslate2_dir
from aiayn.translation import load_model, max_source_len


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="export a model to CTranslate2",
        description="Export a checkpoint (or Marian directory) to a CTranslate2 model directory, with "
                    "its tokenizer, for `aiayn translate --engine ctranslate2`. Needs the ctranslate2 "
                    "package (pip install ctranslate2).")
    p.add_argument("format", choices=("ctranslate2",), help="the format to write")
    p.add_argument("checkpoint", help="checkpoint, run directory (its newest checkpoint) or Marian directory")
    p.add_argument("out", help="directory to write: new, empty, or an earlier CTranslate2 export")
    p.add_argument("--force", action="store_true",
                   help="replace OUT even if it holds something else (never a training run)")
    p.add_argument("--quantization", default=None, metavar="TYPE",
                   help="store weights as int8, int8_float32, float16, ... (default: float32); "
                        "--compute-type at translation time can also quantize on load")
    p.add_argument("--max-positions", type=positive_int, default=1024, metavar="INT",
                   help="longest sequence the exported position table covers (default: 1024)")


def run(args: argparse.Namespace) -> int:
    check_out(args.out, "CTranslate2 model", is_ctranslate2_dir, args.force)  # before loading
    loaded = load_model(args.checkpoint)
    out = export(loaded.model, loaded.tokenizer, args.out, args.quantization, args.max_positions,
                 (loaded.src_lang, loaded.tgt_lang), args.force, max_source_len(loaded))
    print(f"wrote {out}")
    return 0
