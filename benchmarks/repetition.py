"""Repetition loops, and what the rules against them (`--repetition-penalty`,
`--no-repeat-ngram-size`) do to them and to BLEU: each model translates a test set under each
setting; a translation loops when a sequence of 1 to 3 words occurs 4 or more times in a row
(`aiayn.evaluate.looping`).

    python benchmarks/repetition.py --model runs/quickstart runs/exp-c2/averaged
    python benchmarks/repetition.py --model RUN --test multi30k:val --settings 1:0 1:4 1.2:0 --record
    python benchmarks/repetition.py --model RUN --settings 1:0 1:3 --latency 60   # a lone sentence's cost
    python benchmarks/repetition.py --smoke           # seconds: keeps the script working (CI)

--settings: PENALTY:N pairs, repetition_penalty and no_repeat_ngram_size (1:0 is neither rule).
The test set is scored in each model's own direction, with its search settings otherwise as the run
stored them (`aiayn evaluate --sweep`'s choice, if any).
--latency N: instead, the first N sentences one at a time (a request's search), compiled, each under
every setting in turn, twice, after 10 untimed: the p50 and mean of each setting.
"""

from __future__ import annotations

import statistics
import time

from common import data_dir, detail, record, run_name, smoke_model
from common import parser as benchmark_parser

from aiayn.data.corpora import load_corpus
from aiayn.data.readers import ParallelCorpus
from aiayn.evaluate import looping, score, tokenizer_for
from aiayn.translation import load_translator

SETTINGS = ["1:0", "1:3", "1:4", "1:5", "1.1:0", "1.2:0"]


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--model", nargs="+", default=[], help="run directories or checkpoints")
    parser.add_argument("--test", default="multi30k:test_2016_flickr", help="the test set (a corpus spec)")
    parser.add_argument("--settings", nargs="+", default=SETTINGS, metavar="PENALTY:N",
                        help=f"repetition_penalty:no_repeat_ngram_size pairs (default: {' '.join(SETTINGS)})")
    parser.add_argument("--latency", type=int, default=0, metavar="N",
                        help="time N sentences one at a time under each setting instead")
    args = parser.parse_args()
    data_dir()
    settings = [(float(p), int(n)) for p, n in (s.split(":") for s in args.settings)]
    if args.smoke:
        models, test = [smoke_model()], "synthetic:reverse:val"
    else:
        if not args.model:
            parser.error("--model RUN [RUN ...] is needed (or --smoke)")
        models, test = args.model, args.test
    if args.latency:
        table = latencies(models, test, settings, 4 if args.smoke else args.latency, compile=not args.smoke)
        if args.record and not args.smoke:
            record(f"A lone sentence under each rule, {test}", table, path=detail("repetition"))
        return
    rows = ["| model | repetition_penalty | no_repeat_ngram_size | loops | BLEU | chrF | seconds |",
            "|---|---|---|---|---|---|---|"]
    for path in models:
        translator = load_translator(path, device="cpu")
        corpus = load_corpus(test, translator.src_lang, translator.tgt_lang)
        if args.smoke:
            corpus = ParallelCorpus(corpus.source[:40], corpus.target[:40], corpus.name)
        tokenize = tokenizer_for(translator.tgt_lang)
        for penalty, n in settings:
            start = time.perf_counter()
            found = [t.text for t in translator.translate(corpus.source, repetition_penalty=penalty,
                                                          no_repeat_ngram_size=n, progress=not args.smoke)]
            seconds = time.perf_counter() - start
            scores = score(found, corpus.target, tokenize)
            loops = sum(looping(t, tokenize) for t in found)
            rows.append(f"| {run_name(path)} | {penalty:g} | {n} | {loops} of {len(found)} | "
                        f"{scores.bleu:.2f} | {scores.chrf:.2f} | {seconds:.0f} |")
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.record and not args.smoke:
        record(f"Repetition loops on {test}", table, path=detail("repetition"))


def latencies(models: list, test: str, settings: list[tuple[float, int]], n: int,
              compile: bool = True) -> str:
    """Each model's lone sentences (compiled unless told not), every setting in turn on each, twice: p50
    and mean."""
    rows = ["| model | repetition_penalty | no_repeat_ngram_size | one sentence p50 | mean |",
            "|---|---|---|---|---|"]
    for path in models:
        translator = load_translator(path, device="cpu", compile=compile)
        sentences = load_corpus(test, translator.src_lang, translator.tgt_lang).source[:n]
        times: dict[tuple[float, int], list[float]] = {s: [] for s in settings}
        warm = min(10, n)
        for i, sentence in enumerate(sentences[:warm] + sentences * 2):
            for penalty, ngram in settings:
                start = time.perf_counter()
                translator.translate([sentence], repetition_penalty=penalty, no_repeat_ngram_size=ngram)
                if i >= warm:
                    times[(penalty, ngram)].append(time.perf_counter() - start)
        for (penalty, ngram), seconds in times.items():
            p50, mean = statistics.median(seconds) * 1e3, statistics.mean(seconds) * 1e3
            rows.append(f"| {run_name(path)} | {penalty:g} | {ngram} | {p50:.1f} ms | {mean:.1f} ms |")
            print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    return table


if __name__ == "__main__":
    main()
