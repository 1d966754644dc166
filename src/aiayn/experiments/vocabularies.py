"""Claims about vocabularies: one joint BPE vocabulary for English and German against two; and for
English and Chinese, which share no script, one vocabulary and embedding per language."""

from __future__ import annotations

from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table
from aiayn.experiments.variants import method, tatoeba, train_variants


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
        method(t, f"Two `{t.setup.preset}` models, one with the paper's joint vocabulary (source and target "
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


def chinese_separate(ctx: ExperimentContext) -> Finding:
    """Claim 13: trains four models, joint and separate in each direction (`training_steps` updates
    each)."""
    every = 20 if ctx.quick else 100
    variants = {"joint": {}, "separate": {"vocabulary": "separate", "share_embeddings": False}}
    rows, gaps, trained = [], {}, []
    for src, tgt in (("en", "zh"), ("zh", "en")):
        t = train_variants(ctx, variants, every, tatoeba(src, tgt))
        unit = "character" if tgt == "zh" else "word"
        rows += [[t.setup.direction, name, f"{t.parameters[name]:,}", f"{t.bleu[name]:.2f}",
                  f"{t.curves[name][-1][1]:.3f} nats/{unit}", f"{t.seconds[name] / 60:.1f}"]
                 for name in variants]
        gaps[t.setup.direction] = t.bleu["separate"] - t.bleu["joint"]
        trained.append(t)
    said = ", ".join(f"{d} {g:+.2f}" for d, g in gaps.items())
    return Finding(
        13, "For languages that share no script (English and Chinese), a vocabulary and an embedding per "
            "language, as the Chinese notes on the paper advise, translate better than one joint vocabulary",
        method(trained[0], "In each direction, two models: one joint vocabulary of 8,000 pieces (every "
                           "embedding shared), and a vocabulary of 4,000 pieces per language (the target "
                           "embedding tied to the output layer)", trained[1])
        + " Validation BLEU by characters "
          f"into Chinese (sacreBLEU's zh tokenizer), 13a into English; validation loss every {every} "
          "updates, per reference character into Chinese and per word into English, so that the "
          "tokenizations compare.",
        markdown_table(["direction", "vocabulary", "parameters", "validation BLEU", "final loss",
                        "training minutes"], rows),
        all(g > 0 for g in gaps.values()) if all(abs(g) >= 0.5 for g in gaps.values()) else None,
        f"Separate minus joint validation BLEU: {said} (within 0.5 BLEU is taken as noise: then the "
        "measurement does not decide, and the recipe follows the notes).")
