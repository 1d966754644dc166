"""Where a run is: the order of the updates (which batches of which epoch, a pure function of the
seed and the epoch) and every random generator's state, which a checkpoint keeps so that a resumed
run continues exactly.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from aiayn.config import DataConfig, TrainConfig
from aiayn.data.batching import make_batches
from aiayn.data.readers import DataError


@dataclass
class Position:
    """Where the loop is in the data: the epoch, and the next batch of that epoch's order."""

    epoch: int = 0
    batch: int = 0


Lengths = tuple[np.ndarray, np.ndarray]  # (source, target) of each pair


def updates(lengths: Lengths | Callable[[int], Lengths], data: DataConfig, config: TrainConfig,
            start: Position, min_batches: int = 1,
            sample: Callable[[int, int], np.ndarray | None] | None = None
            ) -> Iterator[tuple[Position, list[np.ndarray], int]]:
    """Endless stream of (position after, the pair indices of each batch of one update, the update's
    target tokens), starting at `start`.

    Batches are accumulated until an update holds `update_tokens` target tokens and at least
    `min_batches` batches (one per rank); an update never spans two epochs. `sample(seed, epoch)`:
    the pairs of an epoch (`Mix.sample`; None: each pair once). `lengths`: the pairs' lengths, or
    those of an epoch's (`lengths(epoch)`: the pieces BPE-dropout draws). The stream depends on
    (seed, epoch) alone, so every rank computes the same one and a resumed run continues it.
    """
    lengths_of = lengths if callable(lengths) else lambda epoch: lengths
    if not len(lengths_of(start.epoch)[0]):  # else this loop would spin forever, deaf to Ctrl-C
        raise DataError("no training pairs to make batches of")
    epoch, index = start.epoch, start.batch
    while True:
        src_lens, tgt_lens = lengths_of(epoch)
        subset = sample(config.seed, epoch) if sample else None
        order = make_batches(src_lens, tgt_lens, data.batch_tokens, config.seed, epoch, subset=subset)
        while index < len(order):
            group, tokens = [], 0
            while index < len(order) and (len(group) < min_batches or tokens < config.update_tokens):
                group.append(order[index])
                tokens += int(tgt_lens[order[index]].sum())
                index += 1
            yield Position(epoch, index), group, tokens
        epoch, index = epoch + 1, 0


def rng_state() -> dict[str, Any]:
    """Every random generator's state, as tensors and plain values (a checkpoint reads only those)."""
    numpy_state = np.random.get_state(legacy=False)  # its key: a uint32 array, kept as an int64 tensor
    key = torch.from_numpy(numpy_state["state"]["key"].astype(np.int64))
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {**numpy_state, "state": {"key": key, "pos": numpy_state["state"]["pos"]}}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    numpy_state = state["numpy"]
    if isinstance(numpy_state, dict):  # else numpy's own tuple, in states written before
        key = numpy_state["state"]["key"]
        numpy_state = {**numpy_state, "state": {"key": np.asarray(key, dtype=np.int64).astype(np.uint32),
                                                "pos": numpy_state["state"]["pos"]}}
    np.random.set_state(numpy_state)
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])

