"""Typed configuration: the model's hyper-parameters (named as in the paper), data and training.

Each field carries its help text in `metadata`, so the command line (`aiayn train --help`) and
`aiayn info` explain every option from one place. Presets are plain dictionaries of overrides.
Unknown keys are errors, never silently dropped.
"""

from __future__ import annotations

import dataclasses
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _opt(default: Any, help: str, choices: tuple[str, ...] | None = None, flag: bool = True) -> Any:
    """A config field with its help text; `flag=False` keeps it off the command line."""
    return field(default=default, metadata={"help": help, "choices": choices, "flag": flag})


class ConfigError(ValueError):
    """A configuration value or key that cannot be used; the message says which and where."""


@dataclass(frozen=True)
class ModelConfig:
    """The Transformer's shape (section 3 and Table 3 of the paper)."""

    vocab_size: int = _opt(8000, "size V of the joint source/target BPE vocabulary")
    d_model: int = _opt(512, "width d_model of embeddings and of every sub-layer output")
    n_heads: int = _opt(8, "attention heads h; each has d_k = d_v = d_model / h")
    d_ff: int = _opt(2048, "inner width d_ff of the position-wise feed-forward network")
    n_encoder_layers: int = _opt(6, "encoder layers N")
    n_decoder_layers: int = _opt(6, "decoder layers N")
    dropout: float = _opt(
        0.1, "P_drop on embeddings + positions and on each sub-layer output before the residual add"
    )
    attention_dropout: float = _opt(0.1, "dropout on the attention weights")
    activation_dropout: float = _opt(0.1, "dropout after the feed-forward activation")
    activation: str = _opt("relu", "feed-forward activation", ("relu", "gelu", "silu"))
    norm_position: str = _opt(
        "post",
        "post: LayerNorm(x + Sublayer(x)) as in the paper; pre: x + Sublayer(LayerNorm(x))",
        ("post", "pre"),
    )
    positional: str = _opt(
        "sinusoidal", "position information: fixed sinusoids (paper) or learned", ("sinusoidal", "learned")
    )
    pe_layout: str = _opt(
        "interleaved",
        "sinusoid layout: interleaved (paper: sin on even dims, cos on odd) or concatenated "
        "[sin | cos] (tensor2tensor, fairseq, Marian)",
        ("interleaved", "concatenated"),
    )
    max_positions: int = _opt(1024, "number of learned positions (positional=learned only)")
    share_embeddings: bool = _opt(True, "one embedding matrix for source and target tokens")
    tie_output: bool = _opt(True, "tie the decoder embedding to the pre-softmax linear layer")
    scale_embedding: bool = _opt(
        True, "multiply embeddings by sqrt(d_model) (the paper; HuggingFace Marian models may not)"
    )
    output_bias: bool = _opt(False, "a bias on the output logits (Marian's final_logits_bias)")
    layer_norm_eps: float = _opt(1e-5, "epsilon of every LayerNorm")
    # Special ids come from the tokenizer, not from the command line.
    pad_id: int = _opt(0, "id of the padding token", flag=False)
    bos_id: int = _opt(2, "id that starts every target sequence", flag=False)
    eos_id: int = _opt(3, "id that ends every sequence", flag=False)

    def __post_init__(self) -> None:
        _check_choices(self)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name}={getattr(self, name)} must be in [0, 1)")
        for name in ("vocab_size", "d_model", "n_heads", "d_ff", "max_positions"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}={getattr(self, name)} must be positive")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is cut into batches."""

    train: str = _opt(
        "multi30k",
        "training data: multi30k[:SPLIT], synthetic:copy, synthetic:reverse, FILE.tsv[.gz], "
        "SRC_FILE,TGT_FILE, or PREFIX (reads PREFIX.SRC_LANG and PREFIX.TGT_LANG, plain or .gz)",
    )
    valid: str = _opt(
        "", "validation data, same forms as --train; empty: the named dataset's own val split"
    )
    src_lang: str = _opt("en", "source language code")
    tgt_lang: str = _opt("de", "target language code")
    tokenizer: str = _opt(
        "", "tokenizer directory from `aiayn prepare` (or a SentencePiece .model file); "
            "empty: learn one from the training data"
    )
    max_len: int = _opt(256, "drop training pairs with more subword tokens than this on either side")
    batch_tokens: int = _opt(
        4096, "tokens per batch, padding included, on each side (the paper: about 25,000)"
    )


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation recipe (section 5) and the bookkeeping of a training run."""

    label_smoothing: float = _opt(0.1, "label smoothing epsilon_ls")
    lr_scale: float = _opt(
        1.0, "factor on the paper's rate d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)"
    )
    warmup_steps: int = _opt(4000, "linear warm-up steps before the inverse-square-root decay")
    adam_beta1: float = _opt(0.9, "Adam beta1")
    adam_beta2: float = _opt(0.98, "Adam beta2")
    adam_eps: float = _opt(1e-9, "Adam epsilon")
    clip_norm: float = _opt(0.0, "clip the gradient norm to this value; 0 turns clipping off")
    update_tokens: int = _opt(
        0, "accumulate batches until an update holds this many target tokens; 0: one batch per update"
    )
    max_steps: int = _opt(0, "stop after this many updates; 0: no limit")
    max_epochs: int = _opt(0, "stop after this many passes over the data; 0: no limit")
    max_minutes: float = _opt(0.0, "stop after this much wall time; 0: no limit")
    valid_every: int = _opt(500, "validate every this many updates (and at the end)")
    bleu_every: int = _opt(
        0, "translate the validation set and score sacreBLEU every this many updates (and at the end), "
           "keeping the best checkpoint in RUN_DIR/checkpoints/best; 0: never"
    )
    bleu_beam: int = _opt(4, "beam size for that validation BLEU (length penalty 0.6, as evaluation)")
    save_every: int = _opt(500, "save a checkpoint every this many updates (and at the end)")
    keep_checkpoints: int = _opt(5, "keep only the newest this many step checkpoints")
    log_every: int = _opt(50, "append training metrics to metrics.jsonl every this many updates")
    seed: int = _opt(1, "seed for initialisation, dropout and batch order")
    device: str = _opt("auto", "auto (CUDA when present, else CPU), cpu, cuda or cuda:N")
    threads: int = _opt(0, "CPU threads for PyTorch; 0: PyTorch's default")
    precision: str = _opt(
        "auto",
        "bfloat16: autocast matmuls to bfloat16 (weights, optimizer and loss stay float32); fast on "
        "GPUs and on CPUs with AMX or AVX512-BF16 units, slow on other CPUs. float32: no autocast. "
        "auto: bfloat16 on CUDA, float32 on CPU",
        ("auto", "float32", "bfloat16"),
    )


@dataclass(frozen=True)
class DecodeConfig:
    """How to search for translations (section 6.1: beam 4, length penalty 0.6, input length + 50)."""

    beam_size: int = _opt(4, "beam width; 1 is greedy decoding")
    nbest: int = _opt(1, "hypotheses to output per sentence, best first (at most the beam size)")
    length_penalty: float = _opt(0.6, "length penalty alpha; 0 turns it off")
    penalty_form: str = _opt(
        "gnmt", "gnmt: ((5 + |Y|) / 6)^alpha (the paper); plain: |Y|^alpha (fairseq, Marian, HuggingFace)",
        ("gnmt", "plain"),
    )
    max_output_extra: int = _opt(50, "output at most the source length + this many tokens (the paper's rule)")
    max_output_len: int = _opt(0, "output at most this many tokens instead; 0: use --max-output-extra")
    temperature: float = _opt(0.0, "sample with this temperature instead of searching; 0: search")
    top_k: int = _opt(0, "when sampling, only from the k most probable tokens; 0: from all")
    batch_size: int = _opt(64, "sentences per batch, or source tokens with --batch-by tokens")
    batch_by: str = _opt("sentences", "what --batch-size counts", ("sentences", "tokens"))
    seed: int = _opt(1, "seed for sampling")
    compile: bool = _opt(
        False, "run each decoder step compiled by TorchInductor: the first batch of each power-of-two "
               "size compiles for seconds; then the small preset decoded 1.2-1.3x faster on a 2-core "
               "CPU, with the same translations up to float rounding; with --int8, on int8 matmuls "
               "(greedy 1.3x, beam 4 1.6x the compiled float32 step on a CPU with AMX)")

    def __post_init__(self) -> None:
        _check_choices(self)
        if not 1 <= self.nbest <= self.beam_size:
            raise ConfigError(f"nbest={self.nbest} must be between 1 and beam_size={self.beam_size}")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be at least 1")


# Presets: the paper's Table 3 models, and CPU-sized ones. Values override ModelConfig defaults.
PRESETS: dict[str, dict[str, Any]] = {
    "base": dict(n_encoder_layers=6, n_decoder_layers=6, d_model=512, d_ff=2048, n_heads=8,
                 dropout=0.1, attention_dropout=0.1, activation_dropout=0.1),
    "big": dict(n_encoder_layers=6, n_decoder_layers=6, d_model=1024, d_ff=4096, n_heads=16,
                dropout=0.3, attention_dropout=0.3, activation_dropout=0.3),
    "small": dict(n_encoder_layers=3, n_decoder_layers=3, d_model=256, d_ff=1024, n_heads=4),
    # For tests: with 512 pieces every synthetic symbol is one piece after the 256 byte pieces.
    "tiny": dict(n_encoder_layers=2, n_decoder_layers=2, d_model=64, d_ff=128, n_heads=4,
                 vocab_size=512),
}


def build(cls: type, overrides: dict[str, Any], source: str = "overrides") -> Any:
    """Build `cls` from its defaults and `overrides`; an unknown key is an error naming `source`."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown {cls.__name__} option(s): {', '.join(unknown)}")
    return cls(**overrides)


def model_config(preset: str = "base", **overrides: Any) -> ModelConfig:
    """A preset's ModelConfig with `overrides` applied on top."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return build(ModelConfig, {**PRESETS[preset], **overrides}, f"preset {preset}")


def load_config_file(path: str | Path) -> dict[str, dict[str, Any]]:
    """Read a recipe file (.toml or .json) with optional sections `preset`, `model`, `data`, `train`."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot parse: {e}") from e
    sections = {"preset", "model", "data", "train"}
    unknown = sorted(set(raw) - sections)
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(unknown)}; use {sorted(sections)}")
    return raw


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


def _check_choices(config: Any) -> None:
    for f in dataclasses.fields(config):
        choices = f.metadata.get("choices")
        if choices and getattr(config, f.name) not in choices:
            raise ConfigError(
                f"{f.name}={getattr(config, f.name)!r} is not one of {', '.join(choices)}"
            )
