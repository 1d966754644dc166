"""A claim about vocabularies: one joint BPE vocabulary for English and German against two."""

from __future__ import annotations

from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table
from aiayn.experiments.variants import method, train_variants


def joint_vs_separate(ctx: ExperimentContext) -> Finding:
    """Claim 12: trains two models (budget: `training_steps` updates each), validating as they go."""
    every = 20 if ctx.quick else 100
    t = train_variants(ctx, {"joint": {},
                             "separate": {"vocabulary": "separate", "share_embeddings": False}}, every)
    # The fixed loss: the worse model's final one, which both reach; each model's first update there.
    target = max(curve[-1][1] for curve in t.curves.values())
    reached = {name: next(step for step, loss in curve if loss <= target) for name, curve in t.curves.items()}
    rows = [[name, f"{t.parameters[name]:,}", f"{t.bleu[name]:.2f}", f"{t.curves[name][-1][1]:.3f}",
             f"{reached[name]:,}"] for name in t.bleu]
    saved = t.parameters["separate"] - t.parameters["joint"]
    gap = t.bleu["joint"] - t.bleu["separate"]
    return Finding(
        12, "For related languages (English and German), one joint BPE vocabulary with one embedding for "
            "both sides, as the paper has, saves parameters at no cost in quality against one vocabulary "
            "per language",
        method(t, f"Two `{t.preset}` models, one with the paper's joint vocabulary (source and target "
                  "embeddings and the output layer shared) and one with a vocabulary per language of the "
                  "same size (the target embedding tied to the output layer)")
        + f" Validation loss every {every} updates, in nats per reference word (so that the two "
          "tokenizations compare); the fixed loss is the worse model's final one, which both reach.",
        markdown_table(["vocabulary", "parameters", "validation BLEU", "final loss (nats/word)",
                        f"updates to reach {target:.3f}"], rows),
        saved > 0 and gap > -0.5,
        f"The joint vocabulary has {saved:,} fewer parameters ({saved / t.parameters['separate']:.0%} of the "
        f"separate model's); validation BLEU differs by {gap:+.2f} (joint minus separate) at equal updates, "
        f"and the loss of {target:.3f} nats per word took {reached['joint']:,} updates joint and "
        f"{reached['separate']:,} separate.")
