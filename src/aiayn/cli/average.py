"""`aiayn average`: average the weights of the last N checkpoints into a new one."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn import checkpoint
from aiayn.config import ConfigError


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="average the weights of several checkpoints",
        description="Average the weights of the last N step checkpoints of a run (the paper averages "
                    "the last 5 for base models), or of the checkpoints given, into a new checkpoint.")
    p.add_argument("paths", nargs="+", help="a run directory (with --last), or checkpoint directories")
    p.add_argument("--last", type=int, default=5, help="how many of a run's newest checkpoints (default: 5)")
    p.add_argument("--out", required=True, help="directory of the averaged checkpoint")


def run(args: argparse.Namespace) -> int:
    if len(args.paths) == 1 and not (Path(args.paths[0]) / "config.json").exists():
        paths = checkpoint.step_checkpoints(args.paths[0])[-args.last:]
        if len(paths) < args.last:
            raise ConfigError(f"{args.paths[0]} has {len(paths)} step checkpoints, "
                              f"fewer than --last {args.last}")
    else:
        paths = [Path(p) for p in args.paths]
    out = checkpoint.average(paths, args.out)
    print(f"averaged {len(paths)} checkpoints ({', '.join(p.name for p in paths)}) into {out}")
    return 0
