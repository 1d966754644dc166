"""Attention masks, built from token ids and the pad id.

One convention everywhere: a boolean mask, True = the query may attend to that key, broadcast
against attention scores of shape (B, H, Tq, Tk).

Shapes: B batch, S source length, T target length.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens: (B, S) ids -> (B, 1, 1, S).

    Used for encoder self-attention and for encoder-decoder attention (the keys are source tokens).
    """
    return (ids != pad_id)[:, None, None, :]


def causal_mask(n_queries: int, n_keys: int | None = None, device: torch.device | None = None) -> Tensor:
    """The look-ahead mask of decoder self-attention: position i sees keys 0..i. -> (1, 1, Tq, Tk).

    With a cache holding `n_keys - n_queries` earlier positions, the queries are the last
    `n_queries` positions, so query i sees keys up to `n_keys - n_queries + i`.
    Target padding needs no mask of its own: it sits at the end, after every real position.
    """
    n_keys = n_queries if n_keys is None else n_keys
    ones = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device)
    return ones.tril(diagonal=n_keys - n_queries)[None, None]
