"""The model's hyper-parameters, named as in the paper, and the presets: the paper's Table 3 models
and CPU-sized ones, plain dictionaries of overrides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiayn.config.fields import ConfigError, _check_fields, _opt, build


@dataclass(frozen=True)
class ModelConfig:
    """The Transformer's shape (section 3 and Table 3 of the paper)."""

    vocab_size: int = _opt(
        8000, "size V of the joint source/target BPE vocabulary (with vocabulary=separate: the target's)",
        bounds=">= 5")
    vocabulary: str = _opt("joint", "joint: one BPE vocabulary for both languages (the paper); separate: one "
                                    "per language, which needs --no-share-embeddings", ("joint", "separate"))
    src_vocab_size: int = _opt(0, "with vocabulary=separate: size of the source vocabulary (0: vocab_size)",
                               bounds=">= 0")
    d_model: int = _opt(512, "width d_model of embeddings and of every sub-layer output", bounds=">= 1")
    n_heads: int = _opt(8, "attention heads h; each has d_k = d_v = d_model / h", bounds=">= 1")
    d_ff: int = _opt(2048, "inner width d_ff of the position-wise feed-forward network", bounds=">= 1")
    n_encoder_layers: int = _opt(6, "encoder layers N", bounds=">= 1")
    n_decoder_layers: int = _opt(6, "decoder layers N", bounds=">= 1")
    dropout: float = _opt(
        0.1, "P_drop on embeddings + positions and on each sub-layer output before the residual add",
        bounds="[0, 1)")
    attention_dropout: float = _opt(0.1, "dropout on the attention weights", bounds="[0, 1)")
    activation_dropout: float = _opt(0.1, "dropout after the feed-forward activation", bounds="[0, 1)")
    activation: str = _opt("relu", "feed-forward activation", ("relu", "gelu", "silu"))
    norm_position: str = _opt(
        "post",
        "post: LayerNorm(x + Sublayer(x)) as in the paper; pre: x + Sublayer(LayerNorm(x))",
        ("post", "pre"),
    )
    positional: str = _opt(
        "sinusoidal", "absolute position information: fixed sinusoids (paper), learned, or none (then "
        "relative_positions must give the order)", ("sinusoidal", "learned", "none")
    )
    pe_layout: str = _opt(
        "interleaved",
        "sinusoid layout: interleaved (paper: sin on even dims, cos on odd) or concatenated "
        "[sin | cos] (tensor2tensor, fairseq, Marian)",
        ("interleaved", "concatenated"),
    )
    max_positions: int = _opt(1024, "number of learned positions (positional=learned only)", bounds=">= 1")
    relative_positions: int = _opt(
        0, "relative position representations in self-attention (Shaw et al. 2018): learned vectors "
           "for the distances -K..K, per layer, shared by the heads; this is K, 0 for none (the paper)",
        bounds=">= 0")
    relative_values: bool = _opt(
        True, "with relative_positions: add them to the values as well as to the keys (Shaw et al.)")
    share_embeddings: bool = _opt(True, "one embedding matrix for source and target tokens")
    tie_output: bool = _opt(True, "tie the decoder embedding to the pre-softmax linear layer")
    scale_embedding: bool = _opt(
        True, "multiply embeddings by sqrt(d_model) (the paper; HuggingFace Marian models may not)"
    )
    output_bias: bool = _opt(False, "a bias on the output logits (Marian's final_logits_bias)")
    layer_norm_eps: float = _opt(1e-5, "epsilon of every LayerNorm", bounds="> 0")
    # Special ids come from the tokenizer, not from the command line.
    pad_id: int = _opt(0, "id of the padding token", flag=False, bounds=">= 0")
    bos_id: int = _opt(2, "id that starts every target sequence", flag=False, bounds=">= 0")
    eos_id: int = _opt(3, "id that ends every sequence", flag=False, bounds=">= 0")

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.separate and self.share_embeddings:
            raise ConfigError("share_embeddings gives source and target tokens one embedding, which needs "
                              "one vocabulary: with vocabulary=separate pass --no-share-embeddings "
                              "(tie_output still ties the target embedding to the output layer)")
        if self.positional == "none" and not self.relative_positions:
            raise ConfigError("positional=none leaves the model blind to word order: give "
                              "relative_positions > 0, or sinusoidal or learned positions")
        for name in ("pad_id", "bos_id", "eos_id"):
            if getattr(self, name) >= self.vocab_size:
                raise ConfigError(f"{name}={getattr(self, name)} is not below vocab_size={self.vocab_size}")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    @property
    def separate(self) -> bool:
        """Whether source and target have vocabularies of their own."""
        return self.vocabulary == "separate"

    @property
    def source_vocab_size(self) -> int:
        """Rows of the source embedding: vocab_size, or the source's own with separate vocabularies."""
        return (self.src_vocab_size or self.vocab_size) if self.separate else self.vocab_size



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



def model_config(preset: str = "base", **overrides: Any) -> ModelConfig:
    """A preset's ModelConfig with `overrides` applied on top."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return build(ModelConfig, {**PRESETS[preset], **overrides}, f"preset {preset}")

