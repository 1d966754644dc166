"""Checkpoints: self-describing directories, written atomically, read safely.

    step_00001000/
      config.json          model, data and training configs, and the step
      model.safetensors    weights (tied tensors stored once), and a copy of the model config
      tokenizer.model      the SentencePiece model (Marian conversions: source.spm, target.spm, vocab.json)
      training_state.pt    optimiser state, step, data position, RNG states (absent in averages)
      ema.safetensors      the moving average of the weights (--ema-decay), in model.safetensors' form
      decoding.json        search settings chosen on a validation set (`aiayn evaluate --sweep`), which
                           translating with this model uses unless told otherwise (a multilingual
                           model's, per direction, under "directions")

A checkpoint is written whole or not at all (`files.replacing`), never over a directory that is
not a checkpoint, and byte for byte the same for the same model. Nothing in it can run code when
read: the training state is loaded with `weights_only=True` (tensors and plain values only). A
damaged or inconsistent file is a `CheckpointError` naming it. Deterministic tables (sinusoids,
masks) are not saved.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file
from safetensors.torch import save as safetensors_bytes

from aiayn import config as cfg
from aiayn import files
from aiayn.errors import AiaynError
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer, TokenizerError

STEP_DIR = re.compile(r"^step_(\d+)$")
CONFIG_FILE, WEIGHTS_FILE, STATE_FILE = "config.json", "model.safetensors", "training_state.pt"
EMA_FILE = "ema.safetensors"
DECODING_FILE = "decoding.json"
CHOSEN = ("beam_size", "length_penalty", "penalty_form")  # the search settings a sweep may choose
KIND = "aiayn checkpoint"
# What training states written before states held only tensors and plain values need besides:
# numpy's random state as an array. None of these can run code.
_LEGACY_STATE_GLOBALS = [np.ndarray, np.dtype, np.dtypes.UInt32DType,
                         getattr(np, "_core", getattr(np, "core", None)).multiarray._reconstruct]


class CheckpointError(AiaynError):
    """A checkpoint that cannot be read or used; the message names the file."""


@dataclass
class Checkpoint:
    model: Transformer
    tokenizer: Tokenizer
    data: cfg.DataConfig
    train: cfg.TrainConfig
    state: dict[str, Any] | None  # training state, for resuming
    path: Path | None = None  # where it was read from

    @property
    def step(self) -> int:
        return self.state["step"] if self.state else 0


def is_checkpoint(path: Path) -> bool:
    """Whether `path` holds an aiayn checkpoint (complete or damaged, but not some other model)."""
    try:
        meta = json.loads((path / CONFIG_FILE).read_bytes())
    except OSError:
        return False
    except ValueError:  # a damaged config.json beside the weights
        return (path / WEIGHTS_FILE).exists()
    return isinstance(meta, dict) and {"model", "data", "train"} <= set(meta)


def save(path: str | Path, model: Transformer, tokenizer: Tokenizer, data: cfg.DataConfig,
         train: cfg.TrainConfig, state: dict[str, Any] | None = None, force: bool = False,
         ema: Transformer | None = None) -> Path:
    """Write a checkpoint directory at `path`, atomically. An older checkpoint there is replaced;
    anything else is refused (`force`: replaced too, except a training run directory). `ema`: the
    model with the moving average of the weights, written beside them."""
    path = Path(path)
    meta = {"model": cfg.to_dict(model.config), "data": cfg.to_dict(data), "train": cfg.to_dict(train),
            "step": state["step"] if state else None}
    with files.replacing(path, KIND, is_checkpoint, force) as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        (tmp / WEIGHTS_FILE).write_bytes(weights_bytes(model))
        if ema is not None:
            (tmp / EMA_FILE).write_bytes(weights_bytes(ema))
        tokenizer.save(tmp)
        if state is not None:
            buffer = io.BytesIO()
            torch.save(state, buffer)
            (tmp / STATE_FILE).write_bytes(buffer.getvalue())
    return path


def weights_bytes(model: Transformer) -> bytes:
    """The model's weights as a safetensors file: each tied tensor once, under the first of its names
    in sorted order, and the model config in the metadata; the same bytes for the same model."""
    tensors, seen = {}, set()
    for name, tensor in sorted(model.state_dict().items()):
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            tensors[name] = tensor.detach().contiguous().cpu()
    # One metadata key: safetensors writes several in a different order in every process.
    config = json.dumps(cfg.to_dict(model.config), sort_keys=True)
    return safetensors_bytes(tensors, metadata={"aiayn_model_config": config})


def load(path: str | Path, device: str | torch.device = "cpu", with_state: bool = True,
         ema: bool = False) -> Checkpoint:
    """Read a checkpoint directory written by `save` (other formats: `translation.load_model`); `ema`:
    with the moving average of the weights as the model's weights. A training state that goes with
    a moving average gets its weights back as state["ema"]["weights"]."""
    path = Path(path)
    meta_path = path / CONFIG_FILE
    if not meta_path.exists():
        raise CheckpointError(f"{path}: not a checkpoint directory (no {CONFIG_FILE})")
    if ema and not (path / EMA_FILE).exists():
        raise CheckpointError(f"{path}: no moving average of the weights ({EMA_FILE}): it comes from "
                              "training with --ema-decay D")
    meta = _read_meta(meta_path)
    model = Transformer(cfg.build(cfg.ModelConfig, meta["model"], str(meta_path)))
    _load_weights(model, path / (EMA_FILE if ema else WEIGHTS_FILE), meta["model"], device)
    try:
        tokenizer = Tokenizer.load(path)
    except TokenizerError as e:
        raise CheckpointError(str(e)) from None
    _check_tokenizer(model.config, tokenizer, path)
    state = _load_state(path / STATE_FILE) if with_state and (path / STATE_FILE).exists() else None
    if state and state.get("ema") and (path / EMA_FILE).exists():
        averaged = model if ema else Transformer(model.config)
        if not ema:
            _load_weights(averaged, path / EMA_FILE, meta["model"], device)
        state["ema"] = {**state["ema"], "weights": [p.detach() for p in averaged.parameters()]}
    data = meta["data"]
    if data.get("pairs") and "language_token" not in data:  # saved before the choice: always source
        data = {**data, "language_token": "source"}
    return Checkpoint(model, tokenizer, cfg.build(cfg.DataConfig, data, str(meta_path)),
                      cfg.build(cfg.TrainConfig, meta["train"], str(meta_path)), state, path)


def data_of(path: str | Path) -> cfg.DataConfig:
    """The data settings a checkpoint was trained with, read without its weights."""
    meta_path = Path(path) / CONFIG_FILE
    return cfg.build(cfg.DataConfig, _read_meta(meta_path)["data"], str(meta_path))


def _read_meta(meta_path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(meta_path.read_bytes().decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{meta_path}: cannot read ({e})") from None
    missing = [k for k in ("model", "data", "train") if not isinstance(meta, dict) or not isinstance(
        meta.get(k), dict)]
    if missing:
        raise CheckpointError(f"{meta_path}: no {', '.join(missing)} section: not the config of an aiayn "
                              "checkpoint")
    return meta


def _load_weights(model: Transformer, weights_path: Path, config: dict[str, Any],
                  device: str | torch.device) -> None:
    """Load the weights into `model`, checking them against the config they were saved with."""
    try:
        with safe_open(str(weights_path), "pt") as f:
            saved_config = (f.metadata() or {}).get("aiayn_model_config")
        tensors = load_file(str(weights_path), device=str(device))
    except (OSError, SafetensorError) as e:
        raise CheckpointError(f"{weights_path}: cannot read the weights ({e})") from None
    if saved_config is not None:  # checkpoints written before the config was stored have none
        saved = json.loads(saved_config)
        changed = sorted(k for k in saved if saved[k] != config.get(k))
        if changed:
            described = ", ".join(f"{k} is {config.get(k)!r} there but {saved[k]!r} here" for k in changed)
            raise CheckpointError(f"{weights_path.parent / CONFIG_FILE} does not match the model in "
                                  f"{weights_path}: {described}")
    model.to(device)
    try:
        missing, unexpected = model.load_state_dict(tensors, strict=False)
    except RuntimeError as e:  # a shape that differs from the config's
        raise CheckpointError(f"{weights_path}: does not fit the model of its {CONFIG_FILE}: "
                              f"{str(e).splitlines()[-1].strip()}") from None
    ours = model.state_dict()
    loaded = {ours[k].data_ptr() for k in tensors if k in ours}
    missing = [k for k in missing if ours[k].data_ptr() not in loaded]  # and not tied to a loaded one
    if missing or unexpected:
        raise CheckpointError(f"{weights_path}: missing tensors {missing[:3]}, unexpected tensors "
                              f"{unexpected[:3]} for the model of its {CONFIG_FILE}")


def _check_tokenizer(config: cfg.ModelConfig, tokenizer: Tokenizer, path: Path) -> None:
    """The tokenizer's special ids are the model's, and all its ids are within the model's vocabulary."""
    ids = {"pad_id": tokenizer.pad_id, "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id}
    wrong = [f"{k} {getattr(config, k)} there but {v} in the tokenizer" for k, v in ids.items()
             if getattr(config, k) != v]
    if tokenizer.vocab_size > config.vocab_size:
        wrong.append(f"vocab_size {config.vocab_size} there but {tokenizer.vocab_size} pieces in the "
                     "tokenizer")
    if tokenizer.separate != config.separate:
        wrong.append(f"vocabulary {config.vocabulary} there but "
                     f"{'separate' if tokenizer.separate else 'one'} vocabularies in the tokenizer")
    elif tokenizer.source_vocab_size > config.source_vocab_size:
        wrong.append(f"a source vocabulary of {config.source_vocab_size} there but "
                     f"{tokenizer.source_vocab_size} pieces in the tokenizer")
    if wrong:
        raise CheckpointError(f"{path / CONFIG_FILE} does not match the tokenizer in {path}: "
                              f"{', '.join(wrong)}")


def _load_state(state_path: Path) -> dict[str, Any]:
    """The training state: tensors and plain values only, so reading it cannot run code."""
    try:
        with torch.serialization.safe_globals(_LEGACY_STATE_GLOBALS):
            state = torch.load(state_path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [line.strip() for line in str(e).splitlines()]
        refused = next((line for line in lines if "unsupported" in line.lower()), "not plain data")
        raise CheckpointError(f"{state_path}: refused: it holds more than tensors and plain values, and "
                              f"reading it could run code ({refused})") from None
    except (OSError, RuntimeError, EOFError, ValueError) as e:
        raise CheckpointError(f"{state_path}: cannot read the training state ({e})") from None
    if not isinstance(state, dict) or not {"step", "position", "optimizer", "rng"} <= set(state):
        raise CheckpointError(f"{state_path}: not a training state (no step, position, optimizer, rng)")
    return state


def load_latest(run_dir: str | Path, device: str | torch.device = "cpu",
                report: Callable[[str], None] = print) -> Checkpoint:
    """The newest step checkpoint of a run that loads with its training state, for resuming; each
    newer one that does not is reported (`report`) with the reason, and skipped."""
    problems = []
    for path in reversed(step_checkpoints(run_dir)):
        try:
            ck = load(path, device)
            if ck.state is None:
                raise CheckpointError(f"{path / STATE_FILE}: missing, so training cannot resume from it")
            return ck
        except (AiaynError, OSError) as e:
            problems.append(str(e))
            report(f"skipping {path.name}: {e}")
    if not problems:
        raise CheckpointError(f"{run_dir}: no step checkpoints to resume from")
    raise CheckpointError(f"{run_dir}: no checkpoint to resume from: {'; '.join(problems)}")


def average(paths: list[str | Path], out: str | Path, force: bool = False, ema: bool = False) -> Path:
    """Average the weights of several checkpoints of one run (the paper averages the last 5); `ema`:
    their moving averages of the weights (one checkpoint: its moving average alone).

    The result is a checkpoint without training state, with the newest one's configs and tokenizer.
    """
    if not paths:
        raise CheckpointError("no checkpoints to average")
    files.check_out(Path(out), KIND, is_checkpoint, force)  # before minutes of reading
    newest = load(paths[-1], with_state=False, ema=ema)
    total = {k: v.double() for k, v in newest.model.state_dict().items()}
    for path in paths[:-1]:
        other = load(path, with_state=False, ema=ema)
        if other.model.config != newest.model.config:
            raise CheckpointError(f"{path} has a different model configuration from {paths[-1]}")
        if other.tokenizer != newest.tokenizer:
            raise CheckpointError(f"{path} has a different tokenizer from {paths[-1]}: its weights "
                                  "mean different pieces, so they cannot be averaged")
        for k, v in other.model.state_dict().items():
            total[k] += v.double()
    newest.model.load_state_dict({k: (v / len(paths)).float() for k, v in total.items()})
    return save(out, newest.model, newest.tokenizer, newest.data, newest.train, force=force)


def save_decoding(path: str | Path, chosen: dict[str, Any], about: dict[str, Any],
                  direction: str | None = None) -> Path:
    """Keep search settings `chosen` (of `CHOSEN`) in the checkpoint at `path`, with `about` them
    (the set they were chosen on, the scores of each): the model's, or with `direction` (SRC-TGT)
    that direction's of a multilingual model, beside the others kept; written whole or not at all."""
    unknown = sorted(set(chosen) - set(CHOSEN))
    if unknown:
        raise ValueError(f"not search settings a model keeps: {', '.join(unknown)}")
    cfg.build(cfg.DecodeConfig, chosen, "search settings")
    target = Path(path) / DECODING_FILE
    kept = _read_decoding(target) if target.exists() else {}
    entry = {**chosen, "chosen": about}
    if direction:
        kept = {**kept, "directions": {**kept.get("directions", {}), direction: entry}}
    else:
        kept = {**entry, **({"directions": kept["directions"]} if "directions" in kept else {})}
    files.write_atomically(target, (json.dumps(kept, indent=2) + "\n").encode())
    return target


def decoding(path: str | Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The search settings kept in the checkpoint at `path` (`save_decoding`), read once: the model's,
    and a multilingual model's directions (SRC-TGT) that keep their own, each over the model's; none:
    ({}, {})."""
    target = Path(path) / DECODING_FILE
    if not target.exists():
        return {}, {}
    kept = _read_decoding(target)
    model = _settings(kept)
    return model, {pair: {**model, **_settings(entry)} for pair, entry in kept.get("directions", {}).items()}


def _settings(kept: dict[str, Any]) -> dict[str, Any]:
    return {k: kept[k] for k in CHOSEN if k in kept}


def _read_decoding(target: Path) -> dict[str, Any]:
    """decoding.json, every set of settings in it checked."""
    try:
        kept = json.loads(target.read_bytes().decode("utf-8"))
        directions = kept.get("directions", {})
        if not isinstance(directions, dict):
            raise ValueError("directions is not a table of SRC-TGT: settings")
        for name, entry in [("the model", kept), *directions.items()]:
            direction = entry is kept or re.match(r"^[^-\s]+-[^-\s]+$", name)
            if not isinstance(entry, dict) or not direction:
                raise ValueError(f"{name}: not a direction SRC-TGT with a table of settings")
            cfg.build(cfg.DecodeConfig, _settings(entry), f"{name}'s settings")
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise CheckpointError(f"{target}: cannot read the search settings kept there ({e}); delete it "
                              "to use the defaults") from None
    return kept


def step_checkpoints(run_dir: str | Path) -> list[Path]:
    """The step checkpoints of a run, oldest first."""
    root = Path(run_dir) / "checkpoints"
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := STEP_DIR.match(p.name))]
    return [p for _, p in sorted(found)]


def resolve(path: str | Path) -> Path:
    """A checkpoint directory as given, or the newest step checkpoint of a run directory."""
    path = Path(path)
    if (path / CONFIG_FILE).exists():
        return path
    steps = step_checkpoints(path)
    if not steps:
        raise CheckpointError(f"{path}: neither a checkpoint nor a run directory with checkpoints")
    return steps[-1]


def step_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:08d}"


def clean_leftovers(run_dir: str | Path) -> list[Path]:
    """Remove the half-written checkpoints that a killed run left behind (see `files.clean_leftovers`)."""
    return files.clean_leftovers(Path(run_dir) / "checkpoints",
                                 lambda name: bool(STEP_DIR.match(name)) or name == "best")


def prune(run_dir: str | Path, keep: int) -> None:
    """Delete all but the newest `keep` step checkpoints."""
    for old in step_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
