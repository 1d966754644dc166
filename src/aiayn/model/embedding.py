"""Token embeddings (section 3.4): learned vectors, multiplied by sqrt(d_model).

Initialised N(0, d_model^-0.5), so after the sqrt(d_model) scaling each component has unit
variance. The same weight can serve as the pre-softmax linear layer (weight tying). The scaling
can be turned off for models converted from toolkits that do without it.

Shapes: B batch, T length, D d_model, V vocabulary.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, d_model: int, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))  # (V, D)
        nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)
        self.scale = math.sqrt(d_model) if scale else 1.0

    def forward(self, ids: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, D)."""
        return F.embedding(ids, self.weight) * self.scale
