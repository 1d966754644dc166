"""Relative position representations (Shaw, Uszkoreit and Vaswani, 2018), an option of self-attention.

Each self-attention layer learns one vector per clipped distance j - i in -K..K, shared by its
heads, and adds it to the key (and, as an option, the value) that query i reads at position j:

    e_ij = q_i (k_j + a^K_ij)^T / sqrt(d_k)        z_i = sum_j alpha_ij (v_j + a^V_ij)
    a^K_ij = w^K[clip(j - i, -K, K)]              a^V_ij = w^V[clip(j - i, -K, K)]

Distances only, so the same words give the same outputs wherever they sit in the sentence.

Shapes: Tq query positions, Tk key positions, K d_k.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class RelativePositions(nn.Module):
    """w^K (and w^V): (2 * max_distance + 1, d_k) learned vectors of one layer."""

    def __init__(self, max_distance: int, d_k: int, values: bool = True) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.keys = nn.Parameter(torch.empty(2 * max_distance + 1, d_k))  # w^K
        self.values = nn.Parameter(torch.empty(2 * max_distance + 1, d_k)) if values else None  # w^V
        for weight in (self.keys, self.values):
            if weight is not None:
                nn.init.normal_(weight, mean=0.0, std=d_k**-0.5)

    def forward(self, n_queries: int, n_keys: int) -> tuple[Tensor, Tensor | None]:
        """a^K and a^V (or None) for keys at positions 0 .. Tk-1 and queries at the last Tq of them
        (all of them in the encoder and in training; the new ones when decoding with a cache):
        each (Tq, Tk, K)."""
        device = self.keys.device
        queries = torch.arange(n_keys - n_queries, n_keys, device=device)  # (Tq,)
        distance = torch.arange(n_keys, device=device)[None, :] - queries[:, None]  # (Tq, Tk): j - i
        index = distance.clamp(-self.max_distance, self.max_distance) + self.max_distance
        return self.keys[index], None if self.values is None else self.values[index]
