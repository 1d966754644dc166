"""`aiayn plot`: the positional-encoding matrix, or a run's training curves."""

from __future__ import annotations

import argparse

from aiayn.cli.options import positive_int


def positive_even(text: str) -> int:
    value = positive_int(text)
    if value % 2:
        raise argparse.ArgumentTypeError(f"must be even (sin and cos pairs), not {value}")
    return value


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(name, help="plot positional encodings or training curves",
                            description="positional-encoding: the sinusoid matrix (positions x dimensions) "
                                        "in the paper's interleaved layout and the concatenated one. "
                                        "training: loss, perplexity, learning rate and validation BLEU "
                                        "against the update step, from RUN_DIR/metrics.jsonl.")
    what = p.add_subparsers(dest="what", required=True, metavar="WHAT")
    pe = what.add_parser("positional-encoding", help="the sinusoidal encoding matrix")
    pe.add_argument("--d-model", type=positive_even, default=128, metavar="INT",
                    help="dimensions, even (default: 128)")
    pe.add_argument("--length", type=positive_int, default=100, metavar="INT",
                    help="positions (default: 100)")
    pe.add_argument("--out", default="positional-encoding.png", metavar="FILE",
                    help="PNG file to write (default: positional-encoding.png)")
    training = what.add_parser("training", help="a run's training curves")
    training.add_argument("run_dir", help="a training run directory (with metrics.jsonl)")
    training.add_argument("--out", default="training.png", metavar="FILE",
                          help="PNG file to write (default: training.png)")


def run(args: argparse.Namespace) -> int:
    from aiayn import visualize  # matplotlib: half a second to import, for this command only

    if args.what == "positional-encoding":
        print(visualize.positional_encoding_figure(args.d_model, args.length, args.out))
    else:
        print(visualize.training_figure(args.run_dir, args.out))
    return 0
