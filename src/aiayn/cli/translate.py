"""`aiayn translate`: translate sentences with a trained model."""

from __future__ import annotations

import argparse
import sys

import torch
from tqdm import tqdm

from aiayn import checkpoint
from aiayn.decoding import greedy_search
from aiayn.train.loop import resolve_device


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(name, help="translate sentences",
                            description="Translate sentences given as arguments, or one per line from "
                                        "--input or standard input; writes one line per input line "
                                        "(an empty line gives an empty line).")
    p.add_argument("checkpoint", help="checkpoint directory, or a run directory (its newest checkpoint)")
    p.add_argument("sentences", nargs="*", help="sentences to translate (default: read lines)")
    p.add_argument("--input", "-i", help="file to translate, one sentence per line (default: stdin)")
    p.add_argument("--output", "-o", help="where to write translations (default: stdout)")
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch (default: 64)")
    p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")


def run(args: argparse.Namespace) -> int:
    device = resolve_device(args.device)
    ck = checkpoint.load(checkpoint.resolve(args.checkpoint), device, with_state=False)
    model, tokenizer = ck.model.eval(), ck.tokenizer
    if args.sentences:
        lines = args.sentences
    elif args.input:
        with open(args.input, encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        lines = sys.stdin.read().splitlines()
    translations = translate(model, tokenizer, lines, args.batch_size, device)
    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout
    try:
        out.writelines(t + "\n" for t in translations)
    finally:
        if args.output:
            out.close()
    return 0


def translate(model, tokenizer, lines: list[str], batch_size: int, device: torch.device) -> list[str]:
    """Translate `lines` in batches of similar length; empty lines stay empty."""
    ids = tokenizer.encode(lines)
    order = sorted((i for i, s in enumerate(ids) if s), key=lambda i: len(ids[i]))
    results = [""] * len(lines)
    for start in tqdm(range(0, len(order), batch_size), desc="translating", unit="batch",
                      disable=len(order) <= batch_size, leave=False):
        batch = order[start:start + batch_size]
        rows = [ids[i] + [tokenizer.eos_id] for i in batch]
        src = torch.full((len(rows), max(map(len, rows))), tokenizer.pad_id, dtype=torch.long)
        for r, row in enumerate(rows):
            src[r, : len(row)] = torch.tensor(row)
        for i, hyp in zip(batch, greedy_search(model, src.to(device)), strict=True):
            results[i] = tokenizer.decode(hyp)
    return results
