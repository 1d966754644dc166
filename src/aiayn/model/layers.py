"""Encoder and decoder layers (section 3.1, Figure 1).

Every sub-layer sits inside a residual connection with layer normalisation:
post-norm (the paper) LayerNorm(x + Dropout(Sublayer(x))), or pre-norm x + Dropout(Sublayer(LayerNorm(x))).

Shapes: B batch, S source length, T target length, D d_model, H heads.
"""

from __future__ import annotations

from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.attention import MultiHeadAttention
from aiayn.model.cache import KVCache
from aiayn.model.dropout import Dropout
from aiayn.model.feed_forward import FeedForward
from aiayn.model.padding import Padder
from aiayn.model.relative import RelativePositions


class Residual(nn.Module):
    """The residual connection and LayerNorm around one sub-layer.

    Used as `y = sublayer(res.input(x)); x = res.output(x, y)`, so that a sub-layer can return
    attention weights alongside its output.
    """

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.dropout = Dropout(config.dropout)  # on the sub-layer output, before the add
        self.pre_norm = config.norm_position == "pre"

    def input(self, x: Tensor) -> Tensor:
        return self.norm(x) if self.pre_norm else x

    def output(self, x: Tensor, sublayer_out: Tensor) -> Tensor:
        y = x + self.dropout(sublayer_out)
        return y if self.pre_norm else self.norm(y)


def _feed_forward(config: ModelConfig) -> FeedForward:
    return FeedForward(config.d_model, config.d_ff, config.activation_dropout, config.activation)


def _self_attention(config: ModelConfig) -> MultiHeadAttention:
    """Self-attention, with this layer's relative positions when the config asks for them."""
    relative = (RelativePositions(config.relative_positions, config.d_k, config.relative_values)
                if config.relative_positions else None)
    return MultiHeadAttention(config.d_model, config.n_heads, config.attention_dropout, relative)


class EncoderLayer(nn.Module):
    """Self-attention, then the position-wise feed-forward network."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attn = _self_attention(config)
        self.feed_forward = _feed_forward(config)
        self.self_attn_res, self.feed_forward_res = Residual(config), Residual(config)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False,
                padder: Padder | None = None) -> tuple[Tensor, Tensor | None]:
        """(B, S, D), padding mask (B, 1, 1, S) -> (B, S, D), weights (B, H, S, S) or None.

        With a `padder`, x and the result are the real tokens only, (N, D) (see padding.py).
        """
        h, weights = self.self_attn(self.self_attn_res.input(x), mask=mask, need_weights=need_weights,
                                    padder=padder)
        x = self.self_attn_res.output(x, h)
        x = self.feed_forward_res.output(x, self.feed_forward(self.feed_forward_res.input(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, then the feed-forward network."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        d, h = config.d_model, config.n_heads
        self.self_attn = _self_attention(config)
        self.cross_attn = MultiHeadAttention(d, h, config.attention_dropout)
        self.feed_forward = _feed_forward(config)
        self.self_attn_res, self.cross_attn_res = Residual(config), Residual(config)
        self.feed_forward_res = Residual(config)

    def forward(self, x: Tensor, self_mask: Tensor | None, memory_kv: tuple[Tensor, Tensor],
                memory_mask: Tensor, cache: KVCache | None = None, need_weights: bool = False,
                ) -> tuple[Tensor, tuple[Tensor | None, Tensor | None]]:
        """One decoder layer over T new target positions.

        x (B, T, D); self_mask (1, 1, T, L+T) causal or None; memory_kv: the cross-attention keys
        and values (B, H, S, K) from `cross_attn.project_kv(memory)`, or (B/R, H, S, K) when R
        consecutive rows of x (one position each) share a source; memory_mask (B or B/R, 1, 1, S);
        cache: this layer's self-attention history of L earlier positions, extended in place.
        -> (B, T, D), (self-attention weights (B, H, T, L+T), cross-attention weights (B, H, T, S)).
        """
        q, k, v = self.self_attn.project_qkv(self.self_attn_res.input(x))
        if cache is not None:
            k, v = cache.append(k, v)  # (B, H, L+T, K)
        h, self_weights = self.self_attn.attend(q, k, v, self_mask, need_weights)
        x = self.self_attn_res.output(x, h)

        q = self.cross_attn.project_q(self.cross_attn_res.input(x))
        h, cross_weights = self.cross_attn.attend(q, *memory_kv, memory_mask, need_weights)
        x = self.cross_attn_res.output(x, h)

        x = self.feed_forward_res.output(x, self.feed_forward(self.feed_forward_res.input(x)))
        return x, (self_weights, cross_weights)
