"""Claim about training and decoding: parallel over target positions versus one step at a time."""

from __future__ import annotations

import time

import torch

from aiayn.config import model_config
from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table
from aiayn.model import Transformer


@torch.no_grad()
def parallel_training(ctx: ExperimentContext) -> Finding:
    """Claim 7."""
    torch.manual_seed(7)
    model = Transformer(model_config("tiny" if ctx.quick else "small", vocab_size=8000)).eval()
    b, s, t = (4, 12, 10) if ctx.quick else (32, 20, 24)
    src, tgt = torch.randint(4, 8000, (b, s)), torch.randint(4, 8000, (b, t))
    start = time.perf_counter()
    parallel = model(src, tgt)  # all T positions at once (teacher forcing)
    parallel_seconds = time.perf_counter() - start
    start = time.perf_counter()
    memory = model.encode(src)
    cache = model.init_cache(memory, t)
    steps = [model.logits(model.decode(tgt[:, i:i + 1], None, src, cache)) for i in range(t)]
    sequential_seconds = time.perf_counter() - start
    difference = (torch.cat(steps, dim=1) - parallel).abs().max().item()
    return Finding(
        7, "Training is parallel over target positions while decoding is sequential: teacher-forced "
           "parallel logits equal step-by-step logits",
        f"{b} sentence pairs ({s} source, {t} target positions): logits of all target positions in one "
        "teacher-forced pass, and logits computed one position at a time with the key/value cache.",
        markdown_table(["way", "decoder calls", "seconds", "largest |difference| from parallel"],
                       [["parallel (training)", 1, f"{parallel_seconds:.4f}", "0"],
                        ["step by step (decoding)", t, f"{sequential_seconds:.4f}", f"{difference:.1e}"]]),
        difference < 1e-4,
        f"The logits agree to {difference:.0e} (float32 rounding): the causal mask makes each position "
        f"see exactly what it sees when decoding. Computing the {t} positions in one pass took "
        f"{parallel_seconds:.3f} s, one at a time {sequential_seconds:.3f} s.")
