"""Synthetic tasks that need no data: copy or reverse random sequences of symbols.

Sentences are space-separated lowercase letters ("k c q a"); the target is the source
("copy") or the source reversed ("reverse"). Fixed seeds make every split the same each time.
"""

from __future__ import annotations

import random

from aiayn.data.readers import DataError, ParallelCorpus

TASKS = ("copy", "reverse")
SIZES = {"train": 20_000, "val": 500, "test": 500}
SYMBOLS = "abcdefghijklmnopqrstuvwxyz"


def load(task: str, split: str = "train", min_len: int = 3, max_len: int = 10) -> ParallelCorpus:
    if task not in TASKS:
        raise DataError(f"unknown synthetic task {task!r}; choose from {', '.join(TASKS)}")
    if split not in SIZES:
        raise DataError(f"synthetic data has no split {split!r}; choose from {', '.join(SIZES)}")
    rng = random.Random(f"{task}:{split}")
    source, target = [], []
    for _ in range(SIZES[split]):
        symbols = rng.choices(SYMBOLS, k=rng.randint(min_len, max_len))
        source.append(" ".join(symbols))
        target.append(" ".join(symbols if task == "copy" else reversed(symbols)))
    return ParallelCorpus(source, target, f"synthetic:{task}:{split}")
