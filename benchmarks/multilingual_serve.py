"""One multilingual model served, against the bilingual models it replaces: the pairs a
LibreTranslate client is offered, a translation in each, and the server's resident memory.

    python benchmarks/multilingual_serve.py runs/multi30k-multilingual/averaged \\
        --bilingual runs/multi30k-ende/averaged runs/multi30k-deen/averaged ... --record
    python benchmarks/multilingual_serve.py MODEL --zero-shot      # the untrained directions too
    python benchmarks/multilingual_serve.py --smoke

Each set of models is served by `aiayn serve` in a process of its own on 127.0.0.1 (two threads).
Once it is ready, libretranslatepy (LibreTranslate's own Python client, as an application uses it)
lists the languages and their targets, and translates the first sentence of the test set in
every pair listed (source and target read from the multi-way test set). The server's resident
memory (VmRSS) is read when it is ready and again after those translations.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path

from common import data_dir, parser, record
from libretranslatepy import LibreTranslateAPI
from serve_load import _rss_mib, serve, server_pids

from aiayn.data.corpora import load_corpus

DETAIL = Path(__file__).resolve().parent / "detail" / "multilingual.md"


def served(models: list[str], test: str, options: tuple[str, ...]) -> dict:
    """Serve `models`; -> the pairs offered, each pair's translation of its test sentence, and the
    server's memory when ready and after translating."""
    with serve(models, 2, True, options) as url:
        pid = server_pids[url]
        ready = _rss_mib(pid)
        client = LibreTranslateAPI(url + "/")
        pairs = [(language["code"], target) for language in client.languages()
                 for target in language["targets"] if target != language["code"]]
        outputs = {}
        for src, tgt in pairs:
            sentence = load_corpus(test, src, tgt).source[0]
            outputs[(src, tgt)] = (sentence, client.translate(sentence, src, tgt, timeout=300))
        return {"pairs": pairs, "outputs": outputs, "ready": ready, "after": _rss_mib(pid)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("model", nargs="?", help="the multilingual model (checkpoint or run directory)")
    p.add_argument("--bilingual", nargs="*", default=[], metavar="MODEL",
                   help="the bilingual models to serve together, against it (default: none)")
    p.add_argument("--test", default="multi30k:test_2016_flickr", metavar="SPEC",
                   help="a multi-way test set: each pair's sentence (default: multi30k:test_2016_flickr)")
    p.add_argument("--zero-shot", action="store_true",
                   help="serve the multilingual model's untrained directions too (aiayn serve --zero-shot)")
    args = p.parse_args()
    if not args.smoke and not args.model:
        p.error("give the multilingual model, or --smoke")
    data_dir()
    with contextlib.ExitStack() as stack:
        if args.smoke:  # a tiny model told its target, one update on 20 multi-way captions
            work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            args.model, args.bilingual, args.test = _train_tiny(work), [], str(work / "val")
        setups = [("one multilingual model", [args.model], ("--zero-shot",) if args.zero_shot else ())]
        if args.bilingual:
            setups.append((f"{len(args.bilingual)} bilingual models", args.bilingual, ()))
        rows = ["| served | pairs offered | translated | memory when ready (MiB) | after translating (MiB) |",
                "|---|---|---|---|---|"]
        offered = []
        for name, models, options in setups:
            got = served(models, args.test, options)
            done = sum(1 for _, out in got["outputs"].values() if out.strip())
            rows.append(f"| {name} | {len(got['pairs'])} | {done} | {got['ready']:,.0f} | "
                        f"{got['after']:,.0f} |")
            for (src, tgt), (sentence, out) in got["outputs"].items():
                print(f"{name}: {src}->{tgt}: {sentence!r} -> {out!r}", file=sys.stderr)
            offered.append(f"{name}: " + ", ".join(f"{s}->{t}" for s, t in got["pairs"]))
        table = "\n".join(rows)
        print(table)
        if args.record and not args.smoke:
            record("Serving one multilingual model against bilingual ones", table,
                   f"Multilingual: {args.model}; bilingual: {', '.join(args.bilingual) or 'none'}. "
                   "Pairs offered to libretranslatepy: " + "; ".join(offered) + ".", path=DETAIL)


def _train_tiny(work: Path) -> str:
    from aiayn.cli import main as aiayn
    from aiayn.data import multi30k

    for lang in ("en", "de", "cs"):
        lines = multi30k.load("val", lang, "en").source[:20]
        (work / f"val.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    run = work / "run"
    with contextlib.redirect_stdout(sys.stderr):
        assert aiayn(["train", "--preset", "tiny", "--vocab-size", "600", "--train", str(work / "val"),
                      "--valid", "", "--pairs", "en-de,de-en,en-cs", "--max-steps", "1", "--threads", "1",
                      "--out", str(run)]) == 0
    return str(run)


if __name__ == "__main__":
    main()
