"""Greedy decoding over a whole batch, one cached decoder step per output token.

Shapes: B sentences, S source length, L output length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.model import Transformer


def max_output_lengths(src: Tensor, pad_id: int, extra: int = 50, fixed: int | None = None) -> Tensor:
    """The paper's limit: source length + `extra` tokens per sentence (or `fixed` for all). -> (B,)"""
    if fixed is not None:
        return torch.full((src.size(0),), fixed, dtype=torch.long, device=src.device)
    return (src != pad_id).sum(dim=1) + extra


@torch.no_grad()
def greedy_search(model: Transformer, src: Tensor, max_lengths: Tensor | None = None) -> list[list[int]]:
    """Most probable next token at each step, for (B, S) source ids -> B token lists (no bos/eos).

    A sentence stops at eos or at its maximum length; the loop stops when all have stopped.
    """
    c = model.config
    max_lengths = max_output_lengths(src, c.pad_id) if max_lengths is None else max_lengths
    memory = model.encode(src)  # (B, S, D)
    cache = model.init_cache(memory, capacity=min(int(max_lengths.max()) + 1, 256))
    b = src.size(0)
    tokens = torch.full((b, 1), c.bos_id, dtype=torch.long, device=src.device)  # last token per row
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    outputs = []
    for step in range(int(max_lengths.max())):
        log_probs = model.log_probs(model.decode(tokens, None, src, cache))[:, -1]  # (B, V)
        tokens = log_probs.argmax(dim=-1, keepdim=True)  # (B, 1)
        tokens[done] = c.pad_id
        outputs.append(tokens)
        done |= (tokens[:, 0] == c.eos_id) | (step + 1 >= max_lengths)
        if done.all():
            break
    rows = torch.cat(outputs, dim=1).tolist() if outputs else [[] for _ in range(b)]  # (B, L)
    return [_strip(row, c.eos_id, c.pad_id) for row in rows]


def _strip(row: list[int], eos_id: int, pad_id: int) -> list[int]:
    """Tokens before the first eos (or all), without padding."""
    if eos_id in row:
        row = row[: row.index(eos_id)]
    return [t for t in row if t != pad_id]
