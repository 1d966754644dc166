"""Paragraphs against the same sentences one per line: the same translations, and the same speed.

    python benchmarks/paragraphs.py runs/quickstart          # test_2016_flickr, en->de
    python benchmarks/paragraphs.py --smoke                  # seconds: a tiny model (CI)

The test set's sentences that end with a full stop, "!" or "?" (a segmenter cannot find the end
of one that does not) are put together three at a time, as one paragraph ("S1 S2 S3") and as two
("S1 S2\\n\\nS3"). Each kind of text is translated by `Translator.translate`, cut into sentences;
the sentences are also translated one per line without cutting. Prints how many texts equal their
sentences' translations joined, and sentences per second of each, in one process, timed chunk by
chunk with the kinds alternating (robust to another process's load).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiayn.data.corpora import load_corpus
from aiayn.translation import load_translator

CHUNK = 32  # texts timed at a time


def texts_of(sentences: list[str]) -> dict[str, tuple[list[str], list[list[int]]]]:
    """Each kind of text, and which sentences each text holds."""
    groups = [list(range(i, i + 3)) for i in range(0, len(sentences) - 2, 3)]
    return {
        "one paragraph": ([" ".join(sentences[j] for j in g) for g in groups], groups),
        "two paragraphs": ([f"{sentences[a]} {sentences[b]}\n\n{sentences[c]}" for a, b, c in groups],
                           groups),
    }


def joined(kind: str, parts: list[str]) -> str:
    return " ".join(parts) if kind == "one paragraph" else f"{parts[0]} {parts[1]}\n\n{parts[2]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", help="a run directory or checkpoint")
    parser.add_argument("--test", default="multi30k:test_2016_flickr", help="test set (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each kind (default: %(default)s)")
    parser.add_argument("--smoke", action="store_true", help="a tiny model trained for seconds, 30 sentences")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model or (_tiny_model(Path(tmp)) if args.smoke else parser.error("give a MODEL"))
        translator = load_translator(model, device="cpu")
        if args.smoke:
            synthetic = load_corpus("synthetic:reverse:val", "", "").source[:30]
            sentences = [s[0].upper() + s[1:] + "?" for s in synthetic]
        else:
            source = load_corpus(args.test, translator.src_lang, translator.tgt_lang).source
            sentences = [s.strip() for s in source if s.strip()[-1:] in ".!?"]
        report(translator, sentences, 1 if args.smoke else args.repeats)


def report(translator, sentences: list[str], repeats: int) -> None:
    kinds = texts_of(sentences)
    n = 3 * len(next(iter(kinds.values()))[1])
    lines = sentences[:n]
    print(f"{translator.description}; {n} sentences ending with . ! or ?, 3 per text\n")
    one_by_one = [t.text for t in translator.translate(lines, split=False)]
    print("| texts | equal to their sentences' translations joined |")
    print("|---|---|")
    for kind, (texts, groups) in kinds.items():
        out = [t.text for t in translator.translate(texts)]
        same = sum(o == joined(kind, [one_by_one[j] for j in g]) for o, g in zip(out, groups, strict=True))
        print(f"| {kind} | {same} of {len(texts)} |")
    # Timed a chunk of CHUNK texts at a time, the kinds one after another in alternating order, so
    # that a busy moment of the machine (another process) falls on every kind alike; each kind's
    # time is the sum over chunks of its best of `repeats`.
    best: dict[str, list[float]] = {"one sentence per line": [], **{k: [] for k in kinds}}
    chunks = range(0, len(kinds["one paragraph"][0]), CHUNK)
    for c, start in enumerate(chunks):
        times: dict[str, list[float]] = {kind: [] for kind in best}
        for r in range(repeats):
            for kind in (list(best) if (c + r) % 2 == 0 else list(best)[::-1]):
                texts = (lines[3 * start:3 * (start + CHUNK)] if kind == "one sentence per line"
                         else kinds[kind][0][start:start + CHUNK])
                began = time.perf_counter()
                translator.translate(texts)
                times[kind].append(time.perf_counter() - began)
        for kind in best:
            best[kind].append(min(times[kind]))
    base = n / sum(best["one sentence per line"])
    print(f"\n| input | sentences/s (chunks of {3 * CHUNK} sentences, best of {repeats} each) "
          f"| against one per line |")
    print("|---|---|---|")
    for kind, times_ in best.items():
        speed = n / sum(times_)
        print(f"| {kind} | {speed:.1f} | {speed / base:.3f}x |")


def _tiny_model(tmp: Path) -> Path:
    run = tmp / "tiny"
    subprocess.run([sys.executable, "-m", "aiayn", "train", "--preset", "tiny", "--train",
                    "synthetic:reverse", "--max-steps", "5", "--batch-tokens", "512", "--out", str(run),
                    "--valid-every", "0"], check=True, capture_output=True)
    return run


if __name__ == "__main__":
    main()
