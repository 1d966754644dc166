"""Position information (section 3.5): fixed sinusoids, or learned embeddings as an option, or none
(for models that take word order from relative positions in self-attention instead: relative.py).

PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

The sinusoids are computed for the positions asked for, never read from a fixed table, so any
length works, including lengths longer than every training sentence.

Shapes: T positions, D d_model.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn


def sinusoids(positions: Tensor, d_model: int, layout: str = "interleaved") -> Tensor:
    """(T,) positions -> (T, D) encodings.

    layout "interleaved" is the paper's (sin on even dims, cos on odd dims); "concatenated" puts
    all sines first, then all cosines, as tensor2tensor, fairseq and Marian do.
    """
    # Computed in float64 so that large positions keep their precision; cast by the caller.
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64, device=positions.device)  # (D/2,)
    inverse_wavelength = torch.exp(-math.log(10000.0) * two_i / d_model)  # 1 / 10000^(2i/D)
    angles = positions.to(torch.float64)[:, None] * inverse_wavelength[None, :]  # (T, D/2)
    if layout == "interleaved":
        return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)  # (T, D/2, 2) -> (T, D)
    if layout == "concatenated":
        return torch.cat([angles.sin(), angles.cos()], dim=-1)  # (T, D)
    raise ValueError(f"unknown positional-encoding layout {layout!r}")


@functools.lru_cache(maxsize=16)
def _table(n: int, d_model: int, layout: str, dtype: torch.dtype, device: torch.device) -> Tensor:
    """sinusoids(0 .. n-1), memoised: a pure function of its arguments, never modified (read only)."""
    return sinusoids(torch.arange(n, device=device), d_model, layout).to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids; no parameters and nothing saved.

    Tables are memoised by length, rounded up to a power of two, so a decoding step costs a slice
    rather than fresh sines and cosines; a longer sequence gets a longer table.
    """

    def __init__(self, d_model: int, layout: str = "interleaved") -> None:
        super().__init__()
        self.d_model, self.layout = d_model, layout

    def forward(self, length: int, offset: int = 0, dtype: torch.dtype = torch.float32,
                device: torch.device | None = None) -> Tensor:
        """Encodings of positions offset .. offset+length-1 -> (T, D)."""
        n = 1 << max(6, (offset + length - 1).bit_length())  # a power of two >= offset + length
        device = torch.device(device) if device is not None else torch.device("cpu")
        return _table(n, self.d_model, self.layout, dtype, device)[offset:offset + length]


class LearnedPositionalEmbedding(nn.Module):
    """One learned vector per position (the paper's Table 3, row E); limited to `max_positions`."""

    def __init__(self, max_positions: int, d_model: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_positions, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=d_model**-0.5)

    def forward(self, length: int, offset: int = 0, dtype: torch.dtype = torch.float32,
                device: torch.device | None = None) -> Tensor:
        """Embeddings of positions offset .. offset+length-1 -> (T, D)."""
        end = offset + length
        if end > self.weight.size(0):
            raise ValueError(
                f"position {end - 1} is beyond the {self.weight.size(0)} learned positions; "
                "use sinusoidal positions or a larger max_positions for longer sequences"
            )
        return self.weight[offset:end].to(dtype)


class NoPositions(nn.Module):
    """No absolute positions: zeros, for a model whose self-attention has relative positions."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.d_model = d_model

    def forward(self, length: int, offset: int = 0, dtype: torch.dtype = torch.float32,
                device: torch.device | None = None) -> Tensor:
        return torch.zeros(length, self.d_model, dtype=dtype, device=device)


def position_encoding(kind: str, d_model: int, layout: str, max_positions: int) -> nn.Module:
    """The positions a model's config names: sinusoidal, learned or none."""
    if kind == "sinusoidal":
        return SinusoidalPositionalEncoding(d_model, layout)
    if kind == "learned":
        return LearnedPositionalEmbedding(max_positions, d_model)
    return NoPositions(d_model)
