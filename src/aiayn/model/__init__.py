"""The Transformer of "Attention Is All You Need", one idea per module."""

from aiayn.model.cache import DecoderCache, KVCache
from aiayn.model.transformer import AttentionMaps, Transformer, parameter_counts

__all__ = ["AttentionMaps", "DecoderCache", "KVCache", "Transformer", "parameter_counts"]
