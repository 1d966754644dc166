"""Claims about positions: the sinusoids' relative-position property, and learned positions."""

from __future__ import annotations

import torch

from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table
from aiayn.experiments.variants import Trained, long_inputs, method, train_variants
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


def _method(t: Trained, what: str) -> str:
    return method(t, what) + long_inputs(t)


def learned_vs_sinusoidal(ctx: ExperimentContext) -> Finding:
    """Claim 9: trains two models, so it is a long one (budget: `training_steps` updates each)."""
    t = train_variants(ctx, {"sinusoidal": {}, "learned": {"positional": "learned"}})
    rows = [[name, f"{t.bleu[name]:.2f}", t.long[name]] for name in t.bleu]
    gap = t.bleu["sinusoidal"] - t.bleu["learned"]
    extrapolates = t.long["sinusoidal"].startswith("BLEU") and t.long["learned"].startswith("cannot")
    return Finding(
        9, "Learned positional embeddings perform about the same as sinusoids (Table 3, row E), and "
           "sinusoids translate sentences longer than any seen in training where learned positions cannot",
        _method(t, f"Two `{t.setup.preset}` models, one with sinusoids and one with learned positions for "
                   f"the {t.longest} positions training uses"),
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
    both_translate_long = len(t.long_bleu) == len(t.bleu)
    long_gain = t.long_bleu["relative"] - t.long_bleu["sinusoidal"] if both_translate_long else float("nan")
    return Finding(
        11, "Relative position representations in self-attention do at least as well as the sinusoids "
            "(Shaw et al. 2018: +0.3 BLEU for base on WMT14 en-de), and generalise to longer inputs",
        _method(t, f"Two `{t.setup.preset}` models, one with the paper's sinusoids and one with relative "
                   "positions only (K = 16, keys and values, no absolute positions)"),
        markdown_table(["positions", "validation BLEU", f"inputs of >= {t.long_tokens} tokens"], rows),
        gain > -0.5 and long_gain > -0.5,  # both parts of the claim, each within 0.5 BLEU
        f"Validation BLEU differs by {gain:+.2f} (relative minus sinusoids) at equal updates; on inputs "
        f"longer than any training sentence: sinusoids {t.long['sinusoidal']}, relative "
        f"{t.long['relative']}"
        + (f", {long_gain:+.1f} relative minus sinusoids." if both_translate_long else "."))
