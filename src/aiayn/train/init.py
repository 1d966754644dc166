"""Starting a run from a model (`aiayn train --init-from MODEL`): fine-tuning, transfer.

The new run takes its parent's architecture, vocabulary (tokenizer) and weights: anything
`load_model` reads that holds weights (an aiayn run or checkpoint, an averaged checkpoint, a Marian
directory as HuggingFace saves it). What training does is the run's own: learning rate, warm-up,
dropout, label smoothing, batches, data, languages. The optimiser, the learning-rate schedule and
the update counter start afresh, as OpenNMT-py's `-reset_optim all`, Marian's `--pretrained-model`
and fairseq's `--finetune-from-model` do. The run records its parent (path, and the sha256 of its
weights' files) in TrainConfig, so its checkpoints and `aiayn info` say where it came from. The
parent on disk is only read.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.config import ConfigError, ModelConfig
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer

# ModelConfig fields a run may set for itself: how it trains, not what the model is.
TRAINING_CHOICES = frozenset({"dropout", "attention_dropout", "activation_dropout"})
# The learning-rate schedule of a run started from a model, unless it sets either value: the
# paper's shape (linear warm-up, then inverse square-root decay) with a short warm-up to a peak of
# lr_scale * d_model^-0.5 * warmup^-0.5 (1e-3 for d_model 256, 7e-4 for 512, the paper's base peak,
# reached after 100 updates instead of 4,000). Chosen by validation loss among lr_scale 0.016, 0.048,
# 0.16 and 0.5 on a 300-update transfer (benchmarks/detail/transfer.md, docs/training.md).
FINE_TUNING = {"warmup_steps": 100, "lr_scale": 0.16}
WEIGHTS = (".safetensors", ".bin")  # the files of a model's weights (aiayn's, HuggingFace's)


@dataclass
class Parent:
    """The model a run starts from."""

    model: Transformer
    tokenizer: Tokenizer
    path: Path  # the checkpoint directory (a run's newest checkpoint), or the Marian directory
    sha256: str  # of its weights' files (`weights_sha256`)
    language_token: str = ""  # a multilingual parent's: where it is told the target language


def load_parent(path: str | Path) -> Parent:
    """The model at `path`, as `translation.load_model` reads it, on the CPU."""
    from aiayn.translation import load_model

    loaded = load_model(path)
    told = loaded.data.language_token if loaded.data.pairs else ""
    return Parent(loaded.model, loaded.tokenizer, loaded.path, weights_sha256(loaded.path), told)


def weights_sha256(directory: Path) -> str:
    """The sha256 of a model directory's weights files (.safetensors, .bin), read in name order."""
    digest = hashlib.sha256()
    files = sorted(p for p in Path(directory).iterdir() if p.suffix in WEIGHTS and p.is_file())
    if not files:
        raise ConfigError(f"{directory}: no weights file ({', '.join(WEIGHTS)}) to start from")
    for path in files:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def check_options(parent: Parent, model_options: dict[str, Any], tokenizer: str, given_by: str) -> None:
    """A run that starts from `parent` takes its architecture and vocabulary: an option that asks
    for another (`model_options`, a `tokenizer` path) is an error naming both values."""
    config = parent.model.config
    for name, value in sorted(model_options.items()):
        if name not in TRAINING_CHOICES and getattr(config, name) != value:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{given_by}: {flag} {value} contradicts the model it starts from "
                              f"({parent.path}: {getattr(config, name)}); a run started from a model takes "
                              "its architecture")
    if tokenizer and Tokenizer.load(tokenizer) != parent.tokenizer:
        raise ConfigError(f"{given_by}: --tokenizer {tokenizer} is not the vocabulary of the model it "
                          f"starts from ({parent.path}); a run started from a model takes its tokenizer")


def child(parent: Parent, model_options: dict[str, Any]) -> Transformer:
    """The new run's model: the parent's architecture and weights, with the run's own dropout."""
    choices = {k: v for k, v in model_options.items() if k in TRAINING_CHOICES}
    config: ModelConfig = dataclasses.replace(parent.model.config, **choices)
    model = Transformer(config)
    model.load_state_dict(parent.model.state_dict())
    return model
