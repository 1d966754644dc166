"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2.

Shapes: B batch, T length, D d_model, F d_ff.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.model.dropout import Dropout

ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu}


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu") -> None:
        super().__init__()
        self.w1 = nn.Linear(d_model, d_ff)
        self.w2 = nn.Linear(d_ff, d_model)
        self.activation = ACTIVATIONS[activation]
        self.dropout = Dropout(dropout)  # after the activation
        for linear in (self.w1, self.w2):
            nn.init.xavier_uniform_(linear.weight)
            nn.init.zeros_(linear.bias)

    def forward(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, F) -> (B, T, D)."""
        return self.w2(self.dropout(self.activation(self.w1(x))))
