"""Dropout (section 5.4): in training, zero each element with probability p and scale the rest by
1 / (1 - p); at inference, the identity. Same contract as torch.nn.Dropout.

On the CPU the cost of dropout is the random numbers, not the arithmetic: torch's kernel draws
one 32-bit number per element, a large share of a small model's training step on a CPU. Here one
64-bit draw decides four elements, 15 random bits each, so p is rounded to a multiple of 1/32,768
(0.1 becomes 0.100006) and the scale uses the rounded value, which keeps
the expected output equal to the input. The output is x times a mask of 0 and 1 / (1 - p) (in
lower precision, a mask of 0 and 1, then the scale), which its backward pass multiplies by again:
faster than masked_fill, for a mask in x's type kept for the backward pass instead of a boolean
one (benchmarks/detail/train_speed.md). Other devices use torch's own kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

LEVELS = 1 << 15  # 15 random bits per element


class Dropout(nn.Module):
    def __init__(self, p: float) -> None:
        super().__init__()
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        self.p = p
        self.threshold = round(p * LEVELS)  # an element is dropped when its bits fall below this
        self.scale = LEVELS / (LEVELS - self.threshold)  # 1 / (1 - rounded p)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, training=True)
        n = x.numel()
        draws = torch.empty((n + 3) // 4, dtype=torch.int64).random_()  # 63 random bits each
        bits = (draws.view(torch.int16)[:n] & (LEVELS - 1)).view(x.shape)  # 15 bits per element
        keep = (bits >= self.threshold).to(x.dtype)  # (x.shape) of 0 and 1
        if x.dtype == torch.float32:
            return x * keep.mul_(self.scale)  # one multiply by 0 or 1 / (1 - p)
        return (x * keep).mul_(self.scale)  # lower precision: 1 / (1 - p) would be rounded in keep

    def extra_repr(self) -> str:
        return f"p={self.p}"
