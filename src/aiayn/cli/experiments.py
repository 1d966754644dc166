"""`aiayn experiments`: measure the paper's well-known claims and write a Markdown report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from aiayn import experiments


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="measure the paper's claims and write a report",
        description="Run the experiments behind ten of the paper's claims (scaled dot products, heads, "
                    "symmetry, weight sharing, embedding scale, relative positions, parallel training, "
                    "quadratic cost, learned positions, additive attention) and write OUT/experiments.md "
                    "with tables, figures and a verdict from the numbers for each. All but claim 9 take a "
                    "few minutes on a 2-core CPU; claim 9 trains two models (--training-steps each).")
    p.add_argument("--out", default="docs/experiments", help="report directory (default: docs/experiments)")
    p.add_argument("--only", type=int, nargs="+", metavar="N", help="run only these claims (1-10)")
    p.add_argument("--quick", action="store_true", help="reduced sizes: seconds per claim, for tests")
    p.add_argument("--training-steps", type=int, default=1500,
                   help="claim 9: updates per model on Multi30k (default: 1500, about 30 minutes each)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    context = experiments.ExperimentContext(out, args.quick, args.training_steps)
    start = time.perf_counter()
    findings = experiments.run(context, set(args.only) if args.only else None)
    header = (f"Measured with `aiayn experiments{' --quick' if args.quick else ''}` on this machine "
              f"({torch.get_num_threads()} CPU threads, torch {torch.__version__}); "
              f"{time.perf_counter() - start:.0f} s in all.\n")
    print(experiments.report(findings, out / "experiments.md", header))
    return 0
