"""The decoder's key/value cache for incremental decoding.

Each decoding step feeds one new target position. Masked self-attention needs the keys and
values of every earlier position: they are kept here and grow by one position per step.
Encoder-decoder attention needs keys and values of the encoder output: they are computed once
per source and kept here unchanged. The cache is an explicit object the caller creates
(`Transformer.init_cache`), passes to `Transformer.decode`, and reorders between beam steps;
the model holds no decoding state.

Shapes: B sentences, R rows per sentence (its beams in beam search, else 1), H heads, L positions
decoded so far, S source length, K d_k.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


class KVCache:
    """Self-attention keys and values of one decoder layer.

    A preallocated buffer: a step writes one slice instead of concatenating all earlier positions
    again; the capacity doubles when it runs out. Stored position-major within each row,
    (B, capacity, H, K), so that a step's keys for a row are one contiguous write and a row's
    history one contiguous block to copy; attention reads it as (B, H, L, K) through a transpose.
    """

    def __init__(self, batch: int, heads: int, d_k: int, capacity: int, dtype: torch.dtype,
                 device: torch.device) -> None:
        self.k = torch.empty(batch, capacity, heads, d_k, dtype=dtype, device=device)
        self.v = torch.empty_like(self.k)
        self.length = 0

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add (B, H, t, K) new keys/values; return all of them so far, each (B, H, L + t, K)."""
        end = self.length + k.size(2)
        if end > self.k.size(1):
            grow = max(end, 2 * self.k.size(1)) - self.k.size(1)
            self.k = torch.cat([self.k, self.k.new_empty(self.k.size(0), grow, *self.k.shape[2:])], 1)
            self.v = torch.cat([self.v, self.v.new_empty(self.v.size(0), grow, *self.v.shape[2:])], 1)
        self.k[:, self.length:end] = k.transpose(1, 2)
        self.v[:, self.length:end] = v.transpose(1, 2)
        self.length = end
        return self.filled()

    def filled(self) -> tuple[Tensor, Tensor]:
        """The keys and values so far, each (B, H, L, K) (views of the buffers)."""
        return self.k[:, :self.length].transpose(1, 2), self.v[:, :self.length].transpose(1, 2)

    def select(self, indices: Tensor) -> None:
        """Keep batch rows `indices` (B',), in that order; only the filled positions are copied."""
        self.k = _select_filled(self.k, indices, self.length)
        self.v = _select_filled(self.v, indices, self.length)

    def copy_rows(self, sources: Tensor, targets: Tensor) -> None:
        """Row targets[i] takes over the history of row sources[i], in place; other rows keep theirs."""
        for buffer in (self.k, self.v):
            filled = buffer[:, :self.length]  # (B, L, H, K), a view
            # gathered first, so no aliasing (and faster than filled[targets] = filled[sources])
            filled.index_copy_(0, targets, filled.index_select(0, sources))


def _select_filled(buffer: Tensor, indices: Tensor, n: int) -> Tensor:
    """buffer[indices] for the first n positions; the rest of the capacity stays unset."""
    out = buffer.new_empty(len(indices), *buffer.shape[1:])  # (B', capacity, H, K)
    out[:, :n] = buffer[indices, :n]
    return out


@dataclass
class DecoderCache:
    """Everything one decoder run keeps between steps, per layer.

    Each sentence has R rows (its beams): they share the sentence's encoder-decoder keys and values,
    kept once, not R times; each row has its own self-attention history.
    """

    self_attn: list[KVCache]  # (B*R, H, L, K), grows by one position per step
    cross_attn: list[tuple[Tensor, Tensor]]  # (k, v), each (B, H, S, K), computed once per sentence
    rows_per_sentence: int = 1  # R

    @property
    def length(self) -> int:
        """Target positions decoded so far: the position offset of the next step."""
        return self.self_attn[0].length

    def reorder(self, rows: Tensor) -> None:
        """After a beam step, row i continues the hypothesis in row rows[i] (a row of the same sentence).

        Only the self-attention history follows the beams, and only for the rows that take over
        another row's hypothesis (often half of them or fewer); the sentence's cross-attention keys
        and values stay put.
        """
        moved = (rows != torch.arange(len(rows), device=rows.device)).nonzero().squeeze(1)  # (M,)
        if len(moved):
            for kv in self.self_attn:
                kv.copy_rows(rows[moved], moved)

    def fan_out(self, r: int) -> None:
        """Give each sentence r rows, each a copy of its one row so far (beam search: the K beams,
        after a first step computed once per sentence)."""
        if self.rows_per_sentence != 1:
            raise ValueError(f"fan_out needs one row per sentence, not {self.rows_per_sentence}")
        sentences = self.cross_attn[0][0]  # (B, H, S, K)
        rows = torch.arange(len(sentences), device=sentences.device).repeat_interleave(r)  # (B*r,)
        for kv in self.self_attn:
            kv.select(rows)  # (B*r, H, L, K)
        self.rows_per_sentence = r

    def select(self, sentences: Tensor) -> None:
        """Keep only `sentences` (B',), with all their rows (for example when finished sentences
        leave the batch)."""
        rows = self.rows_of(sentences)
        for kv in self.self_attn:
            kv.select(rows)
        self.select_sentences(sentences)

    def rows_of(self, sentences: Tensor) -> Tensor:
        """The rows of `sentences` (B',), each sentence's R rows in order: (B'*R,)."""
        r = self.rows_per_sentence
        return (sentences[:, None] * r + torch.arange(r, device=sentences.device)).flatten()

    def select_sentences(self, sentences: Tensor) -> None:
        """Keep only the encoder-decoder keys and values of `sentences` (B',)."""
        self.cross_attn = [(k.index_select(0, sentences), v.index_select(0, sentences))
                           for k, v in self.cross_attn]
