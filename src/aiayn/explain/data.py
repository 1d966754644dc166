"""The data of the explain page: one sentence's translation, its computation and its search, as JSON.

Tensors are float32, stored exactly: {"shape": [...], "f32": base64 of the little-endian bytes}, so
the page shows the model's own numbers and a test can compare them with a computation of its own.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import torch
from torch import Tensor

from aiayn.config import ConfigError
from aiayn.decoding.tracing import gate
from aiayn.decoding.translator import repetition
from aiayn.explain.record import Embedded, EncoderLayerTrace, Trace, record
from aiayn.explain.search import search_tree
from aiayn.model import Transformer
from aiayn.translation import Translator

VERSION = 1
TOP_K = 10  # words shown with their probabilities at each output step
PICTURE_POSITIONS = 64  # rows of the positional-encoding picture, at least (more for a longer sentence)


def explain(translator: Translator, sentence: str, top_k: int = TOP_K, **options: Any) -> dict[str, Any]:
    """Everything the explain page shows for `sentence`, translated by `translator`'s PyTorch model
    with its search options (`options`: beam_size, length_penalty, penalty_form, max_output_extra,
    max_output_len; beam size 1 is greedy search). Raises ConfigError for what it cannot explain."""
    model, tokenizer = translator.model, translator.tokenizer
    if model is None:
        raise ConfigError("explain shows the PyTorch model's computation: use an aiayn checkpoint or "
                          "a Marian directory, not a CTranslate2 export")
    config = translator.config(**options)
    if config.temperature > 0:
        raise ConfigError("explain shows a search (beam, or greedy with beam size 1), not sampling: "
                          "leave out --temperature")
    if not sentence.strip():
        raise ConfigError("the sentence is empty: give a sentence to explain")
    ids = tokenizer.encode([sentence])[0]
    most = translator.max_source_len - len(translator.source_prefix)
    if len(ids) > most:
        raise ConfigError(f"the sentence has {len(ids)} tokens; this model takes at most {most} (the longest "
                          "it was trained on, or its positions)")
    c = model.config
    src = [*translator.source_prefix, *ids, c.eos_id]  # a multilingual model's >>xx<< first
    tree = search_tree(model, tokenizer, src, config.beam_size, config.length_penalty, config.penalty_form,
                       config.max_output_extra, config.max_output_len, translator.start, repetition(config))
    tgt = [translator.start] + tree.tokens
    trace = record(model, src, tgt)
    return {
        "version": VERSION,
        "model": _model(translator),
        "languages": {"source": translator.src_lang, "target": translator.tgt_lang},
        "sentence": sentence,
        "translation": tokenizer.decode(tree.tokens),
        "source": {"ids": src, "pieces": tokenizer.pieces(src, "source")},
        "target": {"ids": tgt + [c.eos_id], "pieces": tokenizer.pieces(tgt + [c.eos_id])},
        "options": {"beam_size": config.beam_size, "length_penalty": config.length_penalty,
                    "penalty_form": config.penalty_form},
        "positions": _positions(model, max(PICTURE_POSITIONS, len(src), len(tgt))),
        "input": _embedded(trace.source),
        "encoder": [_encoder_layer(layer) for layer in trace.encoder],
        "decoder": _decoder(trace, tokenizer, tgt[1:] + [c.eos_id], top_k),
        "search": tree.json(),
    }


def f32(t: Tensor) -> dict[str, Any]:
    """A tensor as the page stores it: its shape and its float32 bytes in base64."""
    array = t.detach().to("cpu", torch.float32).contiguous().numpy().astype("<f4")
    return {"shape": list(array.shape), "f32": base64.b64encode(array.tobytes()).decode("ascii")}


def tensor(stored: dict[str, Any]) -> Tensor:
    """The tensor `f32` stored."""
    data = np.frombuffer(base64.b64decode(stored["f32"]), dtype="<f4")
    return torch.from_numpy(data.copy()).view(stored["shape"])


def _model(translator: Translator) -> dict[str, Any]:
    c = translator.model.config
    return {"description": translator.description, "d_model": c.d_model, "n_heads": c.n_heads, "d_k": c.d_k,
            "d_ff": c.d_ff, "n_encoder_layers": c.n_encoder_layers, "n_decoder_layers": c.n_decoder_layers,
            "vocab_size": c.vocab_size, "norm_position": c.norm_position, "positional": c.positional,
            "activation": c.activation, "scale_embedding": c.scale_embedding,
            "share_embeddings": c.share_embeddings, "tie_output": c.tie_output}


def _positions(model: Transformer, n: int) -> dict[str, Any]:
    """The encodings of positions 0 .. n-1, for the picture (learned positions: as many as there are)."""
    if model.config.positional == "learned":
        n = min(n, model.config.max_positions)
    weight = next(model.parameters())
    with gate.running():
        return f32(model.positions(n, 0, torch.float32, weight.device))


def _embedded(e: Embedded) -> dict[str, Any]:
    return {"embedding": f32(e.embedding), "position": f32(e.position), "x": f32(e.x)}


def _encoder_layer(layer: EncoderLayerTrace) -> dict[str, Any]:
    return {"input": f32(layer.input), "q": f32(layer.q), "k": f32(layer.k), "v": f32(layer.v),
            "scores": f32(layer.scores), "weights": f32(layer.weights), "z": f32(layer.z),
            "attention": f32(layer.attention), "norm1": f32(layer.norm1), "fired": layer.fired.tolist(),
            "feed_forward": f32(layer.feed_forward), "norm2": f32(layer.norm2)}


def _decoder(trace: Trace, tokenizer, outputs: list[int], top_k: int) -> dict[str, Any]:
    """The decoder's attention per layer, and after each position the top-k next tokens with their
    probabilities and the probability of the token the translation has there (`outputs`)."""
    d = trace.decoder
    probs, ids = d.probs.topk(top_k, dim=-1)  # (T, k)
    return {
        "input": _embedded(d.embedded),
        "self_weights": [f32(w) for w in d.self_weights],
        "cross_weights": [f32(w) for w in d.cross_weights],
        "top": {"ids": ids.tolist(), "pieces": [tokenizer.pieces(row) for row in ids.tolist()],
                "probs": f32(probs)},
        "chosen": f32(d.probs.gather(1, torch.tensor(outputs, device=d.probs.device)[:, None])[:, 0]),
    }
