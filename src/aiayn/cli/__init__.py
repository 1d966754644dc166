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


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line; options may also come between a command's positional arguments,
    as in `aiayn translate CKPT --beam-size 1 "A sentence."`."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not extra:
        return args
    argv = sys.argv[1:] if argv is None else argv
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    try:
        command_args = commands.choices[args.command].parse_intermixed_args(
            argv[argv.index(args.command) + 1:])
    except TypeError:  # a command with subcommands of its own cannot intermix: report as usual
        return parser.parse_args(argv)
    command_args.command = args.command
    return command_args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        return COMMANDS[args.command].run(args) or 0
    except (ConfigError, DataError, ConversionError, FileNotFoundError, ImportError) as e:
        print(f"aiayn {args.command}: error: {e}", file=sys.stderr)
        return 2
