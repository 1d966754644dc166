"""One multilingual model through CTranslate2 and Argos Translate: the same outputs as aiayn's.

The model is exported once to CTranslate2 (`aiayn export ctranslate2`: its directions' pieces as a
target prefix) and as one Argos package per direction (`aiayn export argos`); argostranslate
installs the packages of the directions asked for (in a home of its own, no network) and translates
the first sentences of the test set in each, float32; CTranslate2 translates them through aiayn's
`--engine ctranslate2`. Each is counted against aiayn's own PyTorch search with the same settings
(Argos's beam and length penalty, plain form, at most 256 tokens).

    python benchmarks/multilingual_interop.py runs/multi30k-multilingual/averaged --directions en-de,de-en
    python benchmarks/multilingual_interop.py MODEL --record   # append to benchmarks/detail/multilingual.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import record  # noqa: E402

from aiayn.cli import main as aiayn  # noqa: E402
from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.interop import argos  # noqa: E402
from aiayn.translation import load_translator  # noqa: E402

DETAIL = Path(__file__).resolve().parent / "detail" / "multilingual.md"
# Installs every package given, then translates the JSON {direction: texts} on stdin.
ARGOS = """
import json, sys
from pathlib import Path
from argostranslate import package, translate
for path in sys.argv[1:]:
    package.install_from_path(Path(path))
out = {}
for direction, texts in json.load(sys.stdin).items():
    translation = translate.get_translation_from_codes(*direction.split("-"))
    out[direction] = [translation.translate(text) for text in texts]
print(json.dumps(out))
"""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a multilingual model (checkpoint or run directory)")
    p.add_argument("--directions", default="en-de,de-en", metavar="SRC-TGT,...",
                   help="directions to check (default: en-de,de-en)")
    p.add_argument("--test", default="multi30k:test_2016_flickr", metavar="SPEC",
                   help="a multi-way test set (default: multi30k:test_2016_flickr)")
    p.add_argument("--sentences", type=int, default=100, metavar="N", help="first N sentences (default: 100)")
    p.add_argument("--record", action="store_true", help=f"append the table to {DETAIL}")
    args = p.parse_args(argv)
    directions = [tuple(d.split("-")) for d in args.directions.split(",")]
    settings = {"beam_size": argos.BEAM_SIZE, "length_penalty": argos.LENGTH_PENALTY, "penalty_form": "plain",
                "max_output_len": 256}
    texts = {f"{s}-{t}": load_corpus(args.test, s, t).source[:args.sentences] for s, t in directions}
    rows = ["| direction | sentences | CTranslate2 float32 = aiayn | argostranslate float32 = aiayn |",
            "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as work_:
        work = Path(work_)
        for kind, out in (("ctranslate2", work / "ct2"), ("argos", work / "argos")):
            if aiayn(["export", kind, args.model, str(out)]):
                raise SystemExit(f"aiayn export {kind} {args.model} failed")
        packages = [work / "argos" / f"{s}_{t}.argosmodel" for s, t in directions]
        env = {**os.environ, "HOME": str(work), "XDG_DATA_HOME": str(work / "data"),
               "XDG_CACHE_HOME": str(work / "cache"), "ARGOS_CHUNK_TYPE": "SPACY",
               "ARGOS_COMPUTE_TYPE": "float32"}
        done = subprocess.run([sys.executable, "-c", ARGOS, *map(str, packages)], input=json.dumps(texts),
                              env=env, capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"argostranslate failed:\n{done.stderr[-3000:]}")
        theirs = json.loads(done.stdout)
        ours = load_translator(args.model, compile=False, **settings)
        ct2 = load_translator(work / "ct2", compute_type="float32", **settings)
        for (s, t), direction in zip(directions, texts, strict=True):
            mine = [x.text for x in ours.translate(texts[direction], source=s, target=t)]
            by_ct2 = [x.text for x in ct2.translate(texts[direction], source=s, target=t)]
            same_ct2 = sum(a == b for a, b in zip(mine, by_ct2, strict=True))
            same_argos = sum(a == b for a, b in zip(mine, theirs[direction], strict=True))
            n = len(mine)
            rows.append(f"| {s}->{t} | {n} | {same_ct2} of {n} | {same_argos} of {n} |")
            print(rows[-1], flush=True)
    if args.record:
        record(f"CTranslate2 and Argos Translate outputs against aiayn's: {args.model}", "\n".join(rows),
               f"Beam {argos.BEAM_SIZE}, length penalty {argos.LENGTH_PENALTY} (plain form), float32, the "
               f"first {args.sentences} sentences of {args.test}.", path=DETAIL)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
