"""Export to CTranslate2, the fast inference engine, and translate with it.

The export writes CTranslate2's Transformer specification directly from an aiayn model: the same
layers (post- or pre-norm), the same fused [W^Q; W^K; W^V] projection, the model's own sinusoids
as the position table (so either layout exports exactly), or its relative position vectors (Shaw
et al.; CTranslate2 then has no absolute positions), and its SentencePiece pieces as the
vocabulary. CTranslate2 is an optional dependency (`pip install ctranslate2`).
"""

from __future__ import annotations

import json
from pathlib import Path

from aiayn import files
from aiayn.config import DataConfig, DecodeConfig
from aiayn.decoding.constrained import Steer
from aiayn.decoding.translator import Translation
from aiayn.interop import ConversionError, require
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer

ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def _spec(model: Transformer, tokenizer: Tokenizer, max_positions: int, start_given: bool = False):
    """The model as CTranslate2's spec; `start_given`: the decoder's first token is given with every
    batch (a target prefix of one token: a multilingual model's target language), not <s>."""
    specs = require("ctranslate2.specs")
    common_spec, transformer_spec = specs.common_spec, specs.transformer_spec

    c = model.config
    relative = c.relative_positions > 0
    if c.positional != ("none" if relative else "sinusoidal"):
        raise ConversionError(
            "CTranslate2 has no absolute positions beside relative ones: train with --positional none"
            if relative else f"CTranslate2 export supports sinusoidal positions only, not {c.positional}")
    activation = getattr(common_spec.Activation, ACTIVATIONS[c.activation])
    spec = transformer_spec.TransformerSpec.from_config(
        (c.n_encoder_layers, c.n_decoder_layers), c.n_heads, with_relative_position=relative,
        pre_norm=c.norm_position == "pre", activation=activation)
    spec.config.layer_norm_epsilon = c.layer_norm_eps
    pieces = tokenizer.pieces(list(range(tokenizer.vocab_size)))  # the target's
    source_pieces = tokenizer.pieces(list(range(tokenizer.source_vocab_size)), "source")
    spec.config.decoder_start_token = None if start_given else pieces[c.bos_id]
    spec.config.eos_token, spec.config.unk_token = pieces[c.eos_id], pieces[tokenizer.unk_id]
    spec.config.add_source_eos = True  # aiayn ends every source with eos
    weights = _Weights(model)
    positions = model.positions(max_positions).cpu().numpy()  # (max_positions, D), the model's own layout
    for stack, layers, embed in ((spec.encoder, c.n_encoder_layers, "src_embed"),
                                 (spec.decoder, c.n_decoder_layers, "tgt_embed")):
        side = "encoder" if stack is spec.encoder else "decoder"
        embeddings = stack.embeddings[0] if isinstance(stack.embeddings, list) else stack.embeddings
        embeddings.weight = weights.w[f"{embed}.weight"]
        stack.scale_embeddings = c.scale_embedding
        if not relative:
            stack.position_encodings.encodings = positions
        if c.norm_position == "pre":
            weights.norm(stack.layer_norm, f"{side}.final_norm")
        for i in range(layers):
            weights.layer(stack.layer[i], f"{side}.layers.{i}", side == "decoder", relative, c.d_model)
    weights.linear(spec.decoder.projection, "output_proj")
    spec.register_source_vocabulary(source_pieces)
    spec.register_target_vocabulary(pieces)
    return spec



class _Weights:
    """The model's weights as arrays (from any device), put into CTranslate2's spec by name."""

    def __init__(self, model: Transformer) -> None:
        self.w = {k: v.detach().float().cpu().numpy() for k, v in model.state_dict().items()}

    def layer(self, layer, ours: str, decoder: bool, relative: bool, d_model: int) -> None:
        """One encoder or decoder layer, `ours` the model's name for it."""
        self.linear(layer.self_attention.linear[0], f"{ours}.self_attn.in_proj")
        self.linear(layer.self_attention.linear[1], f"{ours}.self_attn.out_proj")
        self.norm(layer.self_attention.layer_norm, f"{ours}.self_attn_res.norm")
        if relative:
            self.relative_vectors(layer.self_attention, f"{ours}.self_attn")
        if decoder:
            self.split_kv(layer.attention.linear, f"{ours}.cross_attn", d_model)
            self.norm(layer.attention.layer_norm, f"{ours}.cross_attn_res.norm")
        self.linear(layer.ffn.linear_0, f"{ours}.feed_forward.w1")
        self.linear(layer.ffn.linear_1, f"{ours}.feed_forward.w2")
        self.norm(layer.ffn.layer_norm, f"{ours}.feed_forward_res.norm")

    def linear(self, target, name: str) -> None:
        target.weight = self.w[f"{name}.weight"]
        if f"{name}.bias" in self.w:
            target.bias = self.w[f"{name}.bias"]

    def norm(self, target, name: str) -> None:
        target.gamma, target.beta = self.w[f"{name}.weight"], self.w[f"{name}.bias"]

    def relative_vectors(self, target, name: str) -> None:  # w^K, and w^V (zeros when the model has none)
        keys = self.w[f"{name}.relative.keys"]
        target.relative_position_keys = keys
        target.relative_position_values = self.w.get(f"{name}.relative.values", keys * 0)

    def split_kv(self, target, name: str, d: int) -> None:  # encoder-decoder attention: q apart, [k; v] fused
        w, b = self.w[f"{name}.in_proj.weight"], self.w[f"{name}.in_proj.bias"]
        target[0].weight, target[0].bias = w[:d], b[:d]
        target[1].weight, target[1].bias = w[d:], b[d:]
        self.linear(target[2], f"{name}.out_proj")

def is_ctranslate2_dir(path: Path) -> bool:
    return (path / "model.bin").exists()


def export(model: Transformer, tokenizer: Tokenizer, out: str | Path, quantization: str | None = None,
           max_positions: int = 1024, languages: tuple[str, str] = ("", ""), force: bool = False,
           max_source_len: int = DataConfig().max_len, pairs: tuple[str, ...] = (),
           language_token: str = "source") -> Path:
    """Write a CTranslate2 model directory, plus the tokenizer, the languages (a multilingual model's
    directions, `pairs`, each asked for by its target's piece: before the source, or with
    `language_token` "target" as the decoder's first token, a one-token target prefix that
    CTranslate2 then starts from and leaves out of its output) and the longest sentence the model
    takes (`max_source_len` source tokens), so it translates text alone.

    It replaces an earlier export at `out`, and anything else there only with `force` (see `files`).
    """
    class _FromSpec(require("ctranslate2.converters.converter").Converter):
        def _load(self):
            return _spec(model, tokenizer, max_positions, bool(pairs) and language_token == "target")

    out = Path(out)
    with files.replacing(out, "CTranslate2 model", is_ctranslate2_dir, force) as tmp:
        _FromSpec().convert(str(tmp), quantization=quantization, force=True)
        tokenizer.save(tmp)
        meta = {"src_lang": languages[0], "tgt_lang": languages[1], "max_source_len": max_source_len,
                **({"pairs": list(pairs), "language_token": language_token} if pairs else {})}
        (tmp / "aiayn.json").write_text(json.dumps(meta) + "\n")
    return out


class CTranslate2Translator:
    """Translates with an exported CTranslate2 directory, as `aiayn.decoding.translator.translate` does.

    CTranslate2 does its own batching and search; its length penalty is the plain |Y|^alpha form.
    """

    def __init__(self, path: str | Path, device: str = "cpu", threads: int = 0,
                 compute_type: str = "default") -> None:
        ctranslate2 = require("ctranslate2")
        self.tokenizer = Tokenizer.load(path)
        meta_file = Path(path) / "aiayn.json"
        meta = json.loads(meta_file.read_text()) if meta_file.exists() else {}
        self.languages = meta.get("src_lang", ""), meta.get("tgt_lang", "")
        self.pairs = tuple(meta.get("pairs", ()))  # a multilingual model's directions
        self.language_token = meta.get("language_token", "source")  # where it is told the target language
        self.max_source_len = meta.get("max_source_len", DataConfig().max_len)
        self.translator = ctranslate2.Translator(str(path), device=device, intra_threads=threads,
                                                 compute_type=compute_type)
        pieces = self.tokenizer.pieces(list(range(self.tokenizer.vocab_size)))
        self.to_id = {piece: i for i, piece in enumerate(pieces)}

    def translate(self, ids: list[list[int]], config: DecodeConfig, steers: list[Steer] | None = None
                  ) -> list[list[Translation]]:
        """The n-best translations of every sentence (its source ids, without eos: `Tokenizer.encode`),
        best first; empty sentences stay empty. `steers`: each sentence's prefix (CTranslate2's
        target_prefix; it has no constrained search)."""
        if steers is not None and any(s.phrases for s in steers):
            raise ConversionError("CTranslate2 has no constrained search (constraints, glossaries): use "
                                  "the PyTorch engine (an aiayn checkpoint, a Marian directory)")
        tokenizer = self.tokenizer
        results = [[Translation("", 0.0, 0.0, [])] for _ in ids]
        todo = [i for i, s in enumerate(ids) if s]
        if not todo:
            return results
        longest = max(len(ids[i]) + 1 for i in todo)
        try:
            sources = [tokenizer.pieces(ids[i], "source") for i in todo]
            prefixes = [tokenizer.pieces(list(steers[i].prefix)) if steers else [] for i in todo]
            outputs = self._translate_batch(config, sources, longest, prefixes)
        except RuntimeError as e:  # its CUDA libraries load at the first translation
            if "libcu" not in str(e):
                raise
            raise ImportError(f"CTranslate2 could not load a CUDA library ({e}): its GPU build needs "
                              "CUDA 12's libraries. --device cpu runs it on the CPU.") from e
        for i, output in zip(todo, outputs, strict=True):
            results[i] = []
            for pieces, score in zip(output.hypotheses, output.scores, strict=True):
                out_ids = [self.to_id[p] for p in pieces]
                results[i].append(Translation(tokenizer.decode(out_ids), score, float("nan"), out_ids))
        return results

    def _translate_batch(self, config: DecodeConfig, sources: list[list[str]], longest: int,
                         prefixes: list[list[str]]) -> list:
        sampling = config.temperature > 0  # as in aiayn: sampling replaces the search
        start = [self.tokenizer.pieces([config.decoder_start])[0]] if config.decoder_start >= 0 else []
        given = start or any(prefixes)  # the start (a multilingual model's target language) is left out
        return self.translator.translate_batch(
            sources, target_prefix=[start + p for p in prefixes] if given else None,
            return_alternatives=config.alternatives > 0,
            beam_size=1 if sampling else config.beam_size,
            num_hypotheses=config.alternatives or config.nbest,
            length_penalty=config.length_penalty, return_scores=True,
            repetition_penalty=config.repetition_penalty, no_repeat_ngram_size=config.no_repeat_ngram_size,
            sampling_topk=config.top_k if sampling else 1,
            sampling_temperature=config.temperature if sampling else 1.0,
            max_decoding_length=config.max_output_len or longest + config.max_output_extra,
            max_batch_size=config.batch_size,
            batch_type="examples" if config.batch_by == "sentences" else "tokens")
