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


def cpu_name(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The CPU's vendor and model name from /proc/cpuinfo (platform's guess where that cannot be read),
    with the units that decide its matmul speed, which a virtual machine's name often hides, and the
    widest kernels PyTorch runs on it: "AMD EPYC (AVX2, AVX-512, AVX512-BF16, VNNI, PyTorch AVX512)"."""
    name, vendor, flags = "", "", set()
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            key, value = key.strip(), value.strip()
            if key == "model name" and not name:
                name = value
            elif key == "vendor_id" and not vendor:
                vendor = VENDORS.get(value, value)
            elif key == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    name = name or platform.processor() or platform.machine()
    if vendor and vendor.lower() not in name.lower():
        name = f"{vendor} {name}"
    units = [unit for flag, unit in UNITS if flag in flags]
    return f"{name} ({', '.join(units + [f'PyTorch {torch.backends.cpu.get_cpu_capability()}'])})"


VENDORS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}
UNITS = [("avx2", "AVX2"), ("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"),
         ("avx512_vnni", "VNNI"), ("amx_tile", "AMX")]  # /proc/cpuinfo's flag -> its name here
