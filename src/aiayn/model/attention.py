"""Scaled dot-product attention (section 3.2.1) and multi-head attention (section 3.2.2).

Shapes: B batch, H heads, Tq query length, Tk key length, D d_model, K d_k = d_v = D / H.
Masks are boolean, True = may attend, broadcastable to (B, H, Tq, Tk) (see masks.py).
Relative position terms (relative.py), when a model has them, are (a^K, a^V or None), each
(Tq, Tk, K), for self-attention whose queries are the last Tq of the Tk key positions.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from aiayn.model.padding import Padder
from aiayn.model.relative import RelativePositions

# On a GPU, for keys shorter than this, PyTorch's memory-efficient kernel beats the cuDNN and flash
# kernels it would pick, which work in blocks of 128 queries (measured in training: see
# benchmarks/detail/decode_speed.md). Longer keys keep PyTorch's choice.
SHORT_KEYS = 128


Relative = tuple[Tensor, Tensor | None]  # a^K, a^V: (Tq, Tk, K) each


def scaled_scores(q: Tensor, k: Tensor, relative: Relative | None = None) -> Tensor:
    """Q K^T / sqrt(d_k): how well each query matches each key, before the softmax. (B, H, Tq, Tk)"""
    if relative is None:
        return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    rel_k = torch.einsum("bhqd,qkd->bhqk", q, relative[0])  # q_i . a^K_ij: (B, H, Tq, Tk)
    return (q @ k.transpose(-2, -1) + rel_k) / math.sqrt(q.size(-1))


def attention_reference(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
                        dropout_p: float = 0.0, relative: Relative | None = None) -> tuple[Tensor, Tensor]:
    """softmax(Q K^T / sqrt(d_k)) V, written out. Returns (output (B, H, Tq, K), weights (B, H, Tq, Tk)).

    The weights are those the output was computed with, before dropout; masked keys get exactly 0.
    With `relative` (a^K, a^V), query i reads key j as k_j + a^K_ij and value j as v_j + a^V_ij.
    """
    scores = scaled_scores(q, k, relative)  # (B, H, Tq, Tk)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    dropped = F.dropout(weights, dropout_p)
    out = dropped @ v  # (B, H, Tq, K)
    if relative is not None and relative[1] is not None:
        out = out + torch.einsum("bhqk,qkd->bhqd", dropped, relative[1])  # sum_j alpha_ij a^V_ij
    return out, weights


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0,
              need_weights: bool = False, relative: Relative | None = None) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention; the one place that chooses the kernel.

    Without `need_weights` it runs PyTorch's fused `scaled_dot_product_attention` (same maths,
    no (Tq, Tk) weights kept); with it, or with relative position terms (which the fused kernel
    does not take), the readable reference above, which returns them.
    On the CPU the fused kernel's backward pass is several times slower in bfloat16 than in
    float32, so training in bfloat16 there (autocast) attends in float32. On a GPU, short keys get
    the memory-efficient kernel (`SHORT_KEYS`). (The compiled decoder step on the CPU asks for the
    weights, to get the written-out maths: decoding/compiled.py.)
    """
    if need_weights or relative is not None:
        return attention_reference(q, k, v, mask, dropout_p, relative)
    if q.device.type == "cpu" and q.dtype != torch.float32 and torch.is_grad_enabled():
        with torch.autocast("cpu", enabled=False):  # autocast would cast back to bfloat16
            out = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                                 dropout_p=dropout_p)
        return out.to(q.dtype), None
    if q.is_cuda and k.size(-2) < SHORT_KEYS:
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None


class QKVProjection(nn.Linear):
    """W^Q, W^K and W^V of all heads as one (3D, D) linear map, rows [W^Q; W^K; W^V].

    Self-attention projects queries, keys and values in one matmul (`forward`); encoder-decoder
    attention projects queries (`q`) and keys/values (`kv`) from different inputs.
    """

    def __init__(self, d_model: int) -> None:
        super().__init__(d_model, 3 * d_model)
        self.d_model = d_model

    def q(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, D) queries."""
        return F.linear(x, self.weight[: self.d_model], self.bias[: self.d_model])

    def kv(self, x: Tensor) -> Tensor:
        """(B, T, D) -> (B, T, 2D) keys and values."""
        return F.linear(x, self.weight[self.d_model:], self.bias[self.d_model:])


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i = Attention(Q W^Q_i, K W^K_i, V W^V_i).

    One module for self-attention (queries, keys and values from x) and encoder-decoder
    attention (queries from the decoder, keys and values from the encoder output `memory`).
    W^Q, W^K and W^V of all heads are stored as one (3D, D) matrix, rows [W^Q; W^K; W^V], so
    self-attention projects with one matmul; W^O is `out_proj`. Parameters: 4 D^2 + 4 D,
    whatever the number of heads; with `relative` positions (self-attention only) also their
    (2 max_distance + 1) K for the keys, and as many for the values.
    """

    def __init__(self, d_model: int, n_heads: int, dropout: float = 0.0,
                 relative: RelativePositions | None = None) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.dropout = dropout
        self.relative = relative  # this layer's w^K (and w^V), or None
        self.in_proj = QKVProjection(d_model)  # [W^Q; W^K; W^V]
        self.out_proj = nn.Linear(d_model, d_model)  # W^O
        nn.init.xavier_uniform_(self.in_proj.weight)
        nn.init.zeros_(self.in_proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    def _heads(self, x: Tensor, n: int) -> Tensor:
        """(B, T, n*D) -> (n, B, H, T, K): split the projections, then the heads."""
        b, t, _ = x.shape
        return x.view(b, t, n, self.n_heads, self.d_k).permute(2, 0, 3, 1, 4)

    def project_qkv(self, x: Tensor, padder: Padder | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Self-attention: (B, T, D) -> q, k, v, each (B, H, T, K).

        With a `padder`, x holds only the real tokens (N, D); they are projected, then placed on
        the (B, T) grid, with zeros at the padding (which the mask hides)."""
        qkv = self.in_proj(x)  # (B, T, 3D), or (N, 3D)
        if padder is not None:
            qkv = padder.restore(qkv)
        q, k, v = self._heads(qkv, 3)
        return q, k, v

    def project_q(self, x: Tensor) -> Tensor:
        """Queries only: (B, T, D) -> (B, H, T, K)."""
        return self._heads(self.in_proj.q(x), 1)[0]

    def project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of encoder-decoder attention: (B, S, D) -> k, v, each (B, H, S, K)."""
        k, v = self._heads(self.in_proj.kv(memory), 2)
        return k, v

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None,
               need_weights: bool = False, padder: Padder | None = None) -> tuple[Tensor, Tensor | None]:
        """Attention per head, heads concatenated, then W^O.

        -> (B, Tq, D), and the weights (B, H, Tq, Tk) when `need_weights`, else None. With a
        `padder`, W^O maps only the real tokens' rows: -> (N, D).

        q may have R times as many rows as k and v, one position each: then R consecutive query
        rows share one row of keys and values (the beams of one sentence attending to its source)
        and are computed as R queries of that row, so those keys and values are read once, not R
        times. -> (B*R, 1, D), weights (B*R, H, 1, Tk).
        """
        rows = q.size(0)
        if rows != k.size(0):
            q = q.reshape(k.size(0), -1, self.n_heads, self.d_k).transpose(1, 2)  # (B, H, R, K)
        dropout_p = self.dropout if self.training else 0.0
        # Self-attention's queries are the last Tq of its Tk positions (a cache holds the others).
        relative = None if self.relative is None else self.relative(q.size(-2), k.size(-2))
        heads, weights = attention(q, k, v, mask, dropout_p, need_weights, relative)  # (B, H, Tq, K)
        b, h, t, _ = heads.shape
        concat = heads.transpose(1, 2).reshape(b, t, self.d_model)  # (B, Tq, H*K)
        if padder is not None:
            concat = padder.remove(concat)  # (N, H*K)
        out = self.out_proj(concat)
        if rows != b:  # back to one row per query
            out = out.view(rows, 1, self.d_model)
            weights = None if weights is None else weights.transpose(1, 2).reshape(rows, h, 1, -1)
        return out, weights

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None,
                need_weights: bool = False, padder: Padder | None = None) -> tuple[Tensor, Tensor | None]:
        """Self-attention over x when `memory` is None, else x attends to memory. -> (B, Tq, D), weights.

        Self-attention with a `padder` takes and returns the real tokens only: (N, D) -> (N, D).
        """
        if memory is None:
            q, k, v = self.project_qkv(x, padder)
        else:
            q, (k, v) = self.project_q(x), self.project_kv(memory)
        return self.attend(q, k, v, mask, need_weights, padder)
