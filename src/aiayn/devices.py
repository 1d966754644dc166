"""Which device a run asks for, checked against what this machine has: one function below both
translation and training, which each resolve `--device` with it."""

from __future__ import annotations

import torch

from aiayn.config import ConfigError, check_device


def resolve_device(name: str = "auto") -> torch.device:
    """The device `name` asks for (auto: CUDA when present, else the CPU), if this machine has it."""
    check_device(name)
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name}: PyTorch {torch.__version__} finds no CUDA GPU here; "
                          "use --device cpu")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"device={name}: this machine has {torch.cuda.device_count()} CUDA GPU(s)")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"device={name}: PyTorch finds no Apple GPU (MPS) here; use --device cpu")
    return device
