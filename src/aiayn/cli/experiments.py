"""`aiayn experiments`: measure the paper's well-known claims and write a Markdown report."""

from __future__ import annotations

import argparse
from pathlib import Path

from aiayn import experiments
from aiayn.cli.options import positive_int


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="measure the paper's claims and write a report",
        description="Run the experiments behind ten of the paper's claims (scaled dot products, heads, "
                    "symmetry, weight sharing, embedding scale, relative positions, parallel training, "
                    "quadratic cost, learned positions, additive attention), one of its follow-up "
                    "(relative position representations, Shaw et al. 2018) and two of its setup (a joint "
                    "vocabulary against two for English-German, and for English-Chinese as the Chinese "
                    "notes advise), and write OUT/experiments.md with tables, figures and a verdict from "
                    "the numbers for each. All but claims 9, 11, 12 and 13 take under a minute on a 2-core "
                    "CPU; those train two models each (13: four, with tatoeba-zh in $AIAYN_DATA_DIR; "
                    "--training-steps each). "
                    "Each finding is kept in OUT/findings/ and the report covers every finding kept "
                    "there, so claims can be run (or rerun) separately with --only.")
    p.add_argument("--out", default="experiments", metavar="DIR",
                   help="report directory (default: experiments; the committed report is docs/experiments)")
    claims = range(1, len(experiments.CLAIMS) + 1)
    p.add_argument("--only", type=int, nargs="+", metavar="N", choices=claims,
                   help=f"run only these claims (1-{len(claims)}); the report keeps the others' last "
                        "findings")
    p.add_argument("--quick", action="store_true", help="reduced sizes: seconds per claim, for tests")
    p.add_argument("--training-steps", type=positive_int, default=1500, metavar="INT",
                   help="claims 9, 11, 12 and 13: updates per model (default: 1500, about 30 minutes "
                        "each on Multi30k, 15 on tatoeba-zh)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    context = experiments.ExperimentContext(out, args.quick, args.training_steps)
    experiments.run(context, set(args.only) if args.only else None)
    findings = experiments.saved(out, args.quick)
    header = (f"Measured with `aiayn experiments{' --quick' if args.quick else ''}`: "
              f"{experiments.measured_where(findings)}. Claims 9, 11, 12 and 13 train models; the others "
              "take seconds.\n")
    print(experiments.report(findings, out / "experiments.md", header))
    return 0
