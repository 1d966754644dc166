"""The `aiayn` command: one entry point, one small module per subcommand."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import MutableMapping


def _server_threads_spin_briefly(argv: list[str], environ: MutableMapping[str, str]) -> None:
    """`aiayn serve`: PyTorch's OpenMP threads (GNU libgomp) wait for the next parallel region by
    spinning 300,000 times before they sleep. A server's searches run short regions between pauses
    (the next requests, the event loop's work), so the spinning took CPU time from the HTTP side and
    the clients: with 10,000, a compiled model served on 2 threads answered 32 clients faster at less
    CPU time per sentence, with the same latency for one client, and whole files translated as fast
    (benchmarks/detail/serve_load.md). It must be set before torch loads libgomp; an
    operator's own GOMP_SPINCOUNT or OMP_WAIT_POLICY stays."""
    if argv[1:2] == ["serve"] and not {"GOMP_SPINCOUNT", "OMP_WAIT_POLICY"} & environ.keys():
        environ["GOMP_SPINCOUNT"] = "10000"


_server_threads_spin_briefly(sys.argv, os.environ)

# The imports below load torch: after the OpenMP setting above.
import torch  # noqa: E402

from aiayn import __version__  # noqa: E402
from aiayn.cli import (  # noqa: E402
    attention,
    average,
    cache,
    convert,
    evaluate,
    experiments,
    explain,
    export,
    info,
    plot,
    prepare,
    serve,
    train,
    translate,
)
from aiayn.errors import AiaynError  # noqa: E402

COMMANDS = {"prepare": prepare, "train": train, "translate": translate, "evaluate": evaluate,
            "average": average, "attention": attention, "explain": explain, "plot": plot,
            "experiments": experiments, "convert": convert, "export": export, "info": info, "serve": serve,
            "cache": cache}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="aiayn", description="The Transformer of 'Attention Is All You Need' for translation.")
    parser.add_argument("--version", action="version", version=f"aiayn {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, module in COMMANDS.items():
        module.add_parser(commands, name)
        commands.choices[name].add_argument(
            "--debug", action="store_true",
            help="show the full traceback of an error (also: environment variable AIAYN_DEBUG=1)")
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
    """Run one command. Expected failures (bad input or options, damaged files, a full disk) print
    one line and exit with 2; an interruption exits with 128 + the signal (130 for Ctrl-C), output
    into a pipe whose reader has gone with 141 (128 + SIGPIPE) and nothing said; anything else is a
    bug, reported on one line too (exit 1) unless --debug asks for the traceback."""
    args = parse(argv)
    try:
        code = COMMANDS[args.command].run(args) or 0
        sys.stdout.flush()  # here, not at exit, so that a reader gone away is handled below
        return code
    except KeyboardInterrupt as e:
        signum = getattr(e, "signum", signal.SIGINT)
        print(f"aiayn {args.command}: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
        return 128 + signum
    except BrokenPipeError:  # the reader went away (`aiayn translate ... | head`): stop quietly, as a
        # pipe's writer killed by SIGPIPE does; stdout to /dev/null, so Python's last flush says nothing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as e:
        if args.debug or os.environ.get("AIAYN_DEBUG"):
            raise
        expected = isinstance(e, EXPECTED)
        kind = "error" if expected else f"internal error ({type(e).__name__}, a bug: --debug shows where)"
        print(f"aiayn {args.command}: {kind}: {_one_line(e)}", file=sys.stderr)
        return 2 if expected else 1


# Failures that are not bugs in aiayn: its own errors, and what the system or a library says about
# files, memory and optional packages.
EXPECTED = (AiaynError, OSError, ImportError, MemoryError, torch.OutOfMemoryError)


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return " ".join(lines[:1]) if lines else type(error).__name__
