"""Claims about attention: scaling by sqrt(d_k), heads, symmetry, quadratic cost, additive attention.

Shapes: B batch, H heads, N positions, K d_k, D d_model.
"""

from __future__ import annotations

import math
import statistics

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from aiayn.config import model_config  # noqa: E402
from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table  # noqa: E402
from aiayn.model.attention import MultiHeadAttention, attention  # noqa: E402
from aiayn.model.layers import EncoderLayer  # noqa: E402
from aiayn.timing import timed_calls  # noqa: E402


def fastest_seconds(fn, repeats: int = 5, warmup: int = 2) -> float:
    """The fastest of `repeats` timed calls: the estimate least disturbed by other work on the machine."""
    return min(timed_calls(fn, repeats, warmup))


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log y against log x: the exponent of a power law."""
    lx, ly = [math.log(x) for x in xs], [math.log(y) for y in ys]
    mx, my = statistics.mean(lx), statistics.mean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly, strict=True)) / sum((a - mx) ** 2 for a in lx)


def scaling(ctx: ExperimentContext) -> Finding:
    """Claim 1."""
    g = torch.Generator().manual_seed(1)
    dims = (16, 64, 256) if ctx.quick else (16, 64, 256, 1024)
    samples, keys = (256, 16) if ctx.quick else (4096, 32)
    rows, grads = [], {"unscaled": [], "scaled": []}
    for d_k in dims:
        q, k = torch.randn(samples, d_k, generator=g), torch.randn(samples, keys, d_k, generator=g)
        dots = (k @ q[:, :, None]).squeeze(-1)  # (samples, keys): q . k
        upstream = torch.randn(samples, keys, generator=g)  # a random gradient arriving at the weights
        row = [d_k, f"{dots.var().item():.1f}", f"{(dots / math.sqrt(d_k)).var().item():.2f}"]
        for name, divisor in (("unscaled", 1.0), ("scaled", math.sqrt(d_k))):
            logits = (dots / divisor).requires_grad_()
            weights = logits.softmax(-1)
            (weights * upstream).sum().backward()
            grads[name].append(logits.grad.norm(dim=-1).mean().item())
            row += [f"{weights.max(-1).values.mean().item():.3f}", f"{grads[name][-1]:.4f}"]
        rows.append(row)
    table = markdown_table(["d_k", "var(q.k)", "var(q.k / sqrt(d_k))", "max weight, unscaled",
                            "gradient norm, unscaled", "max weight, scaled", "gradient norm, scaled"], rows)
    figure = ctx.out / "claim1_softmax_gradients.png"
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, values in grads.items():
        ax.plot(dims, values, "o-", label=name)
    ax.set(xscale="log", yscale="log", xlabel="d_k", ylabel="mean gradient norm at the softmax input",
           title="softmax gradients with and without 1/sqrt(d_k)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figure, dpi=90)
    plt.close(fig)
    variances_ok = all(abs(float(r[1]) / d - 1) < 0.15 and abs(float(r[2]) - 1) < 0.15
                       for r, d in zip(rows, dims, strict=True))
    unscaled, scaled = grads["unscaled"], grads["scaled"]
    decreasing = all(a > b for a, b in zip(unscaled, unscaled[1:], strict=False))
    flat = max(scaled) < 1.2 * min(scaled)
    shrinks = decreasing and flat and unscaled[-1] < 0.5 * scaled[-1]
    return Finding(
        1, "Dot products of unit-variance q, k have variance d_k; scaling by 1/sqrt(d_k) restores 1; "
           "without it the softmax saturates and its gradients shrink as d_k grows",
        f"{samples:,} random q and {keys} keys per d_k, components N(0, 1). The softmax weights get a "
        "random upstream gradient; the table gives the mean norm of the gradient reaching the softmax "
        "input and the mean largest weight (1.0 = saturated).",
        table, variances_ok and shrinks,
        f"var(q.k) tracks d_k and the scaled variance stays near 1. Unscaled, the largest weight goes to "
        f"{rows[-1][3]} and the gradient falls from {unscaled[0]:.3f} to {unscaled[-1]:.4f} as d_k grows "
        f"from {dims[0]} to {dims[-1]}; scaled, it stays near {statistics.mean(scaled):.3f}.", [figure])


def heads(ctx: ExperimentContext) -> Finding:
    """Claim 2."""
    d, n, b = (64, 32, 4) if ctx.quick else (512, 128, 8)
    x = torch.randn(b, n, d)
    rows, params, times = [], [], []
    for h in (1, 2, 4, 8, 16):
        mha = MultiHeadAttention(d, h).eval()
        params.append(sum(p.numel() for p in mha.parameters()))
        with torch.no_grad():
            times.append(fastest_seconds(lambda mha=mha: mha(x), repeats=10))
        flops = 2 * b * (4 * n * d * d + 2 * n * n * d)  # projections, then Q K^T and weights x V
        rows.append([h, d // h, f"{params[-1]:,}", f"{flops / 1e9:.2f}", f"{times[-1] * 1e3:.2f}"])
    spread = max(times) / min(times)
    return Finding(
        2, "Multi-head attention has the same parameters and the same O(n^2 d) cost whatever the number "
           "of heads",
        f"One self-attention layer, d_model {d}, {b} sequences of {n} positions; parameters counted and "
        "forward time measured (fastest of 10) for h = 1 to 16 heads of d_model/h each.",
        markdown_table(["heads", "d_k", "parameters", "GFLOP (counted)", "time (ms)"], rows),
        len(set(params)) == 1 and spread < 2.0,
        f"The parameter count is {params[0]:,} (4 d^2 + 4 d) for every h and the counted work does not "
        f"change; measured times differ by {spread:.2f}x between the fastest and slowest h (many small "
        "heads cost some efficiency in practice).")


def symmetry(ctx: ExperimentContext) -> Finding:
    """Claim 3."""
    torch.manual_seed(3)
    d, h, n = 64, 4, 12
    mha = MultiHeadAttention(d, h).eval()
    with torch.no_grad():  # W^K := W^Q
        mha.in_proj.weight[d:2 * d] = mha.in_proj.weight[:d]
        mha.in_proj.bias[d:2 * d] = mha.in_proj.bias[:d]
    x = torch.randn(1, n, d)
    q, k, _ = mha.project_qkv(x)
    scores = q @ k.transpose(-2, -1)  # (1, H, N, N)
    asymmetry = (scores - scores.transpose(-2, -1)).abs().max().item() / scores.abs().max().item()
    rows = []
    for dim in (64, 512):
        vectors = torch.randn(1, 1, n, dim)  # no projection: Q = K = V = X
        _, weights = attention(vectors, vectors, vectors, need_weights=True)
        rows.append([f"random vectors, d = {dim}", f"{weights[0, 0].diagonal().mean().item():.3f}"])
    model = _small_model(ctx)
    tokens = torch.arange(4, 4 + n)[None]
    x = model.embed(tokens, model.src_embed)[:, None]  # embeddings x sqrt(D) + positions
    _, weights = attention(x, x, x, need_weights=True)
    rows.append([f"embedded tokens of a fresh model, d = {model.config.d_model}",
                 f"{weights[0, 0].diagonal().mean().item():.3f}"])
    share = min(float(r[1]) for r in rows)
    return Finding(
        3, "With W^Q = W^K the attention scores are symmetric; without Q/K/V projections each token "
           "attends mostly to itself",
        f"Scores Q K^T of a {h}-head attention layer whose W^K is set to its W^Q, on {n} random inputs; "
        "then attention with no projections at all (Q = K = V = X), and the mean weight a token gives "
        "itself.",
        f"Largest |S - S^T| relative to the largest |S|: {asymmetry:.1e}\n\n"
        + markdown_table(["inputs (no projections)", "mean weight on itself"], rows),
        asymmetry < 1e-5 and share > 0.5,
        f"The scores are symmetric to float precision ({asymmetry:.0e}). Without projections a token's "
        f"own key is always its best match (q.q = |q|^2), so at least {share:.0%} of its attention goes "
        "to itself: the projections are what let a token look elsewhere.")


def quadratic_cost(ctx: ExperimentContext) -> Finding:
    """Claim 8."""
    torch.manual_seed(8)
    c = model_config("base")
    layer = EncoderLayer(c).eval()
    lengths = (16, 32, 64, 128, 256) if ctx.quick else (16, 32, 64, 128, 256, 512, 1024, 2048)
    rows, layer_times, attention_times, memory = [], [], [], []
    for n in lengths:
        x, mask = torch.randn(1, n, c.d_model), torch.ones(1, 1, 1, n, dtype=torch.bool)
        q = k = v = torch.randn(1, c.n_heads, n, c.d_k)
        with torch.no_grad():
            repeats = 3 if n > 512 else 5
            layer_times.append(fastest_seconds(lambda x=x, mask=mask: layer(x, mask), repeats=repeats))
            attention_times.append(fastest_seconds(lambda q=q, k=k, v=v: attention(q, k, v), repeats=5))
            weights = attention(q, k, v, need_weights=True)[1]
        memory.append(weights.numel() * weights.element_size())
        rows.append([n, f"{layer_times[-1] * 1e3:.2f}", f"{attention_times[-1] * 1e3:.3f}",
                     f"{memory[-1] / 2**20:.2f}"])
    tail = slice(-3, None) if ctx.quick else slice(4, None)  # n >= 256
    layer_exp = slope(list(lengths[tail]), layer_times[tail])
    attention_exp = slope(list(lengths[tail]), attention_times[tail])
    memory_exp = slope(list(lengths), memory)
    figure = ctx.out / "claim8_attention_cost.png"
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(lengths, layer_times, "o-", label="encoder layer (d_model 512, 8 heads)")
    ax.loglog(lengths, attention_times, "o-", label="scaled dot-product attention alone")
    ax.set(xlabel="sequence length n", ylabel="seconds", title="cost against sequence length")
    ax.legend()
    fig.tight_layout()
    fig.savefig(figure, dpi=90)
    plt.close(fig)
    return Finding(
        8, "Self-attention cost grows with the square of the sequence length",
        "One `base` encoder layer (d_model 512, 8 heads, d_ff 2048) on one sequence of n positions, and "
        "its attention alone (softmax(Q K^T / sqrt(d_k)) V over 8 heads); fastest time of several runs, "
        "and the memory of the attention weights it materialises (8 x n x n floats). Exponents are fitted "
        f"on log-log for n >= {lengths[tail][0]}.",
        markdown_table(["n", "layer time (ms)", "attention time (ms)", "attention weights (MiB)"], rows)
        + f"\n\nFitted exponents: attention time {attention_exp:.2f}, weights memory {memory_exp:.2f}, "
          f"whole layer {layer_exp:.2f}.",
        1.6 < attention_exp < 2.4 and abs(memory_exp - 2) < 0.01,
        f"Attention time grows as n^{attention_exp:.2f} and its weights' memory as n^{memory_exp:.2f}. The "
        f"whole layer grows as n^{layer_exp:.2f} here: its feed-forward and projections cost O(n d^2), "
        "linear in n, and still dominate until n approaches d_model-scale lengths.", [figure])


class AdditiveScore(nn.Module):
    """Bahdanau et al. (2015): score(q, k) = v^T tanh(W_q q + W_k k)."""

    def __init__(self, d: int) -> None:
        super().__init__()
        self.w_q, self.w_k, self.v = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False), nn.Linear(d, 1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = self.v(torch.tanh(self.w_q(q)[:, :, None] + self.w_k(k)[:, None])).squeeze(-1)  # (B, N, N)
        return scores.softmax(-1) @ v


def additive(ctx: ExperimentContext) -> Finding:
    """Claim 10."""
    torch.manual_seed(10)
    d, b = 64, 4
    lengths = (32, 64, 128) if ctx.quick else (64, 128, 256, 512, 1024)
    score = AdditiveScore(d).eval()
    rows, dot_times, add_times = [], [], []
    with torch.no_grad():  # a first pass over every size, untimed: kernels initialise on first use
        for n in lengths:
            q = torch.randn(b, n, d)
            attention(q[:, None], q[:, None], q[:, None]), score(q, q, q)
    for n in lengths:
        q = torch.randn(b, n, d)
        with torch.no_grad():
            dot_times.append(fastest_seconds(lambda q=q: attention(q[:, None], q[:, None], q[:, None])))
            add_times.append(fastest_seconds(lambda q=q: score(q, q, q), repeats=3))
        rows.append([n, f"{dot_times[-1] * 1e3:.3f}", f"{add_times[-1] * 1e3:.2f}",
                     f"{add_times[-1] / dot_times[-1]:.0f}x"])
    dot_exp, add_exp = slope(list(lengths), dot_times), slope(list(lengths), add_times)
    ratios = [a / t for a, t in zip(add_times, dot_times, strict=True)]
    return Finding(
        10, "Additive and dot-product attention have the same asymptotic cost, but dot-product attention "
            "is much faster in practice",
        f"One head of width {d}, {b} sequences of n positions; fastest time of dot-product attention and "
        "of additive attention (v^T tanh(W_q q + W_k k), Bahdanau et al.), same inputs.",
        markdown_table(["n", "dot-product (ms)", "additive (ms)", "additive / dot"], rows)
        + f"\n\nFitted exponents in n: dot-product {dot_exp:.2f}, additive {add_exp:.2f}.",
        min(ratios) > 2,
        f"Both are O(n^2 d) (fitted exponents {dot_exp:.2f} and {add_exp:.2f}; small n is dominated by "
        f"fixed costs), but additive attention is {min(ratios):.0f}x to {max(ratios):.0f}x slower: it "
        "materialises an n x n x d tensor of tanh inputs, where dot-product attention is one matrix "
        "multiplication.")


def _small_model(ctx: ExperimentContext):
    from aiayn.model import Transformer

    torch.manual_seed(0)
    return Transformer(model_config("tiny" if ctx.quick else "small", vocab_size=512)).eval()
