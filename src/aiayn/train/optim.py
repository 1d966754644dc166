"""Adam with the paper's learning-rate schedule (section 5.3).

    lrate = d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

It rises linearly for `warmup_steps` updates, peaks at d_model^-0.5 * warmup_steps^-0.5, then
decays with the inverse square root of the step. `scale` multiplies the whole curve.

A run of a fixed, short budget may instead decay linearly from the peak to 0 at its last update
(`decay="linear"`, `--lr-decay linear`): the rise and the peak are the paper's, the rate reaches 0
where the run ends (budgeted training, Li et al. 2020).
"""

from __future__ import annotations

import torch
from torch import nn

from aiayn.config import TrainConfig


def learning_rate(step: int, d_model: int, warmup_steps: int, scale: float = 1.0, decay: str = "inverse-sqrt",
                  last_step: int = 0) -> float:
    """The rate for update number `step` (counted from 1); with decay "linear", falling from the peak
    to 0 at update `last_step`."""
    step = max(step, 1)
    if decay == "linear" and step > warmup_steps:
        peak = scale * d_model**-0.5 * warmup_steps**-0.5
        return peak * max(last_step - step, 0) / max(last_step - warmup_steps, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Adam:
    """Adam(beta1, beta2, eps) as in the paper; the rate is set before every update."""
    return torch.optim.Adam(model.parameters(), lr=0.0, betas=(config.adam_beta1, config.adam_beta2),
                            eps=config.adam_eps)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr
