"""Dropout (section 5.4): in training, zero each element with probability p and scale the rest by
1 / (1 - p); at inference, the identity. Same contract as torch.nn.Dropout.

On the CPU the cost of dropout is the random numbers, not the arithmetic: torch's kernel draws
one 32-bit number per element (about 6 ns each on a 2-core machine, a fifth of a small model's
training step). Here one 64-bit draw decides four elements, 15 random bits each, so p is rounded to
a multiple of 1/32,768 (0.1 becomes 0.100006) and the scale uses the rounded value, which keeps
the expected output equal to the input. In float32 the output is x times a mask of 0 and
1 / (1 - p), which its backward pass multiplies by again: about 2x faster than masked_fill, for
3 more bytes per element kept for the backward pass. Other devices use torch's own kernel.
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
        keep = bits >= self.threshold
        if x.dtype == torch.float32:
            return x * keep.to(x.dtype).mul_(self.scale)  # (x.shape) of 0 and 1 / (1 - p)
        return (x * self.scale).masked_fill_(~keep, 0.0)  # in lower precision the scale is not rounded

    def extra_repr(self) -> str:
        return f"p={self.p}"
