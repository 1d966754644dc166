"""The `aiayn` command: one entry point, one small module per subcommand."""

from __future__ import annotations

import argparse
import sys

from aiayn import __version__
from aiayn.cli import (
    attention,
    average,
    convert,
    evaluate,
    experiments,
    export,
    info,
    plot,
    prepare,
    train,
    translate,
)
from aiayn.config import ConfigError
from aiayn.data.corpora import DataError
from aiayn.interop import ConversionError

COMMANDS = {"prepare": prepare, "train": train, "translate": translate, "evaluate": evaluate,
            "average": average, "attention": attention, "plot": plot, "experiments": experiments,
            "convert": convert, "export": export, "info": info}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need' for translation.")
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        module.add_parser(commands, name)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command].run(args) or 0
    except (ConfigError, DataError, ConversionError, FileNotFoundError, ImportError) as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
