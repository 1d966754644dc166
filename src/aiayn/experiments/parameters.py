"""Claims about parameters: weight sharing, and the embedding scale."""

from __future__ import annotations

import torch

from aiayn.config import model_config
from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table
from aiayn.model import Transformer, parameter_counts
from aiayn.model.embedding import TokenEmbedding


def sharing(ctx: ExperimentContext) -> Finding:
    """Claim 4."""
    v, preset = (512, "tiny") if ctx.quick else (8000, "small")
    rows, totals = [], {}
    for share, tie in ((True, True), (False, True), (True, False), (False, False)):
        model = Transformer(model_config(preset, vocab_size=v, share_embeddings=share, tie_output=tie))
        totals[share, tie] = parameter_counts(model)["total"]
        rows.append([share, tie, f"{totals[share, tie]:,}", f"{totals[share, tie] - totals[True, True]:+,}"])
    d = model.config.d_model
    base = totals[True, True]
    exact = (totals[False, True] - base == v * d and totals[True, False] - base == v * d
             and totals[False, False] - base == 2 * v * d)
    return Finding(
        4, "Tying the output projection to the embedding saves V x d parameters; sharing source and target "
           "embeddings saves another V x d",
        f"Parameters of the `{preset}` model (d_model {d}) with a {v:,}-piece vocabulary, with each kind of "
        "sharing on and off.",
        markdown_table(["shared source/target embedding", "tied output projection", "parameters",
                        "more than fully shared"], rows),
        exact,
        f"Each kind of sharing saves exactly V x d = {v:,} x {d} = {v * d:,} parameters; together "
        f"{2 * v * d:,}, {2 * v * d / totals[False, False]:.0%} of the unshared model.")


def embedding_scale(ctx: ExperimentContext) -> Finding:
    """Claim 5."""
    torch.manual_seed(5)
    rows, ok = [], True
    for d in (64, 256) if ctx.quick else (64, 256, 512, 1024):
        embedding = TokenEmbedding(4000, d)
        raw, scaled = embedding.weight.var().item(), embedding(torch.arange(4000)[None]).var().item()
        ok &= abs(raw * d - 1) < 0.05 and abs(scaled - 1) < 0.05
        rows.append([d, f"{1 / d:.5f}", f"{raw:.5f}", f"{scaled:.3f}"])
    return Finding(
        5, "Scaling embeddings by sqrt(d_model) turns an N(0, 1/d_model) initialisation into unit variance",
        "Variance of 4,000 freshly initialised embeddings before and after the sqrt(d_model) scaling.",
        markdown_table(["d_model", "1 / d_model", "variance of the weights",
                        "variance after x sqrt(d_model)"], rows),
        ok,
        "After scaling, embeddings have unit variance at every width, the same scale as the sinusoids "
        "(whose components have variance 1/2) they are added to.")
