"""Claims about positions: the sinusoids' relative-position property, and learned positions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from aiayn.config import DataConfig, DecodeConfig, TrainConfig, model_config
from aiayn.experiments import ExperimentContext, Finding, markdown_table
from aiayn.model.positional import sinusoids


def relative(ctx: ExperimentContext) -> Finding:
    """Claim 6."""
    d = 64 if ctx.quick else 512
    rows, worst = [], 0.0
    # Positions spread over 0..100,000, so that even the slowest sinusoids (wavelengths up to
    # 2 pi 10000) vary across the sample; half fit M_k, the other half test it.
    positions = torch.randperm(100_000, generator=torch.Generator().manual_seed(6))[:4000]
    fit, test = positions[:2000], positions[2000:]
    for k in (1, 5, 50):
        m = torch.linalg.lstsq(sinusoids(fit, d), sinusoids(fit + k, d), driver="gelsd").solution
        error = (sinusoids(test, d) @ m - sinusoids(test + k, d)).abs().max().item()  # PE(p+k) ~ PE(p) M_k
        worst = max(worst, error)
        rows.append([k, f"{error:.1e}"])
    long = sinusoids(torch.arange(100_000), d)
    finite = bool(torch.isfinite(long).all()) and long.abs().max().item() <= 1.0
    return Finding(
        6, "PE(pos + k) is a linear function of PE(pos) for every offset k, and the encoding is defined "
           "for any length",
        f"For each k, one matrix M_k fitted by least squares so that PE(pos + k) = PE(pos) M_k on 2,000 "
        f"random positions below 100,000 (d_model {d}), then tested on 2,000 others; and the encoding of "
        "100,000 positions.",
        markdown_table(["offset k", "largest error on unseen positions"], rows)
        + f"\n\nEncoding of positions 0-99,999: finite and within [-1, 1]: {finite}.",
        worst < 1e-6 and finite,
        f"One fixed matrix per offset maps every position to the one k later (error {worst:.0e}: it is a "
        "rotation of each sin/cos pair), and nothing limits the length.")


@dataclass
class Trained:
    """Models of one comparison, trained alike, and what they translate."""

    spec: str
    preset: str
    steps: int
    longest: int  # positions training uses (the longest sentence + eos or bos)
    long_tokens: int  # the fewest tokens of the long inputs
    bleu: dict[str, float]  # validation BLEU per variant
    long: dict[str, str]  # per variant: "BLEU x" on the long inputs, or "cannot: why"


def train_variants(ctx: ExperimentContext, variants: dict[str, dict]) -> Trained:
    """Train one model per variant (model config overrides) alike on Multi30k en->de (quick: the
    synthetic reverse task) for `training_steps` updates; score validation BLEU with beam 4, and
    20 inputs longer than any training sentence (four validation sentences joined). Learned
    positions cover the positions training uses, no more."""
    from aiayn.data.batching import tokenize
    from aiayn.data.corpora import load_corpus
    from aiayn.decoding.translator import translate, translate_ids
    from aiayn.evaluate import score
    from aiayn.model import Transformer
    from aiayn.tokenizer import Tokenizer
    from aiayn.train.loop import train

    spec, preset, vocab, steps, warmup, batch_tokens = (
        ("synthetic:reverse", "tiny", 512, 60, 30, 1024) if ctx.quick
        else ("multi30k", "small", 8000, ctx.training_steps, 1000, 4096))
    corpus = load_corpus(spec, "en", "de")
    valid = load_corpus("synthetic:reverse:val" if ctx.quick else "multi30k:val", "en", "de")
    tokenizer = Tokenizer.train(corpus.source + corpus.target, vocab)
    train_data, valid_data = tokenize(corpus, tokenizer, 256), tokenize(valid, tokenizer)
    longest = max(len(s) for s in train_data.source + train_data.target) + 1  # with eos or bos
    long_lines = [" ".join(valid.source[i:i + 4]) for i in range(0, 80, 4)]
    long_refs = [" ".join(valid.target[i:i + 4]) for i in range(0, 80, 4)]
    long_tokens = min(len(s) for s in tokenizer.encode(long_lines)) + 1
    run_dir = ctx.run_dir or ctx.out / "runs"
    result = Trained(spec, preset, steps, longest, long_tokens, {}, {})
    for name, overrides in variants.items():
        torch.manual_seed(1)
        model = Transformer(model_config(preset, vocab_size=tokenizer.vocab_size, max_positions=longest,
                                         dropout=0.3, attention_dropout=0.0, activation_dropout=0.0,
                                         **overrides))
        config = TrainConfig(warmup_steps=warmup, lr_scale=0.5, max_steps=steps, valid_every=0, save_every=0,
                             keep_checkpoints=1, log_every=100)
        train(model, tokenizer, train_data, None, DataConfig(batch_tokens=batch_tokens), config,
              Path(run_dir) / name)
        hypotheses = translate_ids(model, tokenizer, valid_data.source, DecodeConfig(), progress=False)
        result.bleu[name] = score([h[0].text for h in hypotheses], valid.target).bleu
        try:
            long_hyps = translate(model, tokenizer, long_lines, DecodeConfig(), progress=False)
            result.long[name] = f"BLEU {score([h[0].text for h in long_hyps], long_refs).bleu:.1f}"
        except ValueError as e:
            result.long[name] = f"cannot: {str(e).split(';')[0]}"
    return result


def _method(t: Trained, what: str) -> str:
    return (f"{what}, trained alike on {t.spec} en->de for {t.steps:,} updates each (the recipe of "
            "recipes/multi30k-small.toml, cut short); validation sacreBLEU with beam 4. Then 20 inputs of "
            f"at least {t.long_tokens} tokens, four validation sentences joined, scored against the joined "
            "references.")


def learned_vs_sinusoidal(ctx: ExperimentContext) -> Finding:
    """Claim 9: trains two models, so it is a long one (budget: `training_steps` updates each)."""
    t = train_variants(ctx, {"sinusoidal": {}, "learned": {"positional": "learned"}})
    rows = [[name, f"{t.bleu[name]:.2f}", t.long[name]] for name in t.bleu]
    gap = t.bleu["sinusoidal"] - t.bleu["learned"]
    extrapolates = t.long["sinusoidal"].startswith("BLEU") and t.long["learned"].startswith("cannot")
    return Finding(
        9, "Learned positional embeddings perform about the same as sinusoids (Table 3, row E), and "
           "sinusoids translate sentences longer than any seen in training where learned positions cannot",
        _method(t, f"Two `{t.preset}` models, one with sinusoids and one with learned positions for the "
                   f"{t.longest} positions training uses"),
        markdown_table(["positions", "validation BLEU", f"inputs of >= {t.long_tokens} tokens"], rows),
        abs(gap) < 1.0 and extrapolates,
        f"Validation BLEU differs by {gap:+.2f} (sinusoids minus learned). On inputs longer than any "
        f"training sentence the sinusoidal model translates ({t.long['sinusoidal']}); the learned one "
        f"{'cannot: it has no embedding for those positions' if extrapolates else 'also translates'}.")


def relative_vs_sinusoidal(ctx: ExperimentContext) -> Finding:
    """Claim 11 (Shaw, Uszkoreit and Vaswani, 2018): relative positions instead of sinusoids."""
    t = train_variants(ctx, {"sinusoidal": {}, "relative": {"relative_positions": 16, "positional": "none"}})
    rows = [[name, f"{t.bleu[name]:.2f}", t.long[name]] for name in t.bleu]
    gain = t.bleu["relative"] - t.bleu["sinusoidal"]
    both_translate_long = all(t.long[name].startswith("BLEU") for name in t.long)
    return Finding(
        11, "Relative position representations in self-attention do at least as well as the sinusoids "
            "(Shaw et al. 2018: +0.3 BLEU for base on WMT14 en-de), and generalise to longer inputs",
        _method(t, f"Two `{t.preset}` models, one with the paper's sinusoids and one with relative "
                   "positions only (K = 16, keys and values, no absolute positions)"),
        markdown_table(["positions", "validation BLEU", f"inputs of >= {t.long_tokens} tokens"], rows),
        gain > -0.5 and both_translate_long,
        f"Validation BLEU differs by {gain:+.2f} (relative minus sinusoids) at equal updates; on inputs "
        f"longer than any training sentence: sinusoids {t.long['sinusoidal']}, relative "
        f"{t.long['relative']}.")
