"""What BPE-dropout (`--bpe-dropout P`) costs a training run: the pieces drawn for a whole epoch of
Multi30k en->de (both sides), how much longer the sentences become, and the time of an epoch's
updates on drawn against usual pieces, for the Multi30k recipe's model, side by side in one run.

    python benchmarks/bpe_dropout.py                    # P = 0.1, the recipe's model, about 3 minutes
    python benchmarks/bpe_dropout.py --p 0.05 0.1 --record
    python benchmarks/bpe_dropout.py --smoke            # seconds: keeps the script working (CI)

Prints, for each P: seconds to draw an epoch's pieces, pieces per sentence against the usual ones,
the seconds of one update (batches of --batch-tokens tokens, usual or drawn), and an epoch's time with
drawing against without (the ratio is what --bpe-dropout P costs the wall clock of a run).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch
from common import CPU, data_dir, detail, machine, record
from common import parser as benchmark_parser

from aiayn import config as cfg
from aiayn.data.batching import collate, make_batches, tokenize
from aiayn.data.corpora import load_corpus
from aiayn.data.subwords import Resampler
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer
from aiayn.train.optim import make_optimizer
from aiayn.train.step import Criterion, train_step

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "multi30k.toml"


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--p", type=float, nargs="+", default=[0.1],
                        help="dropout probabilities (default: 0.1)")
    parser.add_argument("--batches", type=int, default=12,
                        help="batches whose updates are timed (default: 12)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds; the median counts (default: 3)")
    args = parser.parse_args()
    torch.set_num_threads(2 if not args.smoke else 1)
    data_dir()
    corpus = load_corpus("synthetic:copy" if args.smoke else "multi30k", "en", "de")
    recipe = cfg.recipe(cfg.load_config_file(RECIPE), str(RECIPE))
    vocab = 512 if args.smoke else cfg.model_config(recipe.preset, **recipe.model).vocab_size
    tokenizer = Tokenizer.learn(corpus.source, corpus.target, vocab)
    tokenized = tokenize(corpus, tokenizer, recipe.data.max_len)
    model_options = {**recipe.model, "vocab_size": tokenizer.vocab_size}
    if args.smoke:
        model_options |= dict(d_model=32, d_ff=64, n_encoder_layers=1, n_decoder_layers=1)
    torch.manual_seed(0)
    model = Transformer(cfg.model_config(recipe.preset, **model_options))
    train_config = cfg.TrainConfig()
    criterion, optimizer = Criterion(model, 0.1, tokenizer.pad_id), make_optimizer(model, train_config)
    order = make_batches(*tokenized.lengths(), recipe.data.batch_tokens, seed=1)
    ids = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id
    parameters = sum(p.numel() for p in model.parameters())
    print(f"{machine()}\n{len(tokenized):,} pairs, {len(order)} batches an epoch of up to "
          f"{recipe.data.batch_tokens:,} tokens; model {parameters / 1e6:.2f}M")

    def update_seconds(corpus_view, order) -> float:
        batches = [collate(b, corpus_view, *ids) for b in order[: 2 if args.smoke else args.batches]]
        train_step(criterion, batches[:1], optimizer, 1e-4, train_config, CPU)  # warm-up
        times = []
        for _ in range(1 if args.smoke else args.rounds):
            start = time.perf_counter()
            for b in batches:
                train_step(criterion, [b], optimizer, 1e-4, train_config, CPU)
            times.append((time.perf_counter() - start) / len(batches))
        return statistics.median(times)

    usual_update = update_seconds(tokenized, order)
    usual_epoch = usual_update * len(order)
    usual_pieces = sum(map(len, tokenized.source)) + sum(map(len, tokenized.target))
    rows = ["| P | drawing an epoch (both sides) | pieces / usual | update, usual | update, drawn "
            "| epoch, usual | epoch, drawn (with drawing) | epoch ratio |", "|---" * 8 + "|"]
    for p in args.p:
        resampler = Resampler(tokenizer, p, seed=1, max_len=recipe.data.max_len)
        start = time.perf_counter()
        drawn = resampler.drawn(tokenized, 0)
        drawing = time.perf_counter() - start
        pieces = sum(map(int, drawn.source.lengths())) + sum(map(int, drawn.target.lengths()))
        drawn_update = update_seconds(drawn, make_batches(*drawn.lengths(), recipe.data.batch_tokens, seed=1))
        drawn_epoch = drawn_update * len(order) + drawing
        rows.append(f"| {p:g} | {drawing:.1f} s | {pieces / usual_pieces:.3f}x | "
                    f"{usual_update * 1e3:.0f} ms | {drawn_update * 1e3:.0f} ms | {usual_epoch:.0f} s | "
                    f"{drawn_epoch:.0f} s | "
                    f"{drawn_epoch / usual_epoch:.2f}x |")
        print(rows[-1])
    if args.record and not args.smoke:
        record("BPE-dropout: what drawing the pieces costs a run", "\n".join(rows),
               f"Multi30k en->de train, the model of recipes/{RECIPE.name}, 2 threads; the updates of the "
               f"first {args.batches} batches of an epoch (usual or drawn pieces, batched alike), median "
               f"of {args.rounds} rounds; an epoch's time = an update's time x the batches of an epoch "
               "(+ drawing its pieces).", path=detail("multi30k"))


if __name__ == "__main__":
    main()
