"""Command-line options made from the config dataclasses, so every field has a flag and help.

Precedence, lowest first: dataclass defaults, the preset, a recipe file (--config), flags.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
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
        help_text = f"{f.metadata['help']} (default: {f.default!r}{limits})"
        if f.type == "bool":
            group.add_argument(flag, dest=f.name, default=None, help=help_text,
                               action=argparse.BooleanOptionalAction)
        else:
            metavar = None if f.metadata.get("choices") else f.metadata.get("metavar") or f.type.upper()
            group.add_argument(flag, dest=f.name, default=None, help=help_text, metavar=metavar,
                               type=_TYPES[f.type], choices=f.metadata.get("choices"))


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


def resolve(args: argparse.Namespace) -> cfg.Recipe:
    """The checked recipe from defaults, preset, recipe file and flags (each overriding the one before)."""
    sections = cfg.load_config_file(args.config) if args.config else {}
    for name, cls in (("model", cfg.ModelConfig), ("data", cfg.DataConfig), ("train", cfg.TrainConfig)):
        sections[name] = {**sections.get(name, {}), **given(args, cls)}
    if args.preset:
        sections["preset"] = args.preset
    return cfg.recipe(sections, f"{args.config} and the command line" if args.config else "command line")


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


def add_inference_options(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    """Where a trained model runs, and how it searches; `exclude`: search options the command has no
    use for (they are then unknown options, not silently ignored)."""
    parser.add_argument("--engine", choices=("pytorch", "ctranslate2"), default="pytorch",
                        help="pytorch: an aiayn checkpoint (or Marian directory); ctranslate2: a directory "
                             "from `aiayn export ctranslate2`, whose length penalty is the plain form. "
                             "CTranslate2's speed depends on its CPU settings: on some machines the "
                             "environment variable CT2_USE_MKL=0 (oneDNN) or --threads 1 (int8) is "
                             "1.3-1.6x faster than its default (README, engines) (default: pytorch)")
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
    parser.add_argument("--compute-type", default="default", metavar="TYPE",
                        help="ctranslate2 only: default, float32, int8, int8_float32, bfloat16, ... "
                             "(default: default)")
    parser.add_argument("--device", default="auto", type=device_name, metavar="DEVICE",
                        help="auto (CUDA when present), cpu, cuda or cuda:N (default: auto)")
    parser.add_argument("--threads", type=non_negative_int, default=0, metavar="INT",
                        help="CPU threads; 0: PyTorch's default (default: 0)")
    add_config_options(parser, cfg.DecodeConfig, "search (paper section 6.1)", exclude)


@dataclass
class Inference:
    """A loaded model, ready to translate lines with a DecodeConfig."""

    translate: Callable[[list[str], cfg.DecodeConfig], list]
    decode: cfg.DecodeConfig
    model: Any  # the PyTorch Transformer (None with CTranslate2)
    tokenizer: Any
    src_lang: str
    tgt_lang: str
    where: str  # device and threads, to print next to timings


def load_for_inference(args: argparse.Namespace) -> Inference:
    """The model that `args.checkpoint` names, on the engine and device asked for."""
    import torch

    from aiayn import checkpoint, inference
    from aiayn.decoding.translator import translate
    from aiayn.train.loop import resolve_device

    _check_engine_options(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    decode = cfg.build(cfg.DecodeConfig, given(args, cfg.DecodeConfig), "command line")
    threads = torch.get_num_threads()
    if args.engine == "ctranslate2":
        from aiayn.interop.ctranslate2 import CTranslate2Translator

        engine = CTranslate2Translator(args.checkpoint, device.type, threads, args.compute_type)
        where = f"ctranslate2 {args.compute_type} on {device.type}, {threads} threads"
        decode = dataclasses.replace(decode, penalty_form="plain")  # the only form CTranslate2 has
        return Inference(engine.translate, decode, None, engine.tokenizer, *engine.languages, where)
    ck = checkpoint.load(checkpoint.resolve(args.checkpoint), device, with_state=False)
    ck.model.eval()
    where = f"pytorch on {device}, {threads} threads" if device.type == "cpu" else f"pytorch on {device}"
    dtype = getattr(torch, args.dtype)
    if args.int8:
        if device.type != "cpu":
            raise cfg.ConfigError("--int8 is for CPUs: use --device cpu")
        ck.model = inference.quantize_int8(ck.model, compiled=decode.compile)
        where = where.replace("pytorch", "pytorch int8 compiled" if decode.compile else "pytorch int8")
    elif decode.compile:  # TorchInductor packs the weights itself
        ck.model = ck.model.to(dtype)
        where = where.replace("pytorch", f"pytorch {args.dtype} compiled")
    elif device.type == "cpu" and inference.packing_available(dtype):
        ck.model = inference.pack_for_cpu(ck.model, dtype)  # same results, faster matmuls
        where = where.replace("pytorch", f"pytorch {args.dtype} packed")
    elif dtype != torch.float32:
        ck.model = ck.model.to(dtype)
        where = where.replace("pytorch", f"pytorch {args.dtype}")
    return Inference(lambda lines, config: translate(ck.model, ck.tokenizer, lines, config),
                     decode, ck.model, ck.tokenizer, ck.data.src_lang, ck.data.tgt_lang, where)


def _check_engine_options(args: argparse.Namespace) -> None:
    """Options of one engine given with the other are errors, not silently ignored."""
    if args.engine == "ctranslate2":
        for flag, given_ in (("--int8", args.int8), (f"--dtype {args.dtype}", args.dtype != "float32")):
            if given_:
                raise cfg.ConfigError(f"{flag} is for --engine pytorch; CTranslate2 takes --compute-type "
                                      "(int8, bfloat16, ...)")
        if getattr(args, "penalty_form", None) == "gnmt":
            raise cfg.ConfigError("--penalty-form gnmt is for --engine pytorch; CTranslate2's length penalty "
                                  "is the plain form")
    elif args.compute_type != "default":
        raise cfg.ConfigError(f"--compute-type {args.compute_type} is for --engine ctranslate2; "
                              "PyTorch takes --int8 or --dtype")
    if args.int8 and args.dtype != "float32":
        raise cfg.ConfigError(f"--int8 and --dtype {args.dtype} are alternatives: choose one")
    if args.engine == "ctranslate2" and getattr(args, "compile", False):
        raise cfg.ConfigError("--compile is for --engine pytorch")
