"""The computation of one translation, recorded as the model does it: every encoder layer's queries,
keys, values, scores, softmax, heads, W^O output, residual sums, LayerNorms and feed-forward
network, and the decoder's attention and output distribution at every position.

The model runs as it always does (`Transformer.attention_maps`, teacher-forced on the translation
the search chose: the cached step-by-step decoder computes the same numbers); forward hooks on its
own modules read what each computes, and are removed afterwards. Nothing here computes a layer a
second way, except the scores Q K^T / sqrt(d_k), from the recorded q and k with the model's own
`scaled_scores` (the attention kernel returns only their softmax).

Shapes: S source length, T target length (bos + the translation), D d_model, H heads, K d_k,
F d_ff, V vocabulary.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from aiayn.decoding.tracing import gate
from aiayn.model import Transformer
from aiayn.model.attention import scaled_scores
from aiayn.model.layers import EncoderLayer


@dataclass
class Embedded:
    """A side's input to its first layer: token embeddings (times sqrt(D)) plus positions."""

    embedding: Tensor  # (N, D) each token's embedding row, times sqrt(D) when the model scales it
    position: Tensor  # (N, D) the encoding of each position
    x: Tensor  # (N, D) their sum: the first layer's input


@dataclass
class EncoderLayerTrace:
    """One encoder layer, sub-layer by sub-layer (see `Residual`: post-norm LayerNorm(x + Sublayer(x)),
    pre-norm x + Sublayer(LayerNorm(x)))."""

    input: Tensor  # (S, D) the layer's input x
    q: Tensor  # (S, D) x W^Q, all heads side by side: head h is columns h*K .. (h+1)*K
    k: Tensor  # (S, D) x W^K
    v: Tensor  # (S, D) x W^V
    scores: Tensor  # (H, S, S) q . k / sqrt(K), every query against every key
    weights: Tensor  # (H, S, S) their softmax
    z: Tensor  # (S, D) each head's weighted sum of values, heads concatenated
    attention: Tensor  # (S, D) z W^O: the self-attention sub-layer's output
    norm1: Tensor  # (S, D) the first LayerNorm's output
    fired: Tensor  # (S,) feed-forward units whose activation is above zero, of F
    feed_forward: Tensor  # (S, D) the feed-forward sub-layer's output
    norm2: Tensor  # (S, D) the second LayerNorm's output


@dataclass
class DecoderTrace:
    """The decoder over bos + the translation, every position at once (teacher forcing)."""

    embedded: Embedded  # (T, D) each
    self_weights: list[Tensor]  # per layer (H, T, T): masked self-attention
    cross_weights: list[Tensor]  # per layer (H, T, S): encoder-decoder attention
    probs: Tensor  # (T, V) the next token's distribution after each position


@dataclass
class Trace:
    source: Embedded  # (S, D) each
    encoder: list[EncoderLayerTrace]
    decoder: DecoderTrace


@torch.no_grad()
def record(model: Transformer, src: list[int], tgt: list[int]) -> Trace:
    """The computation of `model` (in eval mode) translating source ids `src` (eos included) into
    `tgt` (bos + the output tokens)."""
    device = next(model.parameters()).device
    src_, tgt_ = torch.tensor([src], device=device), torch.tensor([tgt], device=device)
    with gate.running():  # a server's other thread may be compiling a step
        with _recording(model.encoder.layers) as layers:
            logits, maps = model.attention_maps(src_, tgt_)  # (1, T, V)
        probs = logits[0].float().softmax(dim=-1)
        decoder = DecoderTrace(embedded(model, tgt_, model.tgt_embed), [w[0] for w in maps.decoder],
                               [w[0] for w in maps.cross], probs)
        encoder = [_layer_trace(layer, seen, weights[0])
                   for layer, seen, weights in zip(model.encoder.layers, layers, maps.encoder, strict=True)]
        return Trace(embedded(model, src_, model.src_embed), encoder, decoder)


def embedded(model: Transformer, ids: Tensor, embedding: nn.Module) -> Embedded:
    """What `Transformer.embed` adds up for ids (1, N) (dropout is off in eval mode)."""
    rows = embedding(ids)[0]  # (N, D)
    position = model.positions(ids.size(1), 0, rows.dtype, rows.device)  # (N, D)
    return Embedded(rows, position, rows + position)


@contextlib.contextmanager
def _recording(layers: nn.ModuleList) -> Iterator[list[dict[str, Tensor]]]:
    """While inside, what each encoder layer's modules compute on this thread goes into one dict per
    layer (a server may search with the same model on another thread meanwhile)."""
    seen: list[dict[str, Tensor]] = [{} for _ in layers]
    handles, here = [], threading.get_ident()

    def keep(store: dict, name: str, part: str = "output"):
        def hook(module, inputs, output):
            if threading.get_ident() == here:
                store[name] = (inputs[0] if part == "input" else output)[0].detach().clone()  # batch of one
        return hook

    for store, layer in zip(seen, layers, strict=True):
        layer: EncoderLayer
        handles += [
            layer.register_forward_hook(keep(store, "input", "input")),
            layer.self_attn.in_proj.register_forward_hook(keep(store, "qkv")),  # (S, 3D)
            layer.self_attn.out_proj.register_forward_hook(keep(store, "z", "input")),
            layer.self_attn.out_proj.register_forward_hook(keep(store, "attention")),
            layer.self_attn_res.norm.register_forward_hook(keep(store, "norm1")),
            layer.feed_forward.w1.register_forward_hook(keep(store, "hidden")),  # before the activation
            layer.feed_forward.register_forward_hook(keep(store, "feed_forward")),
            layer.feed_forward_res.norm.register_forward_hook(keep(store, "norm2")),
        ]
    try:
        yield seen
    finally:
        for handle in handles:
            handle.remove()


def _layer_trace(layer: EncoderLayer, seen: dict[str, Tensor], weights: Tensor) -> EncoderLayerTrace:
    attn = layer.self_attn
    q, k, v = seen["qkv"].split(attn.d_model, dim=-1)  # (S, D) each
    heads = lambda x: x.view(x.size(0), attn.n_heads, attn.d_k).transpose(0, 1)  # noqa: E731 (H, S, K)
    relative = None if attn.relative is None else attn.relative(q.size(0), k.size(0))
    scores = scaled_scores(heads(q)[None], heads(k)[None], relative)[0]  # (H, S, S)
    fired = (layer.feed_forward.activation(seen["hidden"]) > 0).sum(dim=-1)  # (S,)
    return EncoderLayerTrace(seen["input"], q, k, v, scores, weights, seen["z"], seen["attention"],
                             seen["norm1"], fired, seen["feed_forward"], seen["norm2"])
