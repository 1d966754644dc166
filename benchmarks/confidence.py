"""How well a translation's confidence (its log-probability per token, `Translation.confidence`)
tells a good translation from a doubtful one: each model translates a test set, and each sentence's
confidence is set against its sentence-level chrF (sacreBLEU's chrF2 of that sentence alone):
Spearman's rank correlation, and the mean chrF of the least and most confident fifths.

    python benchmarks/confidence.py --model runs/quickstart runs/exp-c2/averaged
    python benchmarks/confidence.py --model RUN --test multi30k:test_2016_flickr --record
    python benchmarks/confidence.py --smoke           # seconds: keeps the script working (CI)

The test set is translated in each model's own direction with its search settings as the run stored
them (`aiayn evaluate --sweep`'s choice, if any).
"""

from __future__ import annotations

import statistics

from common import data_dir, detail, record, run_name, smoke_model
from common import parser as benchmark_parser
from sacrebleu.metrics import CHRF

from aiayn.data.corpora import load_corpus
from aiayn.data.readers import ParallelCorpus
from aiayn.translation import load_translator


def ranks(values: list[float]) -> list[float]:
    """Each value's rank from 1, ties given the mean of the ranks they share."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in order[i:j + 1]:
            out[k] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(xs: list[float], ys: list[float]) -> float:
    """Spearman's rank correlation: Pearson's correlation of the ranks."""
    return statistics.correlation(ranks(xs), ranks(ys))


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--model", nargs="+", default=[], help="run directories or checkpoints")
    parser.add_argument("--test", default="multi30k:test_2016_flickr", help="the test set (a corpus spec)")
    args = parser.parse_args()
    data_dir()
    if args.smoke:
        models, test = [smoke_model()], "synthetic:reverse:val"
    else:
        if not args.model:
            parser.error("--model RUN [RUN ...] is needed (or --smoke)")
        models, test = args.model, args.test
    rows = ["| model | sentences | Spearman (confidence, sentence chrF) | mean confidence | chrF of the "
            "least confident fifth | chrF of the most confident fifth |", "|---|---|---|---|---|---|"]
    chrf = CHRF()
    for path in models:
        translator = load_translator(path, device="cpu")
        corpus = load_corpus(test, translator.src_lang, translator.tgt_lang)
        if args.smoke:
            corpus = ParallelCorpus(corpus.source[:40], corpus.target[:40], corpus.name)
        found = translator.translate(corpus.source, progress=not args.smoke)
        pairs = [(t.confidence, chrf.sentence_score(t.text, [ref]).score)
                 for t, ref in zip(found, corpus.target, strict=True) if t.confidence is not None]
        sure, quality = [c for c, _ in pairs], [q for _, q in pairs]
        fifth = max(1, len(pairs) // 5)
        by_confidence = [q for _, q in sorted(pairs)]
        rows.append(f"| {run_name(path)} | {len(pairs)} | {spearman(sure, quality):.3f} | "
                    f"{statistics.mean(sure):.3f} | {statistics.mean(by_confidence[:fifth]):.1f} | "
                    f"{statistics.mean(by_confidence[-fifth:]):.1f} |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.record and not args.smoke:
        record(f"Confidence against sentence chrF on {test}", table, path=detail("confidence"))


if __name__ == "__main__":
    main()
