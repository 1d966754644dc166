"""An exponential moving average of the weights (Polyak averaging), the alternative to averaging the
last checkpoints:

    average <- d * average + (1 - d) * weights        after every update, d = min(D, (1 + t) / (10 + t))

where t counts the updates averaged so far. The ramp (TensorFlow's `ExponentialMovingAverage` with
`num_updates`) keeps the random initial weights from lingering: with D = 0.999 alone, they would
still weigh 0.999^2600 = 7% after 2,600 updates. The average is kept in float32 beside the model;
`applied` puts it in the model's place for validation or saving, and puts the weights back after.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator

import torch
from torch import nn


class EMA:
    """The moving average of `model`'s parameters, with decay `decay` (D above)."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.decay, self.updates = decay, 0
        self.average = [p.detach().float().clone() for p in model.parameters()]

    def rate(self) -> float:
        """d of the next update."""
        return min(self.decay, (1 + self.updates) / (10 + self.updates))

    @torch.no_grad()
    def update(self, model: nn.Module) -> None:
        """Fold the model's weights after an update into the average."""
        weights = [p.detach().float() for p in model.parameters()]
        torch._foreach_lerp_(self.average, weights, 1.0 - self.rate())  # a += (1 - d) * (w - a)
        self.updates += 1

    @contextlib.contextmanager
    def applied(self, model: nn.Module) -> Iterator[nn.Module]:
        """`model` with the average as its weights, for the `with` block; its own weights after."""
        params = list(model.parameters())
        with torch.no_grad():
            kept = [p.detach().clone() for p in params]
            torch._foreach_copy_(params, self.average)
        try:
            yield model
        finally:
            with torch.no_grad():
                torch._foreach_copy_(params, kept)

    def model(self, model: nn.Module) -> nn.Module:
        """A copy of `model` with the average as its weights."""
        with self.applied(model):
            return copy.deepcopy(model)

    def state(self) -> dict:
        """What a checkpoint's training state keeps of it; the averaged weights are saved apart, as a
        model (`model()`), and come back as "weights": the parameters of that model, in order."""
        return {"decay": self.decay, "updates": self.updates}

    def load(self, state: dict) -> None:
        """Continue from a checkpoint's `state()` with its "weights"."""
        self.average = [w.detach().float().clone() for w in state["weights"]]
        self.updates = state["updates"]
