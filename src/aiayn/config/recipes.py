"""Training recipes: a preset and the tables `model`, `data` and `train` of a TOML or JSON file,
checked whole before any data is read.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiayn.config.fields import ConfigError, build
from aiayn.config.model import PRESETS, ModelConfig
from aiayn.config.training import DataConfig, TrainConfig

SECTIONS = ("preset", "model", "data", "train")


@dataclass(frozen=True)
class Recipe:
    """A checked training recipe: the preset, the model options on top of it, data and training."""

    preset: str
    model: dict[str, Any]  # overrides of the preset; the tokenizer sets vocab_size and the special ids
    data: DataConfig
    train: TrainConfig
    preset_given: bool = True  # False: no preset was named, and `default_preset` chose one


def recipe(sections: dict[str, Any], source: str) -> Recipe:
    """Check a recipe's sections (`preset`, and the tables `model`, `data`, `train`) and build its
    configs, so that any mistake fails here, naming `source`, before data is read."""
    if not isinstance(sections, dict):
        raise ConfigError(f"{source}: a recipe is a table of sections, not {type(sections).__name__}")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(unknown)}; use {', '.join(SECTIONS)}")
    for name in ("model", "data", "train"):
        if not isinstance(sections.get(name, {}), dict):
            raise ConfigError(f"{source}: [{name}] must be a table of options, "
                              f"not {type(sections[name]).__name__}")
    train = build(TrainConfig, sections.get("train", {}), source)
    preset = sections["preset"] if "preset" in sections else default_preset(train.device)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ConfigError(f"{source}: unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    model = sections.get("model", {})
    build(ModelConfig, {**PRESETS[preset], **model}, source)
    return Recipe(preset, model, build(DataConfig, sections.get("data", {}), source), train,
                  "preset" in sections)


def default_preset(device: str) -> str:
    """The preset when none is named: the paper's base model on a GPU, `small` elsewhere (base, with
    tens of millions of parameters, would take a CPU days)."""
    import torch

    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "base" if on_gpu else "small"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a recipe file (.toml or .json) with optional sections `preset`, `model`, `data`, `train`;
    `recipe` checks the values."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot parse: {e}") from None
    recipe(raw, str(path))  # fail on the file's own mistakes before flags are merged in
    return raw

