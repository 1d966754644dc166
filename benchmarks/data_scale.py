"""Training data at WMT scale in bounded memory: a corpus of WMT14 en-de's size (4.5M pairs)
prepared into memory maps and trained from; then training speed from the memory maps against
in-memory data on Multi30k, side by side.

    python benchmarks/data_scale.py --work /tmp/data-scale             # 4,500,000 pairs
    python benchmarks/data_scale.py --work /tmp/data-scale --record

The corpus is Multi30k's en-de training pairs drawn at random and perturbed (a word dropped, two
words swapped, a number added on both sides), so sentence lengths are realistic and few pairs
repeat. Reported: `aiayn prepare` time, disk size and peak resident memory; the peak resident
memory of `aiayn train --data` over its first 100 updates and the time from starting the command
to its first update; and training target tokens/s from `--data` (memory maps) against `--train
multi30k` (Python lists), alternated, median of the rounds.
Targets: peak resident memory during training <= 2 GB; first update < 30 s; tokens/s from the
memory maps >= 0.97x in-memory (no loss beyond noise).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import data_dir, detail, parser, record

from aiayn.data.corpora import load_corpus

AIAYN = [sys.executable, "-m", "aiayn"]
QUIET = ["--valid-every", "0", "--bleu-every", "0", "--save-every", "0", "--log-every", "1"]


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--work", type=Path, default=None,
                   help="directory for the corpus, data directories and runs (replaced; default: a new "
                        "temporary directory)")
    p.add_argument("--pairs", type=int, default=4_500_000, help="pairs in the big corpus")
    p.add_argument("--steps", type=int, default=100, help="updates trained from the big corpus")
    p.add_argument("--speed-steps", type=int, default=60, help="updates per Multi30k speed round")
    p.add_argument("--rounds", type=int, default=2, help="speed rounds, alternating")
    p.add_argument("--preset", default="small", help="model preset for training")
    args = p.parse_args()
    if args.smoke:
        args.pairs, args.steps, args.speed_steps, args.rounds, args.preset = 5_000, 3, 4, 1, "tiny"
    data_dir()
    if args.work is None:
        args.work = Path(tempfile.mkdtemp(prefix="aiayn-data-scale-"))
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    print(f"working in {args.work}")
    rows = big_corpus(args) + speed(args)
    table = "\n".join(["| measure | value | target |", "|---|---|---|",
                       *(f"| {' | '.join(row)} |" for row in rows)])
    print(table)
    if args.record and not args.smoke:
        record("Data at WMT scale: memory maps", table, path=detail("data_scale"))


def big_corpus(args) -> list[tuple[str, str, str]]:
    """Prepare the big corpus and train from it: table rows (measure, value, target)."""
    start = time.perf_counter()
    prefix = write_corpus(args.work / "corpus", args.pairs)
    text_mb = disk_mb(args.work / "corpus.en") + disk_mb(args.work / "corpus.de")
    print(f"wrote {args.pairs:,} pairs ({text_mb:,.0f} MB of text) in {time.perf_counter() - start:.0f} s",
          flush=True)
    data = args.work / "big"
    seconds, prepare_rss, _ = measured([*AIAYN, "prepare", "--train", str(prefix), "--vocab-size",
                                        vocab_size(args), "--out", str(data)])
    print(f"prepare: {seconds:.0f} s, {disk_mb(data):,.0f} MB, peak RSS {prepare_rss:,.0f} MB", flush=True)
    run = args.work / "big-run"
    first, train_rss = first_update([*AIAYN, "train", "--data", str(data), "--preset", args.preset,
                                     "--max-steps", str(args.steps), *QUIET, "--out", str(run)], run)
    print(f"train --data: first update after {first:.1f} s, peak RSS {train_rss:,.0f} MB", flush=True)
    return [("corpus", f"{args.pairs:,} pairs, {text_mb:,.0f} MB of text (Multi30k en-de, perturbed)", ""),
            ("`aiayn prepare` time", f"{seconds:,.0f} s", ""),
            ("prepared size on disk", f"{disk_mb(data):,.0f} MB", ""),
            ("`aiayn prepare` peak RSS", f"{prepare_rss:,.0f} MB", ""),
            (f"`aiayn train --data` peak RSS, {args.steps} updates ({args.preset})", f"{train_rss:,.0f} MB",
             verdict("<= 2,048 MB", train_rss <= 2048)),
            ("command start to first update", f"{first:.1f} s", verdict("< 30 s", first < 30))]


def speed(args) -> list[tuple[str, str, str]]:
    """Multi30k training speed from memory maps and from lists, alternated: a table row."""
    multi30k, spec = args.work / "multi30k", "synthetic:copy" if args.smoke else "multi30k"
    measured([*AIAYN, "prepare", "--train", spec, "--vocab-size", vocab_size(args), "--out", str(multi30k)])
    sources = {"memory maps": ["--data", str(multi30k)],
               "lists": ["--train", spec, "--tokenizer", str(multi30k)]}
    speeds: dict[str, list[float]] = {name: [] for name in sources}
    for r in range(args.rounds):
        for name, options in sources.items():
            run = args.work / f"speed-{r}-{name.split()[0]}"
            measured([*AIAYN, "train", *options, "--preset", args.preset, "--max-steps",
                      str(args.speed_steps), *QUIET, "--out", str(run)])
            speeds[name].append(tokens_per_s(run, skip=max(1, args.speed_steps // 6)))
            print(f"round {r + 1}, {name}: {speeds[name][-1]:,.0f} target tok/s", flush=True)
    mapped, lists = (statistics.median(v) for v in speeds.values())
    ratio = mapped / lists
    return [(f"Multi30k target tok/s ({args.preset}), memory maps / lists",
             f"{mapped:,.0f} / {lists:,.0f} = {ratio:.2f}x", verdict(">= 0.97x", ratio >= 0.97))]


def vocab_size(args) -> str:
    return "1000" if args.smoke else "8000"


def verdict(target: str, met: bool) -> str:
    return f"{target}: {'met' if met else 'not met'}"


def write_corpus(prefix: Path, pairs: int, seed: int = 1) -> Path:
    """`pairs` Multi30k en-de training pairs, drawn at random and perturbed, as PREFIX.en/.de."""
    corpus = load_corpus("multi30k", "en", "de")
    rng = random.Random(seed)
    with open(f"{prefix}.en", "w", encoding="utf-8") as en, open(f"{prefix}.de", "w", encoding="utf-8") as de:
        for _ in range(pairs):
            i = rng.randrange(len(corpus))
            source, target = corpus.source[i].split(), corpus.target[i].split()
            for words in (source, target):
                if len(words) > 3 and rng.random() < 0.5:
                    del words[rng.randrange(len(words))]
                if len(words) > 3 and rng.random() < 0.5:
                    a, b = rng.randrange(len(words)), rng.randrange(len(words))
                    words[a], words[b] = words[b], words[a]
            number = str(rng.randrange(10_000))
            en.write(" ".join(source + [number]) + "\n")
            de.write(" ".join(target + [number]) + "\n")
    return prefix


def measured(command: list[str]) -> tuple[float, float, str]:
    """(seconds, peak resident MB, stdout) of a command run to its end."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(command)}\n{stdout}")
    return time.perf_counter() - start, usage.ru_maxrss / 1024, stdout


def first_update(command: list[str], run: Path) -> tuple[float, float]:
    """(seconds from the start of `command` to its first logged update, its peak resident MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    metrics, first = run / "metrics.jsonl", None
    while first is None and process.poll() is None:
        if metrics.exists() and '"kind": "train"' in metrics.read_text(encoding="utf-8"):
            first = time.perf_counter() - start
        time.sleep(0.02)
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or first is None:
        sys.exit(f"failed: {' '.join(command)}")
    return first, usage.ru_maxrss / 1024


def tokens_per_s(run: Path, skip: int) -> float:
    """Target tokens per second over a run's updates after the first `skip` (warm-up)."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    kept = train[skip:]
    return sum(r["tokens"] for r in kept) / (kept[-1]["elapsed_s"] - train[skip - 1]["elapsed_s"])


def disk_mb(path: Path) -> float:
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files) / 2**20


if __name__ == "__main__":
    main()
