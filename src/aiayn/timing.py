"""Timing for benchmarks and experiments: repeated calls after untimed warm-up calls."""

from __future__ import annotations

import time
from collections.abc import Callable


def timed_calls(fn: Callable[[], object], repeats: int = 5, warmup: int = 2) -> list[float]:
    """Wall seconds of `repeats` calls of fn(), after `warmup` untimed ones. Summarise with the
    median (typical speed) or the minimum (least disturbed by other work on the machine)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times
