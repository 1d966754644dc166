"""Timing for benchmarks and experiments: repeated calls after untimed warm-up calls, and the CPU
the times were taken on."""

from __future__ import annotations

import platform
import time
from collections.abc import Callable
from pathlib import Path

import torch


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


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (platform's guess where that cannot be read), with
    the units that decide its matmul speed, which a virtual machine's name often hides:
    "Intel(R) Xeon(R) Processor (AVX512, AMX)"."""
    name, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not name:
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line
    except OSError:
        pass
    units = [torch.backends.cpu.get_cpu_capability()]  # the widest vector unit PyTorch uses
    if "amx_tile" in flags.split():
        units.append("AMX")
    return f"{name or platform.processor() or platform.machine()} ({', '.join(units)})"
