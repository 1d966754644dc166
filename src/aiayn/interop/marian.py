"""Conversion between aiayn models and HuggingFace `MarianMTModel` directories (OPUS-MT).

MarianMTModel is the paper's post-norm Transformer. Where it differs, aiayn has a model option:
positions in the concatenated [sin | cos] layout (`pe_layout`), embeddings not always scaled by
sqrt(d_model) (`scale_embedding`), a bias on the output logits (`output_bias`), swish (= SiLU) or
GELU activations (`activation`), and its own special ids: eos 0, pad last, and the decoder starts
from pad (`pad_id`, `eos_id`, `bos_id`). Weights map one to one, except that Marian keeps W^Q,
W^K and W^V apart where aiayn stacks them into one matrix.

A model with the paper's interleaved sinusoids converts exactly too: the interleaved encoding is
the concatenated one with its dimensions permuted, so permuting the d_model axis of every weight
the same way gives a model whose hidden states are permuted and whose logits are unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import Tensor

from aiayn import files
from aiayn.config import ModelConfig
from aiayn.interop import ConversionError, require
from aiayn.model import Transformer
from aiayn.tokenizer import LANGUAGE_CODE, Tokenizer

ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}  # Marian -> aiayn
MARIAN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}  # aiayn -> Marian


PAIRS = "aiayn_pairs"  # tokenizer_config.json: a multilingual model's directions, as aiayn wrote them

def is_marian_dir(path: str | Path) -> bool:
    try:
        config = json.loads((Path(path) / "config.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and config.get("model_type") == "marian"


def config_from_marian(hf, separate: bool | None = None) -> ModelConfig:
    """The aiayn ModelConfig of a MarianConfig; raises ConversionError for what aiayn cannot represent.
    `separate`: whether the tokenizer has separate source and target vocabularies (None: whether the
    decoder's vocabulary has another size)."""
    decoder_vocab_size = hf.decoder_vocab_size or hf.vocab_size
    if separate is None:
        separate = decoder_vocab_size != hf.vocab_size
    problems = []
    for name in ("attention_heads", "ffn_dim"):
        encoder, decoder = getattr(hf, "encoder_" + name), getattr(hf, "decoder_" + name)
        if encoder != decoder:
            problems.append(f"{name}: encoder {encoder} != decoder {decoder}")
    if separate and hf.share_encoder_decoder_embeddings:
        problems.append("separate vocabularies with one shared embedding")
    if not separate and decoder_vocab_size != hf.vocab_size:
        problems.append(f"one vocabulary of two sizes ({decoder_vocab_size} != {hf.vocab_size})")
    if hf.activation_function not in ACTIVATIONS:
        problems.append(f"activation {hf.activation_function!r}")
    if problems:
        raise ConversionError("cannot convert this Marian model: " + "; ".join(problems))
    vocabulary = {"vocabulary": "separate", "src_vocab_size": hf.vocab_size} if separate else {}
    return ModelConfig(
        vocab_size=decoder_vocab_size, **vocabulary, d_model=hf.d_model, n_heads=hf.encoder_attention_heads,
        d_ff=hf.encoder_ffn_dim, n_encoder_layers=hf.encoder_layers, n_decoder_layers=hf.decoder_layers,
        dropout=hf.dropout,
        attention_dropout=hf.attention_dropout, activation_dropout=hf.activation_dropout,
        activation=ACTIVATIONS[hf.activation_function], pe_layout="concatenated",
        share_embeddings=hf.share_encoder_decoder_embeddings, tie_output=hf.tie_word_embeddings,
        scale_embedding=hf.scale_embedding, output_bias=True, pad_id=hf.pad_token_id,
        bos_id=hf.decoder_start_token_id, eos_id=hf.eos_token_id)


def marian_config(c: ModelConfig, max_positions: int = 1024):
    """The MarianConfig of an aiayn ModelConfig; raises ConversionError for what Marian cannot represent."""
    MarianConfig = require("transformers").MarianConfig  # noqa: N806

    problems = [msg for bad, msg in (
        (c.positional != "sinusoidal", f"{c.positional} positions (only sinusoids)"),
        (c.relative_positions > 0, "relative positions"), (c.norm_position != "post", "pre-norm layers"),
        (c.layer_norm_eps != 1e-5, f"LayerNorm epsilon {c.layer_norm_eps}")) if bad]
    if problems:
        raise ConversionError("Marian has no " + ", ".join(problems))
    return MarianConfig(
        vocab_size=c.source_vocab_size, decoder_vocab_size=c.vocab_size, d_model=c.d_model,
        encoder_layers=c.n_encoder_layers, decoder_layers=c.n_decoder_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads,
        encoder_ffn_dim=c.d_ff, decoder_ffn_dim=c.d_ff, activation_function=MARIAN_ACTIVATIONS[c.activation],
        dropout=c.dropout, attention_dropout=c.attention_dropout, activation_dropout=c.activation_dropout,
        max_position_embeddings=max_positions, scale_embedding=c.scale_embedding,
        pad_token_id=c.pad_id, eos_token_id=c.eos_id, decoder_start_token_id=c.bos_id,
        forced_eos_token_id=c.eos_id, share_encoder_decoder_embeddings=c.share_embeddings,
        tie_word_embeddings=c.tie_output)


def weight_names(c: ModelConfig) -> list[tuple[str, list[str]]]:
    """(aiayn name, Marian names): the aiayn tensor is the Marian tensors stacked along dim 0."""
    pairs: list[tuple[str, list[str]]] = []
    if c.share_embeddings:
        pairs.append(("src_embed.weight", ["model.shared.weight"]))
    else:
        pairs += [("src_embed.weight", ["model.encoder.embed_tokens.weight"]),
                  ("tgt_embed.weight", ["model.decoder.embed_tokens.weight"])]
    if not c.tie_output:
        pairs.append(("output_proj.weight", ["lm_head.weight"]))
    if c.output_bias:
        pairs.append(("output_proj.bias", ["final_logits_bias"]))

    def attention(ours: str, theirs: str) -> None:
        for p in ("weight", "bias"):
            pairs.append((f"{ours}.in_proj.{p}", [f"{theirs}.{x}_proj.{p}" for x in "qkv"]))
            pairs.append((f"{ours}.out_proj.{p}", [f"{theirs}.out_proj.{p}"]))

    def same(*names: tuple[str, str]) -> None:
        pairs.extend((f"{ours}.{p}", [f"{theirs}.{p}"]) for ours, theirs in names for p in ("weight", "bias"))

    for side, n in (("encoder", c.n_encoder_layers), ("decoder", c.n_decoder_layers)):
        for i in range(n):
            ours, theirs = f"{side}.layers.{i}", f"model.{side}.layers.{i}"
            attention(f"{ours}.self_attn", f"{theirs}.self_attn")
            same((f"{ours}.self_attn_res.norm", f"{theirs}.self_attn_layer_norm"),
                 (f"{ours}.feed_forward.w1", f"{theirs}.fc1"), (f"{ours}.feed_forward.w2", f"{theirs}.fc2"),
                 (f"{ours}.feed_forward_res.norm", f"{theirs}.final_layer_norm"))
            if side == "decoder":
                attention(f"{ours}.cross_attn", f"{theirs}.encoder_attn")
                same((f"{ours}.cross_attn_res.norm", f"{theirs}.encoder_attn_layer_norm"))
    return pairs


def from_marian(hf_model, separate: bool | None = None) -> Transformer:
    """An aiayn Transformer with the weights of a MarianMTModel (`separate`: as `config_from_marian`)."""
    config = config_from_marian(hf_model.config, separate)
    theirs = hf_model.state_dict()
    theirs["final_logits_bias"] = theirs["final_logits_bias"][0]  # (1, V) -> (V,)
    ours = {name: torch.cat([theirs[n] for n in names]) for name, names in weight_names(config)}
    model = Transformer(config)
    untied = set(model.state_dict()) - set(ours) - {"tgt_embed.weight", "output_proj.weight"}
    if untied:
        raise ConversionError(f"weights missing from the conversion: {sorted(untied)}")
    model.load_state_dict(ours, strict=False)  # tied tensors arrive through the tensor they share
    return model.eval()


def to_marian(model: Transformer, max_positions: int = 1024):
    """A MarianMTModel computing the same logits as `model`."""
    MarianMTModel = require("transformers").MarianMTModel  # noqa: N806

    c = model.config
    ours = {k: v.detach().clone() for k, v in model.state_dict().items()}
    if c.pe_layout == "interleaved":
        ours = concatenated_layout(ours, c.d_model)
    hf_model = MarianMTModel(marian_config(c, max_positions))
    theirs = {}
    for name, names in weight_names(c):
        for n, part in zip(names, ours[name].chunk(len(names)), strict=True):
            theirs[n] = part.reshape(1, -1) if n == "final_logits_bias" else part
    hf_model.load_state_dict(theirs, strict=False)  # positions are computed; tied tensors are shared
    hf_model.tie_weights()
    return hf_model.eval()


def concatenated_layout(state: dict[str, Tensor], d_model: int) -> dict[str, Tensor]:
    """Permute the d_model axis of every weight so that interleaved sinusoids become [sin | cos]."""
    perm = torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])  # new dim j <- old perm[j]
    out = {}
    for name, w in state.items():
        if name.endswith(("embed.weight", "output_proj.weight", "in_proj.weight", "w1.weight")):
            out[name] = w[:, perm]  # d_model is the input axis
        elif name.endswith(("out_proj.weight", "w2.weight", "out_proj.bias", "w2.bias", "norm.weight",
                            "norm.bias")):
            out[name] = w[perm]  # d_model is the output axis
        else:
            out[name] = w  # in_proj.bias, w1.bias, output_proj.bias: no d_model axis
    return out


def load_marian(path: str | Path) -> tuple[Transformer, Tokenizer, dict]:
    """(model, tokenizer, languages) from a MarianMTModel directory on disk; nothing is downloaded.
    `languages`: source_lang and target_lang as its tokenizer_config.json names them, and for a
    multi-target model (its vocabulary has >>xx<< pieces), "pairs": the directions it translates,
    as aiayn wrote them, or from its source language to each language it has a piece for."""
    MarianMTModel = require("transformers").MarianMTModel  # noqa: N806

    path = Path(path)
    hf_model = MarianMTModel.from_pretrained(path, local_files_only=True, dtype=torch.float32)
    tokenizer = Tokenizer.load(path)
    config_file = path / "tokenizer_config.json"
    tokenizer_config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    languages = {k: v for k in ("source_lang", "target_lang") if (v := tokenizer_config.get(k))}
    source = languages.get("source_lang", "")
    # A multi-target model (OPUS-MT): a source language code, and pieces for two targets or more.
    targets = [t for t in tokenizer.languages() if t != source] if LANGUAGE_CODE.fullmatch(source) else []
    pairs = tokenizer_config.get(PAIRS) or ([f"{source}-{t}" for t in targets] if len(targets) > 1 else [])
    if pairs:
        languages["pairs"] = tuple(pairs)
    return from_marian(hf_model, tokenizer.separate), tokenizer, languages


def save_marian(model: Transformer, tokenizer: Tokenizer, out: str | Path, src_lang: str = "",
                tgt_lang: str = "", max_positions: int = 1024, force: bool = False,
                pairs: tuple[str, ...] = ()) -> Path:
    """Write a MarianMTModel directory (config, weights, source.spm, target.spm, vocab.json).

    It replaces an earlier Marian model at `out`, and anything else there only with `force` (see `files`).
    """
    hf_model = to_marian(model, max_positions)
    with files.replacing(Path(out), "Marian model", is_marian_dir, force) as tmp:
        _write_marian(hf_model, model.config, tokenizer, tmp, src_lang, tgt_lang, max_positions, pairs)
    return Path(out)


def _write_marian(hf_model, c: ModelConfig, tokenizer: Tokenizer, out: Path, src_lang: str, tgt_lang: str,
                  max_positions: int, pairs: tuple[str, ...] = ()) -> None:
    GenerationConfig = require("transformers").GenerationConfig  # noqa: N806

    never = sorted({c.pad_id, c.bos_id})  # aiayn never outputs padding or bos
    hf_model.generation_config = GenerationConfig(
        decoder_start_token_id=c.bos_id, pad_token_id=c.pad_id, eos_token_id=c.eos_id,
        forced_eos_token_id=c.eos_id, bad_words_ids=[[i] for i in never], num_beams=4, max_length=512)
    hf_model.save_pretrained(out)
    if tokenizer.vocab is None:  # Marian's files: source.spm, target.spm, vocab.json (target_vocab.json)
        source, target = tokenizer.source_proto, tokenizer.target_proto or tokenizer.source_proto
        source_vocab = tokenizer.pieces(list(range(tokenizer.source_vocab_size)), "source")
        target_vocab = tokenizer.pieces(list(range(tokenizer.vocab_size))) if tokenizer.separate else None
        tokenizer = Tokenizer(source, target, source_vocab, target_vocab)
    tokenizer.save(out)
    tokenizer_config = {"source_lang": src_lang, "target_lang": tgt_lang,
                        "separate_vocabs": tokenizer.separate, "model_max_length": max_positions,
                        "tokenizer_class": "MarianTokenizer", **({PAIRS: list(pairs)} if pairs else {})}
    text = json.dumps(tokenizer_config, indent=2) + "\n"
    (out / "tokenizer_config.json").write_text(text, encoding="utf-8")
