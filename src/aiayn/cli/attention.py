"""`aiayn attention`: translate a sentence and draw every layer's and head's attention."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn.cli.options import add_inference_options, translator_for
from aiayn.config import ConfigError


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="draw the attention weights of a translation",
        description="Translate SENTENCE, then write the attention weights of every layer and head: "
                    "encoder self-attention, decoder masked self-attention and encoder-decoder attention "
                    "as PNG grids (layers x heads, tokens on the axes), and one self-contained HTML page "
                    "where you pick a layer and heads and hover a token to see what it attends to.")
    p.add_argument("checkpoint", help="checkpoint directory, run directory or Marian directory")
    p.add_argument("sentence", help="the sentence to translate")
    p.add_argument("--out", default="attention", metavar="DIR",
                   help="directory for the pictures (default: attention)")
    add_inference_options(p, exclude=("nbest", "alternatives", "batch_size", "batch_by",
                                       "compile"))  # one sentence


def run(args: argparse.Namespace) -> int:
    from aiayn import visualize  # matplotlib: half a second to import, for this command only

    if args.engine == "ctranslate2":
        raise ConfigError("attention weights come from the PyTorch model: use --engine pytorch")
    view = translator_for(args).translate([args.sentence], attention=True)[0].attention
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(view.translation)
    for kind in view.maps:
        print(visualize.attention_grid(view, kind, out / f"{kind}.png"))
    print(visualize.attention_html(view, out / "attention.html"))
    return 0
