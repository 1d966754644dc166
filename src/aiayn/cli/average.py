"""`aiayn average`: average the weights of the last N checkpoints into a new one."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn import checkpoint
from aiayn.cli.options import positive_int
from aiayn.config import ConfigError


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="average the weights of several checkpoints",
        description="Average the weights of the last N step checkpoints of a run (the paper averages "
                    "the last 5 for base models), or of the checkpoints given, into a new checkpoint.")
    p.add_argument("paths", nargs="+", help="a run directory (with --last), or checkpoint directories")
    p.add_argument("--last", type=positive_int, default=5, metavar="N",
                   help="how many of a run's newest checkpoints (default: 5)")
    p.add_argument("--out", required=True, metavar="DIR",
                   help="directory of the averaged checkpoint: new, empty or an earlier average "
                        "(never the run directory itself)")
    p.add_argument("--ema", action="store_true",
                   help="average the checkpoints' moving averages of the weights (a run trained with "
                        "--ema-decay) instead of their weights; with --last 1, the newest one's alone")
    p.add_argument("--force", action="store_true",
                   help="replace --out even if it holds something else (never a training run)")


def run(args: argparse.Namespace) -> int:
    if len(args.paths) == 1 and not (Path(args.paths[0]) / "config.json").exists():
        paths = checkpoint.step_checkpoints(args.paths[0])[-args.last:]
        if len(paths) < args.last:
            raise ConfigError(f"{args.paths[0]} has {len(paths)} step checkpoints, "
                              f"fewer than --last {args.last}")
    else:
        paths = [Path(p) for p in args.paths]
    out = checkpoint.average(paths, args.out, args.force, ema=args.ema)
    what = "the moving averages of " if args.ema else ""
    print(f"averaged {what}{len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {out}")
    return 0
