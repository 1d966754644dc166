"""The Transformer (Figure 1): embeddings + positions, encoder stack, decoder stack, output layer.

    memory = model.encode(src)                         # (B, S, D)
    hidden = model.decode(tgt_in, memory, src)         # (B, T, D)
    logits = model.logits(hidden)                      # (B, T, V)

Incremental decoding passes a cache and one new position per step:

    cache = model.init_cache(memory)
    hidden = model.decode(next_tokens, None, src, cache)   # (B, 1, D), cache extended by one

Shapes: B batch, S source length, T target length, D d_model, H heads, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.config import ModelConfig
from aiayn.model.cache import DecoderCache, KVCache
from aiayn.model.dropout import Dropout
from aiayn.model.embedding import TokenEmbedding
from aiayn.model.layers import DecoderLayer, EncoderLayer
from aiayn.model.masks import causal_mask, padding_mask
from aiayn.model.padding import Padder
from aiayn.model.positional import position_encoding


@dataclass
class AttentionMaps:
    """Attention weights of every layer, as used in the forward pass (one tensor per layer)."""

    encoder: list[Tensor]  # (B, H, S, S) encoder self-attention
    decoder: list[Tensor]  # (B, H, T, T) masked decoder self-attention
    cross: list[Tensor]  # (B, H, T, S) encoder-decoder attention


def final_norm(config: ModelConfig) -> nn.Module:
    """Pre-norm leaves a stack's last residual sum unnormalised; post-norm has normalised it already."""
    if config.norm_position == "pre":
        return nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
    return nn.Identity()


class Encoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_encoder_layers))
        self.final_norm = final_norm(config)

    def forward(self, x: Tensor, mask: Tensor, need_weights: bool = False,
                padder: Padder | None = None) -> tuple[Tensor, list]:
        """(B, S, D) -> (B, S, D); with a `padder`, the layers compute on the real tokens only."""
        if padder is not None:
            x = padder.remove(x)  # (N, D)
        weights = []
        for layer in self.layers:
            x, w = layer(x, mask, need_weights, padder)
            weights.append(w)
        x = self.final_norm(x)
        return (x if padder is None else padder.restore(x)), weights


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_decoder_layers))
        self.final_norm = final_norm(config)

    def forward(self, x: Tensor, self_mask: Tensor | None, memory_kv: list[tuple[Tensor, Tensor]],
                memory_mask: Tensor, cache: DecoderCache | None = None, need_weights: bool = False,
                ) -> tuple[Tensor, list]:
        weights = []
        for i, layer in enumerate(self.layers):
            layer_cache = cache.self_attn[i] if cache is not None else None
            x, w = layer(x, self_mask, memory_kv[i], memory_mask, layer_cache, need_weights)
            weights.append(w)
        return self.final_norm(x), weights


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.src_embed = TokenEmbedding(config.source_vocab_size, config.d_model, config.scale_embedding)
        self.tgt_embed = (self.src_embed if config.share_embeddings
                          else TokenEmbedding(config.vocab_size, config.d_model, config.scale_embedding))
        self.positions = position_encoding(config.positional, config.d_model, config.pe_layout,
                                           config.max_positions)
        self.embed_dropout = Dropout(config.dropout)
        self.encoder = Encoder(config)
        self.decoder = Decoder(config)
        # The pre-softmax linear layer.
        self.output_proj = nn.Linear(config.d_model, config.vocab_size, bias=config.output_bias)
        if config.output_bias:
            nn.init.zeros_(self.output_proj.bias)
        if config.tie_output:
            self.output_proj.weight = self.tgt_embed.weight
        else:
            nn.init.normal_(self.output_proj.weight, mean=0.0, std=config.d_model**-0.5)

    def embed(self, ids: Tensor, embedding: TokenEmbedding, offset: int = 0,
              encodings: Tensor | None = None) -> Tensor:
        """Dropout(Embedding(ids) * sqrt(D) + PE): (B, T) -> (B, T, D), positions from `offset`, or
        the positions' `encodings` (T, D) when the caller already has them."""
        x = embedding(ids)
        if encodings is None:
            encodings = self.positions(ids.size(1), offset, x.dtype, x.device)
        return self.embed_dropout(x + encodings)

    def encode(self, src: Tensor) -> Tensor:
        """(B, S) source ids -> memory (B, S, D)."""
        return self._encode(src)[0]

    def _encode(self, src: Tensor, need_weights: bool = False) -> tuple[Tensor, list]:
        x = self.embed(src, self.src_embed)
        padder = Padder.of(src, self.config.pad_id)  # attention maps keep every position's row
        use = padder.fraction > 0 and not need_weights
        return self.encoder(x, padding_mask(src, self.config.pad_id), need_weights, padder if use else None)

    def decode(self, tgt: Tensor, memory: Tensor | None, src: Tensor,
               cache: DecoderCache | None = None) -> Tensor:
        """(B, T) target ids, memory (B, S, D), (B, S) source ids -> decoder output (B, T, D).

        Without a cache, `tgt` is the whole target prefix and T outputs come back in parallel
        (training, teacher forcing). With one, `tgt` holds only the new positions, the keys and
        values of earlier ones come from the cache (extended in place), and `memory` is not used;
        with R rows per sentence in the cache, `tgt` has B*R rows and `src` B.
        """
        return self._decode(tgt, memory, src, cache)[0]

    def _decode(self, tgt: Tensor, memory: Tensor | None, src: Tensor,
                cache: DecoderCache | None = None, need_weights: bool = False) -> tuple[Tensor, list]:
        offset = cache.length if cache is not None else 0
        n_new = tgt.size(1)
        # One new position may see everything before it: no mask needed.
        self_mask = None if offset and n_new == 1 else causal_mask(n_new, offset + n_new, tgt.device)
        if cache is not None:
            memory_kv = cache.cross_attn
        else:
            memory_kv = [layer.cross_attn.project_kv(memory) for layer in self.decoder.layers]
        x = self.embed(tgt, self.tgt_embed, offset)
        return self.decoder(x, self_mask, memory_kv, padding_mask(src, self.config.pad_id), cache,
                            need_weights)

    def logits(self, hidden: Tensor) -> Tensor:
        """The final linear layer: (B, T, D) -> (B, T, V) unnormalised scores."""
        return self.output_proj(hidden)

    def log_probs(self, hidden: Tensor) -> Tensor:
        """The final linear layer and log-softmax: (B, T, D) -> (B, T, V) log-probabilities."""
        return F.log_softmax(self.logits(hidden).float(), dim=-1)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher-forced logits: (B, S) source, (B, T) target input -> (B, T, V)."""
        return self.logits(self.decode(tgt, self.encode(src), src))

    def init_cache(self, memory: Tensor, capacity: int = 64, rows_per_sentence: int = 1) -> DecoderCache:
        """A cache for incremental decoding of B sentences whose encoder output is `memory` (B, S, D).

        With `rows_per_sentence` R > 1 (beam search), each sentence is decoded in R consecutive rows:
        `decode` then takes (B*R, 1) new tokens and the (B, S) source.
        """
        b, c = memory.size(0), self.config
        self_attn = [KVCache(b * rows_per_sentence, c.n_heads, c.d_k, capacity, memory.dtype, memory.device)
                     for _ in self.decoder.layers]
        cross_attn = [layer.cross_attn.project_kv(memory) for layer in self.decoder.layers]
        return DecoderCache(self_attn, cross_attn, rows_per_sentence)

    def attention_maps(self, src: Tensor, tgt: Tensor, encoder: bool = True) -> tuple[Tensor, AttentionMaps]:
        """Teacher-forced logits (B, T, V) and the attention weights of every layer and head (with
        `encoder` False, the decoder's only: the encoder takes its fast path)."""
        hidden, maps = self._attending(src, tgt, encoder)
        return self.logits(hidden), maps

    def attention_weights(self, src: Tensor, tgt: Tensor, encoder: bool = True) -> AttentionMaps:
        """`attention_maps`' weights alone: no output layer (for a batch of sentences, its largest
        product)."""
        return self._attending(src, tgt, encoder)[1]

    def _attending(self, src: Tensor, tgt: Tensor, encoder: bool) -> tuple[Tensor, AttentionMaps]:
        memory, encoder_weights = self._encode(src, need_weights=encoder)
        hidden, decoder_weights = self._decode(tgt, memory, src, need_weights=True)  # (B, T, D)
        self_weights, cross_weights = (list(w) for w in zip(*decoder_weights, strict=True))
        return hidden, AttentionMaps(encoder_weights, self_weights, cross_weights)


def parameter_counts(model: Transformer) -> dict[str, int]:
    """Parameters per part of the model; shared tensors are counted once, where first listed."""
    seen: set[int] = set()

    def count(module: nn.Module) -> int:
        n = 0
        for p in module.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                n += p.numel()
        return n

    parts = {
        "source embedding": count(model.src_embed),
        "target embedding": count(model.tgt_embed),
        "positions": count(model.positions),
        "encoder": count(model.encoder),
        "decoder": count(model.decoder),
        "output projection": count(model.output_proj),
    }
    parts["total"] = sum(parts.values())
    return parts
