"""Loading any model aiayn reads for translation: `load_translator` recognises what a path holds (an
aiayn checkpoint or run directory, a HuggingFace Marian directory, or a CTranslate2 export), loads it
on a device and chooses how it computes (`prepare`: dtype, int8, a compiled decoder step, and on a CPU
weights packed for the matmul kernels); `load_model` gives the PyTorch model itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn import allocator, checkpoint
from aiayn import config as cfg
from aiayn.decoding.constrained import Steer
from aiayn.decoding.translator import Translation, translate_ids
from aiayn.interop import marian
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer
from aiayn.translation.translator import Translator

ENGINES = ("pytorch", "ctranslate2")
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class LoadedModel:
    """A PyTorch model with its tokenizer and languages, from an aiayn checkpoint or a Marian directory."""

    model: Transformer
    tokenizer: Tokenizer
    src_lang: str
    tgt_lang: str
    path: Path  # the checkpoint directory it came from (a run's newest checkpoint, say)
    data: cfg.DataConfig  # how it was trained (defaults for a Marian model)
    train: cfg.TrainConfig
    decoding: dict[str, Any] = dataclasses.field(default_factory=dict)  # search settings it keeps
    # a multilingual model's directions (SRC-TGT) that keep settings of their own, over `decoding`
    by_direction: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def model_format(path: str | Path) -> str:
    """What `path` holds: "aiayn" (a checkpoint or a run directory), "marian" or "ctranslate2"."""
    path = Path(path)
    if (path / "model.bin").exists():
        return "ctranslate2"
    if marian.is_marian_dir(path):
        return "marian"
    if checkpoint.is_checkpoint(path) or checkpoint.step_checkpoints(path):
        return "aiayn"
    raise checkpoint.CheckpointError(
        f"{path}: not a model aiayn can read (an aiayn checkpoint or run directory, a Marian "
        "directory, or a CTranslate2 export)")


def load_model(path: str | Path, device: str | torch.device = "cpu", ema: bool = False) -> LoadedModel:
    """The PyTorch model at `path`: an aiayn checkpoint, a run directory (its newest checkpoint), or
    a HuggingFace MarianMTModel directory (needs transformers). `ema`: an aiayn checkpoint's moving
    average of the weights (--ema-decay) instead of its weights."""
    kind = model_format(path)
    if kind == "ctranslate2":
        raise checkpoint.CheckpointError(f"{path}: a CTranslate2 export, which only CTranslate2 runs "
                                         "(engine ctranslate2)")
    if ema and kind != "aiayn":
        raise checkpoint.CheckpointError(f"{path}: a {kind} model has no moving average of its weights; "
                                         "drop --ema")
    if kind == "marian":
        model, tokenizer, languages = marian.load_marian(path)
        data = cfg.DataConfig(src_lang=languages.get("source_lang", ""),  # a Marian model is told the
                              tgt_lang=languages.get("target_lang", ""),  # target in the source (OPUS-MT)
                              pairs=languages.get("pairs", ()), language_token="source")
        return LoadedModel(model.to(device), tokenizer, data.src_lang, data.tgt_lang, Path(path), data,
                           cfg.TrainConfig())
    ck = checkpoint.load(checkpoint.resolve(path), device, with_state=False, ema=ema)
    return LoadedModel(ck.model, ck.tokenizer, ck.data.src_lang, ck.data.tgt_lang, ck.path, ck.data, ck.train,
                       *checkpoint.decoding(ck.path))


def prepare(model: Transformer, device: torch.device, dtype: str = "float32", int8: bool = False,
            compile: bool | None = False) -> tuple[Transformer, str, bool]:
    """The model to translate with, computing as asked, a description of how, and whether its searches
    run the compiled decoder step. The one place that chooses: int8 linear maps (CPU; for the compiled
    step or eager), a compiled decoder step (TorchInductor packs the weights itself; on a CPU, the
    weights stored by column for its few-row steps: `inference.weights_by_column`), weights packed
    once for the CPU's matmul kernels (same results, faster), or a plain cast. compile=None: the
    compiled step if this model has been compiled on this machine before (its steps are in the cache,
    `decoding.cache`), else not. `model` (on `device`, in eval mode) may be changed or copied."""
    from aiayn import inference
    from aiayn.decoding.cache import store, verdict
    from aiayn.decoding.step_graph import compiled_before

    torch_dtype = getattr(torch, dtype)
    problem = verdict.known_unloadable(device) if compile is not False else ""
    if problem:  # this machine's torch crashes loading compiled steps (`verdict.loads`)
        if compile or store.entries():  # asked for, or what the cache holds would have been used
            verdict.say_unloadable(problem)
        compile = False
    if int8:
        if device.type != "cpu":
            raise cfg.ConfigError("int8 is for CPUs: use device cpu")
        if compile or (compile is None and inference.int8_compilable() and store.entries()):
            compiled = inference.quantize_int8(model, compiled=True)  # a copy
            if compile or compiled_before(compiled):
                return compiled, "int8 compiled", True
        return inference.quantize_int8(model), "int8", False
    if compile or (compile is None and compiled_before(model.to(torch_dtype))):
        model = model.to(torch_dtype)
        if device.type == "cpu":  # the few-row matmuls of its steps, faster on weights by column
            inference.weights_by_column(model)
        return model, f"{dtype} compiled", True
    if device.type == "cpu" and inference.packing_available(torch_dtype):
        return inference.pack_for_cpu(model, torch_dtype), f"{dtype} packed", False
    return model.to(torch_dtype), dtype, False


def load_translator(path: str | Path, *, engine: str | None = None, device: str = "auto",
                    dtype: str = "float32", int8: bool = False, ema: bool = False,
                    compile: bool | None = None, threads: int | None = None, compute_type: str = "default",
                    src_lang: str | None = None,
                    tgt_lang: str | None = None, zero_shot: bool = False, **options: Any) -> Translator:
    """A Translator for the model at `path` (see `model_format`).

    src_lang, tgt_lang: the direction, for a multilingual model (default: the first it was trained
    on; `Translator.towards` gives the others, sharing the model); a bilingual model has its own.
    zero_shot: also a direction the multilingual model was not trained on (see `towards`).

    engine: "pytorch" or "ctranslate2" (default: ctranslate2 for a CTranslate2 export, else pytorch).
    device: auto (CUDA when present), cpu, cuda or cuda:N. threads: CPU threads (process-wide).
    PyTorch only: dtype (float32, bfloat16, float16), int8 (CPU), ema (the moving average of an aiayn
    checkpoint's weights, from training with --ema-decay), compile (a compiled decoder step:
    True, False, or None: if this model has been compiled on this machine before). On a CPU, the
    process's malloc then keeps freed memory for reuse (`allocator.keep_freed_memory`).
    CTranslate2 only: compute_type (default, float32, int8, ...).
    options: search defaults, the fields of DecodeConfig (beam_size, nbest, length_penalty, ...), over
    those an aiayn checkpoint keeps (chosen on a validation set by `aiayn evaluate --sweep`), over
    DecodeConfig's own.
    """
    from aiayn.devices import resolve_device

    _check_engine_options(engine, dtype, int8, compile, compute_type, options, ema)  # before reading anything
    engine = _engine_for(path, model_format(path), engine, compute_type)
    if engine == "ctranslate2":
        _check_engine_options(engine, dtype, int8, compile, compute_type, options, ema)
    if threads:
        torch.set_num_threads(threads)
    device_ = resolve_device(device)
    threads_ = torch.get_num_threads()
    plural = "s" if threads_ > 1 else ""
    on = f"on {device_}, {threads_} thread{plural}" if device_.type == "cpu" else f"on {device_}"
    if engine == "ctranslate2":
        translator = _ctranslate2(path, device_, threads_, compute_type, options, on)
    else:
        translator = _pytorch(path, device_, dtype, int8, ema, compile, options, on)
    return _in_direction(translator, src_lang, tgt_lang, zero_shot, path)


def _ctranslate2(path: str | Path, device: torch.device, threads: int, compute_type: str,
                 options: dict[str, Any], on: str) -> Translator:
    """`load_translator`'s Translator of a CTranslate2 export."""
    from aiayn.interop.ctranslate2 import CTranslate2Translator

    ct2 = CTranslate2Translator(path, device.type, threads, compute_type)
    defaults = cfg.build(cfg.DecodeConfig, {"penalty_form": "plain", **options}, "translator options")
    return Translator(lambda ids, config, progress, steers=None: ct2.translate(ids, config, steers),
                      defaults, None, ct2.tokenizer, *ct2.languages, f"ctranslate2 {compute_type} {on}",
                      ct2.max_source_len, pairs=ct2.pairs, language_token=ct2.language_token)


def _pytorch(path: str | Path, device: torch.device, dtype: str, int8: bool, ema: bool, compile: bool | None,
             options: dict[str, Any], on: str) -> Translator:
    """`load_translator`'s Translator of an aiayn checkpoint, or a Marian or HuggingFace model."""
    if device.type == "cpu":
        allocator.keep_freed_memory()  # a search's large tensors reuse freed memory (process-wide)
    loaded = load_model(path, device, ema)
    model, how, compiled = prepare(loaded.model.eval(), device, dtype, int8, compile)
    def defaults(kept: dict[str, Any]) -> cfg.DecodeConfig:  # options given win over settings kept
        return cfg.build(cfg.DecodeConfig, {**kept, "compile": compiled, **options}, "translator options")

    def run(ids: list[list[int]], config: cfg.DecodeConfig, progress: bool,
            steers: list[Steer] | None = None) -> list[list[Translation]]:
        return translate_ids(model, loaded.tokenizer, ids, config, progress, steers)

    return Translator(run, defaults(loaded.decoding), model, loaded.tokenizer, loaded.src_lang,
                      loaded.tgt_lang, f"pytorch {how} {on}", max_source_len(loaded), pairs=loaded.data.pairs,
                      language_token=loaded.data.language_token,
                      by_direction={pair: defaults(kept) for pair, kept in loaded.by_direction.items()})


def _in_direction(translator: Translator, src_lang: str | None, tgt_lang: str | None, zero_shot: bool,
                  path: str | Path) -> Translator:
    """`translator` for the direction asked: a multilingual model's (default: its first, see
    `Translator.towards`); a bilingual model translates its own only."""
    if translator.pairs:  # the first direction that fits the languages given (else the first)
        pairs = [pair.split("-") for pair in translator.pairs]
        fits = [(s, t) for s, t in pairs if src_lang in (None, s) and tgt_lang in (None, t)]
        src, tgt = fits[0] if fits else pairs[0]
        return translator.towards(src_lang or src, tgt_lang or tgt, zero_shot)
    has = (translator.src_lang, translator.tgt_lang)
    if all(has) and (src_lang or has[0], tgt_lang or has[1]) != has:
        raise cfg.ConfigError(f"{path} translates {has[0]}->{has[1]}, not {src_lang or has[0]}->"
                              f"{tgt_lang or has[1]}")
    return translator


def max_source_len(loaded: LoadedModel) -> int:
    """The longest sentence, in source tokens, that a model takes: the longest it was trained on,
    and with learned positions, no more than it has positions for (one goes to eos)."""
    c = loaded.model.config
    longest = loaded.data.max_len + bool(loaded.data.pairs)  # and a multilingual model's >>xx<<
    return min(longest, c.max_positions - 1) if c.positional == "learned" else longest


def _check_engine_options(engine: str | None, dtype: str, int8: bool, compile: bool, compute_type: str,
                          options: dict[str, Any], ema: bool = False) -> None:
    """Options of one engine given with the other are errors, not silently ignored."""
    if engine not in (None, *ENGINES):
        raise cfg.ConfigError(f"engine={engine!r} is not one of {', '.join(ENGINES)}")
    if dtype not in DTYPES:
        raise cfg.ConfigError(f"dtype={dtype!r} is not one of {', '.join(DTYPES)}")
    if int8 and dtype != "float32":
        raise cfg.ConfigError(f"--int8 and --dtype {dtype} are alternatives: choose one")
    if engine == "ctranslate2":
        pytorch_only = (("--int8", int8), (f"--dtype {dtype}", dtype != "float32"), ("--compile", compile),
                        ("--ema", ema))
        for flag, given in pytorch_only:
            if given:
                raise cfg.ConfigError(f"{flag} is for --engine pytorch; CTranslate2 takes --compute-type "
                                      "(int8, bfloat16, ...)")
        if options.get("penalty_form") == "gnmt":
            raise cfg.ConfigError("--penalty-form gnmt is for --engine pytorch; CTranslate2's length "
                                  "penalty is the plain form")
    elif engine == "pytorch" and compute_type != "default":
        raise cfg.ConfigError(f"--compute-type {compute_type} is for --engine ctranslate2; PyTorch takes "
                              "--int8 or --dtype")


def _engine_for(path: str | Path, kind: str, engine: str | None, compute_type: str) -> str:
    """The engine for a model of format `kind`: the one asked for, if it can run it."""
    if engine == "ctranslate2" and kind != "ctranslate2":
        raise cfg.ConfigError(f"{path} is not a CTranslate2 export (no model.bin): make one with "
                              "`aiayn export ctranslate2`")
    if engine == "pytorch" and kind == "ctranslate2":
        raise cfg.ConfigError(f"{path} is a CTranslate2 export: translate it with --engine ctranslate2")
    engine = engine or ("ctranslate2" if kind == "ctranslate2" else "pytorch")
    if engine == "pytorch" and compute_type != "default":
        raise cfg.ConfigError(f"--compute-type {compute_type} is for CTranslate2 exports; PyTorch takes "
                              "--int8 or --dtype")
    return engine
