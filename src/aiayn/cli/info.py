"""`aiayn info`: a model's configuration and its parameter count per part."""

from __future__ import annotations

import argparse
import dataclasses

from aiayn import config as cfg
from aiayn.cli.options import add_config_options, given
from aiayn.model import Transformer, parameter_counts
from aiayn.translation import load_model


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(name, help="show a model's configuration and parameter counts",
                            description="Show the configuration of a checkpoint, or of a preset with "
                                        "overrides, and its parameter count per part.")
    p.add_argument("checkpoint", nargs="?", help="checkpoint directory or run directory")
    p.add_argument("--preset", default="base", choices=sorted(cfg.PRESETS),
                   help="preset to describe when no checkpoint is given (default: base)")
    add_config_options(p, cfg.ModelConfig, "model options (without a checkpoint)")


def run(args: argparse.Namespace) -> int:
    if args.checkpoint:
        loaded = load_model(args.checkpoint)
        model = loaded.model
        print(f"checkpoint: {loaded.path}")
        if loaded.train.init_from:
            print(f"started from: {loaded.train.init_from} (weights sha256 {loaded.train.init_sha256})")
        if loaded.data.pairs:
            print(f"directions: {', '.join(loaded.data.pairs)} (target language told in the "
                  f"{loaded.data.language_token}: >>xx<<)")
    else:
        model = Transformer(cfg.model_config(args.preset, **given(args, cfg.ModelConfig)))
        print(f"preset: {args.preset}")
    for f in dataclasses.fields(model.config):
        print(f"  {f.name:<20} {getattr(model.config, f.name)}")
    print("parameters:")
    counts = parameter_counts(model)
    notes = {"target embedding": "shared with source" if model.config.share_embeddings else "",
             "output projection": "tied to target embedding" if model.config.tie_output else "",
             "positions": "sinusoids, none learned" if model.config.positional == "sinusoidal" else ""}
    for part, n in counts.items():
        note = f"  ({notes[part]})" if notes.get(part) and n == 0 else ""
        print(f"  {part:<20} {n:>13,}{note}")
    return 0
