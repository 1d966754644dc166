"""Training speed, side by side in one run: aiayn's train_step against the reference of
../shared/BASELINES.md (embeddings + torch.nn.Transformer + tied output projection, label smoothing
0.1, Adam), on the same Multi30k en->de batches (joint 8k BPE, about 4,096 tokens per batch).

    python benchmarks/train_speed.py                   # small and base presets, about 10 minutes
    python benchmarks/train_speed.py --presets small --record
    python benchmarks/train_speed.py --presets --recipes recipes/multi30k.toml --batch-tokens 8192
                                                       # a recipe's model (its [model] section)
    python benchmarks/train_speed.py --smoke           # seconds: keeps the script working (CI)
    python benchmarks/train_speed.py --presets small --precision bfloat16   # both under bf16 autocast
    python benchmarks/train_speed.py --presets base --precision bfloat16 --device cuda \
        --batch-tokens 4096 25000 100000          # on a GPU, at growing batch sizes

Prints target tokens per second of each, the ratio, and each one's model FLOP/s as a share of
the matmul peak measured here in the same precision (FLOPs counted as 6 x weights x tokens they process).
"""

from __future__ import annotations

import math
import statistics
import time

import torch
import torch.nn.functional as F
from common import (
    CPU,
    PeakMemory,
    detail,
    machine,
    matmul_peak_gflops,
    peak_matrix_size,
    record,
    synchronize,
    training_data,
)
from common import parser as benchmark_parser
from torch import nn

from aiayn import config as cfg
from aiayn.config import DataConfig, TrainConfig, model_config
from aiayn.data.batching import collate, make_batches, tokenize
from aiayn.model import Transformer
from aiayn.model.positional import sinusoids
from aiayn.train.optim import make_optimizer
from aiayn.train.step import Criterion, train_step


class Reference(nn.Module):
    """Embeddings x sqrt(d) + sinusoids, torch.nn.Transformer (post-norm), tied output projection."""

    def __init__(self, c) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        nn.init.normal_(self.embed.weight, std=c.d_model**-0.5)
        self.transformer = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers,
                                          c.d_ff, c.dropout, batch_first=True)
        self.register_buffer("pe", sinusoids(torch.arange(1024), c.d_model).float(), persistent=False)
        self.scale, self.pad_id = math.sqrt(c.d_model), c.pad_id

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = self.embed(src) * self.scale + self.pe[: src.size(1)]
        y = self.embed(tgt) * self.scale + self.pe[: tgt.size(1)]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt.size(1), device=tgt.device)
        pad = src == self.pad_id
        h = self.transformer(x, y, tgt_mask=causal, src_key_padding_mask=pad, memory_key_padding_mask=pad,
                             tgt_is_causal=True)
        return h @ self.embed.weight.T


def reference_step(model: Reference, batch, optimizer: torch.optim.Optimizer,
                   precision: str = "float32") -> torch.Tensor:
    """One update (under bfloat16 autocast if asked); returns the loss per target token (detached)."""
    model.train()
    with torch.autocast(batch.src.device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=model.pad_id,
                               label_smoothing=0.1, reduction="sum") / batch.n_tgt_tokens
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def model_flops(config, batches) -> float:
    """6 x weights x the (padded) tokens they process: encoder on sources, decoder and output on targets."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size
    encoder_layer = 4 * d * d + 2 * d * f
    decoder_layer = 8 * d * d + 2 * d * f
    total = 0.0
    for b in batches:
        total += 6 * encoder_layer * config.n_encoder_layers * b.src.numel()
        total += 6 * (decoder_layer * config.n_decoder_layers + v * d) * b.tgt_in.numel()
    return total


def model_shape(name: str) -> tuple[str, dict]:
    """A preset's name, or a recipe file's path -> (its preset, the model options on top of it)."""
    if not name.endswith(".toml"):
        return name, {}
    recipe = cfg.recipe(cfg.load_config_file(name), name)
    return recipe.preset, {k: v for k, v in recipe.model.items() if k != "vocab_size"}


def compare(preset: str, batches, vocab_size: int, rounds: int, warmup: int, peak: float,
            precision: str = "float32", device: torch.device = CPU) -> dict:
    preset, options = model_shape(preset)
    config = model_config(preset, vocab_size=vocab_size, **options)
    torch.manual_seed(0)
    ours = Transformer(config).to(device)
    reference = Reference(config).to(device)
    train_config = TrainConfig(precision=precision)
    our_opt, ref_opt = make_optimizer(ours, train_config), make_optimizer(reference, train_config)
    batches = [b.to(device) for b in batches]
    criterion = Criterion(ours, train_config.label_smoothing, config.pad_id)
    run_ours = lambda b: train_step(criterion, [b], our_opt, 1e-4, train_config, device)  # noqa: E731
    run_reference = lambda b: reference_step(reference, b, ref_opt, precision)  # noqa: E731
    for b in batches[:warmup]:
        run_ours(b)
        run_reference(b)
    tokens = sum(b.n_tgt_tokens for b in batches)
    speeds: dict[str, list[float]] = {"aiayn": [], "reference": []}
    for _ in range(rounds):  # alternate, so that drifts in machine speed hit both alike
        for name, run in (("aiayn", run_ours), ("reference", run_reference)):
            start = time.perf_counter()
            for b in batches:
                run(b)
            synchronize(device)
            speeds[name].append(tokens / (time.perf_counter() - start))
    flops_per_token = model_flops(config, batches) / tokens
    result = {"preset": preset, "parameters": sum(p.numel() for p in ours.parameters())}
    for name, run in (("aiayn", run_ours), ("reference", run_reference)):  # one more pass each
        with PeakMemory(device) as memory:
            for b in batches:
                run(b)
            synchronize(device)
        result[f"{name}_memory"] = memory
    for name, values in speeds.items():
        result[name] = statistics.median(values)
        result[f"{name}_mfu"] = result[name] * flops_per_token / (peak * 1e9)
    result["ratio"] = result["aiayn"] / result["reference"]
    return result


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--presets", nargs="*", default=["small", "base"], help="model presets to compare")
    parser.add_argument("--recipes", nargs="*", default=[], metavar="FILE",
                        help="recipe files whose models to compare too (their [model] sections)")
    parser.add_argument("--batches", type=int, default=8, help="batches per timed round (default: 8)")
    parser.add_argument("--batch-tokens", type=int, nargs="+", default=[4096],
                        help="padded tokens per batch and side, one or more sizes to compare at (default: "
                             "4096; a GPU needs far larger batches to be busy)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per system; the median counts")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32",
                        help="bfloat16: both systems train under bfloat16 autocast (default: float32)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    args = parser.parse_args()

    corpus, tokenizer = training_data(args.smoke)
    tokenized = tokenize(corpus, tokenizer, DataConfig().max_len)
    presets = ["tiny"] if args.smoke else [*args.presets, *args.recipes]
    device = torch.device(args.device)
    size, dtype = peak_matrix_size(device), getattr(torch, args.precision)
    peak = matmul_peak_gflops(size, device=device, dtype=dtype)
    print(f"{machine(device)}\n{args.precision} matmul peak: {peak:,.0f} GFLOP/s")
    rows = ["| preset | parameters | batches x target tokens | aiayn tgt tok/s | reference tgt tok/s | ratio "
            "| aiayn MFU | reference MFU | aiayn peak memory | reference peak memory |", "|---" * 10 + "|"]
    for budget in [512] if args.smoke else args.batch_tokens:
        order = make_batches(*tokenized.lengths(), budget, seed=1)
        batches = [collate(b, tokenized, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
                   for b in order[:2 if args.smoke else args.batches]]
        shape = f"{len(batches)} x {statistics.mean(b.n_tgt_tokens for b in batches):,.0f}"
        for preset in presets:
            r = compare(preset, batches, tokenizer.vocab_size, 1 if args.smoke else args.rounds,
                        1 if args.smoke else 2, peak, args.precision, device)
            rows.append(f"| {preset} | {r['parameters'] / 1e6:.2f}M | {shape} | {r['aiayn']:,.0f} | "
                        f"{r['reference']:,.0f} | {r['ratio']:.2f}x | {r['aiayn_mfu']:.0%} | "
                        f"{r['reference_mfu']:.0%} | {r['aiayn_memory']} | {r['reference_memory']} |")
            print(rows[-1])
    if args.record and not args.smoke:
        record(f"Training speed ({args.precision}): aiayn vs embeddings + torch.nn.Transformer",
               "\n".join(rows),
               f"Matmul peak measured in the same run: {peak:,.0f} GFLOP/s ({args.precision}, {size}^3). "
               "Peak memory: the process's peak resident memory (on a GPU: PyTorch's peak allocation "
               "there) during one more pass over the batches, reset before each system (in brackets: "
               "the growth over the memory held when the pass began).", device, path=detail("train_speed"))


if __name__ == "__main__":
    main()
