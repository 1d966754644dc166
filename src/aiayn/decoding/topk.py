"""The k best of each sentence's candidates in two cheap stages, for beam search (beam.py) and its
constrained form (constrained.py).

Shapes: B sentences, R rows (hypotheses) of each, N values a row (the vocabulary).
"""

from __future__ import annotations

import torch
from torch import Tensor


def top_k(x: Tensor, k: int, chunk: int = 100) -> tuple[Tensor, Tensor]:
    """The k largest values among the R rows of each sentence, x (B, R, N), and their positions in
    x[b].flatten() (r * N + n), best first, as x.flatten(1).topk(k, 1) gives them (equal values may
    come in another order), in two cheap stages for long rows.

    The k largest values lie in the k chunks (`chunk` values of one row) with the largest maxima, plus
    the rows' tails that fill no whole chunk: each of those k chunks holds a value >= the k-th
    largest chunk maximum, and no other chunk does better. So topk runs over k chunks, not all the
    rows (for beam 4 and 8,000 tokens: 800 values instead of 32,000). Chunks lie within a row, so
    that each value's token is its place in the row (a compiled step computes the maxima in the pass
    that adds the scores, reading `candidates`' eos row in order, not gathered value by value).
    """
    (b, r, n), device = x.shape, x.device
    whole = n - n % chunk
    if r * whole < 4 * k * chunk:  # too short to gain
        return x.flatten(1).topk(k, dim=1)
    per_row = whole // chunk
    chunks = x[:, :, :whole].unflatten(2, (per_row, chunk))  # (B, R, N/chunk, chunk)
    best = chunks.amax(dim=3).flatten(1).topk(k, dim=1).indices  # (B, k) chunks, numbered row by row
    rows, columns = best // per_row, best % per_row  # (B, k) each
    starts = rows * n + columns * chunk  # (B, k): position of each chunk's first value
    tails = (torch.arange(r, device=device)[:, None] * n + torch.arange(whole, n, device=device)).flatten()
    candidates = torch.cat([chunks[torch.arange(b, device=device)[:, None], rows, columns].flatten(1),
                            x[:, :, whole:].flatten(1)], dim=1)  # (B, k*chunk + R*(N-whole))
    positions = torch.cat([(starts[:, :, None] + torch.arange(chunk, device=device)).flatten(1),
                           tails.expand(b, -1)], dim=1)
    values, where = candidates.topk(k, dim=1)  # (B, k)
    return values, positions.gather(1, where)
