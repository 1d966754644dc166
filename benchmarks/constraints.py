"""Constrained beam search and glossaries, measured as Post & Vilar (2018) do.

Constraints: from each test sentence's reference, one phrase of 1-3 words drawn at random (then
three, apart), given as constraints of its source: how many appear in the output, BLEU with and
without, and the time of each run side by side (beam 4, the same translator).

Glossary: 50 entries, source word -> target word, the pairs of words that co-occur most in the
training data by the Dice coefficient (2 c(s, t) / (c(s) + c(t)) over sentence pairs; words of
4 letters or more, each source word once, each pair seen 20 times or more); on the test set, the
term success rate (a sentence with a source term whose output has its target term) and BLEU,
with and without the glossary.

Prefixes: the first 200 sentences, each with the first 1-3 words of its reference as a prefix, and
with 3 alternatives: how many begin with it token for token, and whether the alternatives are
distinct and ordered by score.

    python benchmarks/constraints.py runs/multi30k-ende/averaged
    python benchmarks/constraints.py MODEL --limit 200 --record   # detail/constraints.md
"""

from __future__ import annotations

import argparse
import collections
import random
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import record  # noqa: E402

from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.evaluate import score, tokenizer_for  # noqa: E402
from aiayn.text.glossary import Glossary  # noqa: E402
from aiayn.translation import load_translator  # noqa: E402

DETAIL = Path(__file__).resolve().parent / "detail" / "constraints.md"
EDGE = ".,;:!?\"'()"


def phrases(reference: str, count: int, rng: random.Random) -> list[str]:
    """`count` phrases of 1-3 words of `reference`, apart from each other (fewer if it is short)."""
    words = reference.split()
    chosen: list[str] = []
    taken: set[int] = set()
    for _ in range(20 * count):
        if len(chosen) == count:
            break
        n = rng.randint(1, 3)
        if n > len(words):
            continue
        start = rng.randrange(len(words) - n + 1)
        span = set(range(start - 1, start + n + 1))
        phrase = " ".join(words[start:start + n]).strip(EDGE)
        if phrase and not span & taken:
            chosen.append(phrase)
            taken |= set(range(start, start + n))
    return chosen


def dice_glossary(train, size: int, least: int = 20) -> Glossary:
    """The `size` source -> target word pairs that co-occur most by the Dice coefficient."""
    def words(line: str) -> set[str]:
        return {w for w in re.findall(r"\w+", line) if len(w) >= 4 and w.isalpha()}

    src_count: collections.Counter = collections.Counter()
    tgt_count: collections.Counter = collections.Counter()
    both: collections.Counter = collections.Counter()
    for s, t in zip(train.source, train.target, strict=True):
        ws, wt = words(s), words(t)
        src_count.update(ws)
        tgt_count.update(wt)
        both.update((a, b) for a in ws for b in wt)
    ranked = sorted(((2 * c / (src_count[a] + tgt_count[b]), a, b) for (a, b), c in both.items()
                     if c >= least), reverse=True)
    entries, seen = [], set()
    for _, a, b in ranked:
        if a not in seen:
            entries.append((a, b))
            seen.add(a)
        if len(entries) == size:
            break
    return Glossary.of(entries)


def term_success(glossary: Glossary, sources: list[str], outputs: list[str]) -> tuple[int, int]:
    """(terms whose target appears in the output, terms found in the sources), whole words."""
    met = total = 0
    for source, output in zip(sources, outputs, strict=True):
        for term in glossary.targets(source):
            total += 1
            met += bool(re.search(rf"(?<!\w){re.escape(term)}(?!\w)", output))
    return met, total


def prefixes(translator, sources: list[str], references: list[str], rng: random.Random,
             alternatives: int = 3) -> list[str]:
    """Each sentence translated with the first 1-3 words of its reference as a prefix, and its
    `alternatives` ways to go on: -> table rows: how many begin with their prefix token for token,
    and how many sentences' alternatives are distinct and ordered by score."""
    begins = [" ".join(r.split()[:rng.randint(1, 3)]) for r in references]
    wanted = translator.tokenizer.encode(begins, side="target")
    best = translator.translate(sources, prefix=begins)
    branched = translator.translate(sources, prefix=begins, alternatives=alternatives)
    starts = sum(t.tokens[:len(w)] == w for t, w in zip(best, wanted, strict=True))
    every = [[t, *t.alternatives] for t in branched]
    all_start = sum(all(a.tokens[:len(w)] == w for a in ts) for ts, w in zip(every, wanted, strict=True))
    distinct = sum(len({tuple(a.tokens) for a in ts}) == len(ts) == alternatives for ts in every)
    ordered = sum(all(x.score >= y.score for x, y in zip(ts, ts[1:], strict=False)) for ts in every)
    n = len(sources)
    return [f"| prefixes (first 1-3 words of the reference), {n} sentences | sentences |", "|---|---|",
            f"| best translation begins with its prefix, token for token | {starts} of {n} |",
            f"| all {alternatives} alternatives begin with it | {all_start} of {n} |",
            f"| {alternatives} alternatives, all distinct | {distinct} of {n} |",
            f"| alternatives ordered by score | {ordered} of {n} |"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a trained model (checkpoint or run directory)")
    p.add_argument("--test", default="multi30k:test_2016_flickr", metavar="SPEC")
    p.add_argument("--train", default="multi30k:train", metavar="SPEC",
                   help="where the glossary is drawn from")
    p.add_argument("--beam-size", type=int, default=4, metavar="INT")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                   help="compiled decoder steps for every run (default: eager, as a first run is)")
    p.add_argument("--limit", type=int, default=0, metavar="N", help="only the first N sentences (0: all)")
    p.add_argument("--seed", type=int, default=1, metavar="INT")
    p.add_argument("--record", action="store_true", help=f"append the tables to {DETAIL}")
    args = p.parse_args(argv)

    translator = load_translator(args.model, device="cpu", beam_size=args.beam_size, split=False,
                                 compile=args.compile)
    src, tgt = translator.src_lang, translator.tgt_lang
    corpus = load_corpus(args.test, src, tgt)
    sources, references = corpus.source, corpus.target
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    bleu_of = tokenizer_for(tgt)
    # untimed, both searches once: every row count of each compiled (--compile), and memory warm
    translator.translate(sources)
    translator.translate(sources, constraints=[phrases(r, 1, random.Random(0)) for r in references])

    def run(**steer) -> tuple[list[str], float]:
        start = time.perf_counter()
        out = [t.text for t in translator.translate(sources, **steer)]
        return out, time.perf_counter() - start

    plain, plain_s = run()
    rows = ["| run | constraints appearing | BLEU | chrF | seconds | time / unconstrained |",
            "|---|---|---|---|---|---|"]
    base = score(plain, references, bleu_of)
    rows.append(f"| unconstrained | - | {base.bleu:.2f} | {base.chrf:.2f} | {plain_s:.1f} | 1.00x |")
    for count in (1, 3):
        rng = random.Random(args.seed)
        asked = [phrases(r, count, rng) for r in references]
        out, seconds = run(constraints=asked)
        appear = sum(c in o for cs, o in zip(asked, out, strict=True) for c in cs)
        total = sum(len(cs) for cs in asked)
        s = score(out, references, bleu_of)
        rows.append(f"| {count} per sentence | {appear:,} of {total:,} ({appear / total:.1%}) | "
                    f"{s.bleu:.2f} | {s.chrf:.2f} | {seconds:.1f} | {seconds / plain_s:.2f}x |")
        print(rows[-1], flush=True)

    glossary = dice_glossary(load_corpus(args.train, src, tgt), 50)
    with_terms, terms_s = run(glossary=glossary)
    g = score(with_terms, references, bleu_of)
    before, after = term_success(glossary, sources, plain), term_success(glossary, sources, with_terms)
    def rate(met: tuple[int, int]) -> str:
        return f"{met[0]:,} of {met[1]:,} ({met[0] / max(met[1], 1):.1%})"

    rows += ["", "| glossary of 50 (Dice) | term success | BLEU | chrF | seconds |", "|---|---|---|---|---|",
             f"| without | {rate(before)} | {base.bleu:.2f} | {base.chrf:.2f} | {plain_s:.1f} |",
             f"| with | {rate(after)} | {g.bleu:.2f} | {g.chrf:.2f} | {terms_s:.1f} |"]
    rows += ["", *prefixes(translator, sources[:200], references[:200], random.Random(args.seed))]
    table = "\n".join(rows)
    print(table)
    print("glossary:", ", ".join(f"{a}={b}" for a, b in glossary.entries))
    if args.record:
        DETAIL.parent.mkdir(exist_ok=True)
        notes = "Glossary entries: " + ", ".join(f"{a} -> {b}" for a, b in glossary.entries) + "."
        record(f"Constraints and a glossary, {args.test} {src}->{tgt}, beam {args.beam_size}"
               f"{', compiled' if args.compile else ''}", table, notes, path=DETAIL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
