"""Checkpoints: self-describing directories, written atomically.

    step_00001000/
      config.json          model, data and training configs, and the step
      model.safetensors    weights (tied tensors stored once)
      tokenizer.model      the SentencePiece model (Marian conversions: source.spm, target.spm, vocab.json)
      training_state.pt    optimiser state, step, data position, RNG states (absent in averages)

A checkpoint is written into a hidden temporary directory and renamed into place only when
complete, so a crash mid-write never leaves a visible checkpoint that loads wrong. Deterministic
tables (sinusoids, masks) are not saved.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_model, save_model

from aiayn import config as cfg
from aiayn.interop import marian
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer

STEP_DIR = re.compile(r"^step_(\d+)$")


@dataclass
class Checkpoint:
    model: Transformer
    tokenizer: Tokenizer
    data: cfg.DataConfig
    train: cfg.TrainConfig
    state: dict[str, Any] | None  # training state, for resuming

    @property
    def step(self) -> int:
        return self.state["step"] if self.state else 0


def save(path: str | Path, model: Transformer, tokenizer: Tokenizer, data: cfg.DataConfig,
         train: cfg.TrainConfig, state: dict[str, Any] | None = None) -> Path:
    """Write a checkpoint directory at `path`, replacing any older one there, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    meta = {"model": cfg.to_dict(model.config), "data": cfg.to_dict(data), "train": cfg.to_dict(train),
            "step": state["step"] if state else None}
    (tmp / "config.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    save_model(model, str(tmp / "model.safetensors"))
    tokenizer.save(tmp)
    if state is not None:
        torch.save(state, tmp / "training_state.pt")
    _fsync_dir(tmp)
    old = path.parent / f".{path.name}.old-{os.getpid()}"
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    _fsync_dir(path.parent)
    shutil.rmtree(old, ignore_errors=True)
    return path


def load(path: str | Path, device: str | torch.device = "cpu", with_state: bool = True) -> Checkpoint:
    """Read a checkpoint directory written by `save`, or a HuggingFace MarianMTModel directory."""
    path = Path(path)
    meta_path = path / "config.json"
    if not meta_path.exists():
        raise FileNotFoundError(f"{path}: not a checkpoint directory (no config.json)")
    if marian.is_marian_dir(path):  # transformers is needed only here
        model, tokenizer, languages = marian.load_marian(path)
        data = cfg.DataConfig(src_lang=languages.get("source_lang", ""),
                              tgt_lang=languages.get("target_lang", ""))
        return Checkpoint(model.to(device), tokenizer, data, cfg.TrainConfig(), None)
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    model_config = cfg.build(cfg.ModelConfig, meta["model"], str(meta_path))
    model = Transformer(model_config)
    load_model(model, str(path / "model.safetensors"), device=str(device))
    model.to(device)
    state_path = path / "training_state.pt"
    state = (torch.load(state_path, map_location="cpu", weights_only=False)
             if with_state and state_path.exists() else None)
    return Checkpoint(model, Tokenizer.load(path),
                      cfg.build(cfg.DataConfig, meta["data"], str(meta_path)),
                      cfg.build(cfg.TrainConfig, meta["train"], str(meta_path)), state)


def average(paths: list[str | Path], out: str | Path) -> Path:
    """Average the weights of several checkpoints of one run (the paper averages the last 5).

    The result is a checkpoint without training state, with the newest one's configs and tokenizer.
    """
    if not paths:
        raise ValueError("no checkpoints to average")
    newest = load(paths[-1], with_state=False)
    total = {k: v.double() for k, v in newest.model.state_dict().items()}
    for path in paths[:-1]:
        other = load(path, with_state=False)
        if other.model.config != newest.model.config:
            raise ValueError(f"{path} has a different model configuration from {paths[-1]}")
        for k, v in other.model.state_dict().items():
            total[k] += v.double()
    newest.model.load_state_dict({k: (v / len(paths)).float() for k, v in total.items()})
    return save(out, newest.model, newest.tokenizer, newest.data, newest.train)


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The complete step checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def resolve(path: str | Path) -> Path:
    """A checkpoint directory as given, or the newest step checkpoint of a run directory."""
    path = Path(path)
    if (path / "config.json").exists():
        return path
    steps = step_checkpoints(path)
    if not steps:
        raise FileNotFoundError(f"{path}: neither a checkpoint nor a run directory with checkpoints")
    return steps[-1]


def step_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:08d}"


def prune(run_dir: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` step checkpoints."""
    for old in step_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)


def _fsync_dir(path: Path) -> None:
    """Flush a directory's files and the directory entry itself to disk."""
    for child in path.iterdir():
        if child.is_file():
            with open(child, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
