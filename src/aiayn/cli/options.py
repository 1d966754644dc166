"""Command-line options made from the config dataclasses, so every field has a flag and help.

Precedence, lowest first: dataclass defaults, the preset, a recipe file (--config), flags
(`training.train_model` merges them).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any

from aiayn import config as cfg

_TYPES = {"int": int, "float": float, "str": str}


def add_config_options(parser: argparse.ArgumentParser, cls: type, title: str,
                       exclude: tuple[str, ...] = ()) -> None:
    """One flag per field of `cls` (`d_model` -> `--d-model`), defaulting to None = not given.

    A field with choices shows them ({relu,gelu,silu}); values are checked when the config is built.
    """
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(cls):
        if not f.metadata["flag"] or f.name in exclude:
            continue
        flag = "--" + f.name.replace("_", "-")
        bounds = f.metadata.get("bounds")
        limits = f"; {cfg.describe_bounds(bounds)}" if bounds else ""
        default = ",".join(map(str, f.default)) or "none" if f.type in cfg.LISTS else repr(f.default)
        help_text = f"{f.metadata['help']} (default: {default}{limits})"
        if f.type == "bool":
            group.add_argument(flag, dest=f.name, default=None, help=help_text,
                               action=argparse.BooleanOptionalAction)
        elif f.type == "tuple[str, ...]" and f.metadata.get("joined"):  # items joined by commas
            group.add_argument(flag, dest=f.name, default=None, help=help_text, type=comma_list,
                               metavar=f.metadata.get("metavar"))
        elif f.type == "tuple[str, ...]":  # the flag given again adds an item
            group.add_argument(flag, dest=f.name, default=None, help=help_text, action="append",
                               metavar=f.metadata.get("metavar"))
        elif f.type == "tuple[float, ...]":  # items joined by commas
            group.add_argument(flag, dest=f.name, default=None, help=help_text, type=float_list,
                               metavar=f.metadata.get("metavar"))
        else:
            metavar = None if f.metadata.get("choices") else f.metadata.get("metavar") or f.type.upper()
            group.add_argument(flag, dest=f.name, default=None, help=help_text, metavar=metavar,
                               type=_TYPES[f.type], choices=f.metadata.get("choices"))


def comma_list(text: str) -> tuple[str, ...]:
    """argparse type: items joined by commas (en-de,de-en)."""
    return tuple(text.split(","))


def float_list(text: str) -> tuple[float, ...]:
    """argparse type: numbers joined by commas (3,1)."""
    try:
        return tuple(float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not numbers joined by commas (3,1)") from None


def change_default(parser: argparse.ArgumentParser, dest: str, value: Any, help: str) -> None:
    """A command whose default for a config option differs from the config's, said in its help."""
    parser.set_defaults(**{dest: value})
    next(a for a in parser._actions if a.dest == dest).help = f"{help} (default: {value!r})"


def field_help(cls: type, name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == name)


def add_recipe_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preset", default=None, choices=sorted(cfg.PRESETS),
                        help="model size: base and big from the paper's Table 3, small and tiny for "
                             "CPUs and tests (default: base on a GPU, small otherwise)")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="recipe file (.toml or .json) with sections preset, model, data, train")


def given(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The fields of `cls` set on the command line."""
    return {f.name: getattr(args, f.name) for f in dataclasses.fields(cls)
            if getattr(args, f.name, None) is not None}


def device_name(text: str) -> str:
    """argparse type: a device name (auto, cpu, cuda, cuda:N, mps)."""
    try:
        return cfg.check_device(text)
    except cfg.ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def add_direction_options(parser: argparse.ArgumentParser, default: str = "its first direction's",
                          what: str = "a multilingual model's direction") -> None:
    """--src-lang, --tgt-lang and --zero-shot: which direction of a multilingual model."""
    parser.add_argument("--src-lang", metavar="LANG", help=f"{what}: from this language (default: {default})")
    parser.add_argument("--tgt-lang", metavar="LANG", help=f"... into this one (default: {default})")
    parser.add_argument("--zero-shot", action="store_true",
                        help="a multilingual model may translate a direction it was not trained on, from a "
                             "language it has read into one it has written (its quality is untrained)")


def add_inference_options(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    """Where a trained model runs, and how it searches; `exclude`: search options the command has no
    use for (they are then unknown options, not silently ignored)."""
    parser.add_argument("--engine", choices=("pytorch", "ctranslate2"), default=None,
                        help="pytorch: an aiayn checkpoint (or Marian directory); ctranslate2: a directory "
                             "from `aiayn export ctranslate2`, whose length penalty is the plain form "
                             "(default: ctranslate2 for such a directory, else pytorch). "
                             "CTranslate2's speed depends on its CPU settings: on some machines the "
                             "environment variable CT2_USE_MKL=0 (oneDNN) or --threads 1 (int8) is "
                             "faster than its default (benchmarks/detail/decode_speed.md)")
    parser.add_argument("--int8", action="store_true",
                        help="pytorch only, for CPUs: int8 weights in every linear map, activations "
                             "quantized at each matmul (PyTorch's dynamic quantization; with --compile, "
                             "oneDNN's int8 matmuls, on AMX or VNNI units where the CPU has them, with "
                             "activations quantized per row)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                        help="pytorch only: the floating-point type the model computes in. bfloat16 is "
                             "faster on GPUs and on CPUs with AMX or AVX512-BF16 units (elsewhere it can "
                             "be slower); log-probabilities and scores stay float32. On a CPU, float32 "
                             "and bfloat16 use weights packed once for MKL's or oneDNN's matmul where "
                             "PyTorch has them: the same results, faster (default: float32)")
    parser.add_argument("--ema", action="store_true",
                        help="pytorch only: the moving average of the weights saved beside them instead of "
                             "the weights (an aiayn checkpoint of a run trained with --ema-decay)")
    parser.add_argument("--compute-type", default="default", metavar="TYPE",
                        help="ctranslate2 only: default, float32, int8, int8_float32, bfloat16, ... "
                             "(default: default)")
    parser.add_argument("--device", default="auto", type=device_name, metavar="DEVICE",
                        help="auto (CUDA when present), cpu, cuda or cuda:N (default: auto)")
    parser.add_argument("--threads", type=non_negative_int, default=0, metavar="INT",
                        help="CPU threads; 0: PyTorch's default (default: 0)")
    add_config_options(parser, cfg.DecodeConfig, "search (paper section 6.1)", exclude)
    if "compile" not in exclude:  # neither --compile nor --no-compile: the translator chooses
        compile_ = next(a for a in parser._actions if a.dest == "compile")
        compile_.help = f"{field_help(cfg.DecodeConfig, 'compile')} (default: auto)"


def translator_for(args: argparse.Namespace):
    """The Translator for `args.checkpoint` with the engine, device and search options of the flags."""
    from aiayn.translation import load_translator

    options = given(args, cfg.DecodeConfig)
    translator = load_translator(
        args.checkpoint, engine=args.engine, device=args.device, dtype=args.dtype, int8=args.int8,
        ema=args.ema, compile=options.pop("compile", None), threads=args.threads,
        compute_type=args.compute_type,
        src_lang=getattr(args, "src_lang", None), tgt_lang=getattr(args, "tgt_lang", None),
        zero_shot=getattr(args, "zero_shot", False), **options)
    if translator.zero_shot:
        print(f"{translator.src_lang}->{translator.tgt_lang} is zero-shot: the model was not trained on it",
              file=sys.stderr)
    return translator
