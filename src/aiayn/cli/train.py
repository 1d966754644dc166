"""`aiayn train`: train a Transformer on parallel text, or resume a run."""

from __future__ import annotations

import argparse
import signal
import sys

from aiayn import config as cfg
from aiayn.cli.options import add_config_options, add_recipe_options, given
from aiayn.train import distributed
from aiayn.training import train_model


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="train a model",
        description="Train the Transformer on parallel text. Writes RUN_DIR/checkpoints/step_N/ "
                    "(config, weights, tokenizer, training state) and RUN_DIR/metrics.jsonl. "
                    "Ctrl-C (or SIGTERM) stops after the current update, saves a checkpoint and exits "
                    "with status 130 (143); --resume continues exactly where a run stopped, from the "
                    "newest checkpoint that loads.")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="directory of this training run")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in RUN_DIR; training options given "
                        "here (for example a larger --max-steps) replace the saved ones; --preset, "
                        "--config and model and data options may be repeated but must equal the run's")
    add_recipe_options(p)
    add_config_options(p, cfg.ModelConfig, "model (paper section 3)")
    add_config_options(p, cfg.DataConfig, "data")
    add_config_options(p, cfg.TrainConfig, "training (paper section 5)")


def run(args: argparse.Namespace) -> int:
    options = {name: value for cls in (cfg.ModelConfig, cfg.DataConfig, cfg.TrainConfig)
               for name, value in given(args, cls).items()}
    result = train_model(args.out, resume=args.resume, preset=args.preset, config=args.config, **options)
    ranks = distributed.from_environment()
    speaks = ranks.main  # under torchrun rank 0 speaks for all
    if speaks:
        print(f"saved {result.checkpoint}")
    if result.stopped_by is None:
        return 0
    if speaks:
        launcher = "torchrun ... -m aiayn" if ranks.world > 1 else "aiayn"
        print(f"stopped by {signal.Signals(result.stopped_by).name}; continue with: "
              f"{launcher} train --out {args.out} --resume", file=sys.stderr)
    return 128 + result.stopped_by  # the shell's convention: 128 + the signal's number
