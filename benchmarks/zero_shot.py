"""Zero-shot translation against pivoting, with one multilingual model.

A multilingual model trained on directions to and from English (recipes/multi30k-multilingual.toml)
is asked for directions it never saw, de->fr say, in two ways: zero-shot (the source with the
target's piece, one search) and through English (de->en, then en->fr: two searches, as Argos
Translate pivots). Both are scored with sacreBLEU on a multi-way test set.

    python benchmarks/zero_shot.py runs/multi30k-multilingual/averaged --directions de-fr,fr-de,de-cs
    python benchmarks/zero_shot.py MODEL --record     # append the table to benchmarks/detail/multilingual.md
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import record  # noqa: E402

from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.evaluate import score, tokenizer_for  # noqa: E402
from aiayn.translation import load_translator  # noqa: E402

DETAIL = Path(__file__).resolve().parent / "detail" / "multilingual.md"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a multilingual model (checkpoint or run directory)")
    p.add_argument("--directions", default="de-fr,fr-de,de-cs", metavar="SRC-TGT,...",
                   help="directions the model was not trained on (default: de-fr,fr-de,de-cs)")
    p.add_argument("--via", default="en", metavar="LANG", help="the pivot language (default: en)")
    p.add_argument("--test", default="multi30k:test_2016_flickr", metavar="SPEC",
                   help="a multi-way test set (default: multi30k:test_2016_flickr)")
    p.add_argument("--beam-size", type=int, default=4, metavar="INT", help="beam width (default: 4)")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="only the first N sentences (0: all)")
    p.add_argument("--record", action="store_true", help=f"append the table to {DETAIL}")
    args = p.parse_args(argv)

    translator = load_translator(args.model, device="cpu", beam_size=args.beam_size, split=False)
    rows = ["| direction | zero-shot BLEU | chrF | s | through " + args.via + " BLEU | chrF | s |",
            "|---|---|---|---|---|---|---|"]
    for pair in args.directions.split(","):
        src, tgt = pair.split("-")
        corpus = load_corpus(args.test, src, tgt)
        sources, references = corpus.source, corpus.target
        if args.limit:
            sources, references = sources[: args.limit], references[: args.limit]
        start = time.perf_counter()
        direct = [t.text for t in translator.towards(src, tgt, zero_shot=True).translate(sources)]
        direct_s = time.perf_counter() - start
        start = time.perf_counter()
        middle = [t.text for t in translator.towards(src, args.via).translate(sources)]
        pivoted = [t.text for t in translator.towards(args.via, tgt).translate(middle)]
        pivot_s = time.perf_counter() - start
        a, b = score(direct, references, tokenizer_for(tgt)), score(pivoted, references, tokenizer_for(tgt))
        rows.append(f"| {src}->{tgt} | {a.bleu:.2f} | {a.chrf:.2f} | {direct_s:.0f} | {b.bleu:.2f} | "
                    f"{b.chrf:.2f} | {pivot_s:.0f} |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.record:
        DETAIL.parent.mkdir(exist_ok=True)
        record(f"Zero-shot against pivoting through {args.via}, {args.test}", table, path=DETAIL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
