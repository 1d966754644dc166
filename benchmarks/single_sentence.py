"""One sentence at a time, for `decode_speed.py --model RUN --single`: the latency an application,
a server's lone client or a browser user sees.

Each system translates test_2016_flickr's English sentences one call per sentence, beam 4, in a
process of its own (this script, run with `--system`), text in and text out:
- aiayn through its Python API, `translator.translate([sentence], beam_size=4)`: as loaded with no
  options ("aiayn default": whatever `aiayn translate` does without flags), eager (`compile=False`),
  with the compiled step (`compile=True`), and int8 eager and compiled;
- CTranslate2 as its users call it, `translate_batch([pieces], beam_size=4)` (and aiayn's default
  `no_repeat_ngram_size=3`) on the model
  `aiayn export ctranslate2` wrote, with the SentencePiece model beside it tokenising and
  detokenising, at the fastest of its CPU settings (`real_file.CT2_SETTINGS`), float32 and int8.
The first `WARM_UP` sentences are translated untimed (the compiled step's loading, CTranslate2's
first allocations); then each sentence's wall-clock time is taken, and the median (p50) and 90th
percentile reported. Rounds alternate the systems, as in `real_file`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from real_file import CT2_SETTINGS, aiayn

WARM_UP = 10
BEAM = 4
LENGTH_PENALTY = 0.6
NO_REPEAT = 3  # aiayn's default no_repeat_ngram_size, given to CTranslate2 too: the same search
SYSTEMS = {  # name -> options of aiayn's load_translator, or the CTranslate2 compute type
    "aiayn default": {},
    "aiayn float32": {"compile": False},
    "aiayn compiled": {"compile": True},
    "aiayn int8": {"int8": True, "compile": False},
    "aiayn int8 compiled": {"int8": True, "compile": True},
    "ctranslate2 float32": "float32",
    "ctranslate2 int8": "int8",
}


def _aiayn_call(model: str, options: dict, threads: int):
    import torch

    import aiayn

    torch.set_num_threads(threads)
    translator = aiayn.load_translator(model, **options)
    config = {"beam_size": BEAM, "length_penalty": LENGTH_PENALTY, "penalty_form": "plain"}
    return lambda sentence: translator.translate([sentence], **config)[0].text


def _ct2_call(model: str, compute_type: str, threads: int):
    import ctranslate2
    import sentencepiece as spm

    from aiayn.tokenizer import Tokenizer

    translator = ctranslate2.Translator(model, device="cpu", compute_type=compute_type,
                                        intra_threads=threads)
    tokenizer = Tokenizer.load(model)  # the SentencePiece models the export holds, used directly
    source = spm.SentencePieceProcessor(model_proto=tokenizer.source_proto)
    target = spm.SentencePieceProcessor(model_proto=tokenizer.target_proto or tokenizer.source_proto)

    def call(sentence: str) -> str:
        pieces = source.encode(sentence, out_type=str)
        out = translator.translate_batch([pieces], beam_size=BEAM, length_penalty=LENGTH_PENALTY,
                                         max_decoding_length=len(pieces) + 51, no_repeat_ngram_size=NO_REPEAT)
        return target.decode(out[0].hypotheses[0])

    return call


def worker(system: str, model: str, sentences: list[str], threads: int) -> dict:
    """Per-sentence seconds of one system, after the warm-up, and its outputs."""
    kind = SYSTEMS[system]
    call = _ct2_call(model, kind, threads) if isinstance(kind, str) else _aiayn_call(model, kind, threads)
    for sentence in sentences[:WARM_UP]:
        call(sentence)
    times, outputs = [], []
    for sentence in sentences:
        start = time.perf_counter()
        outputs.append(call(sentence))
        times.append(time.perf_counter() - start)
    return {"times": times, "outputs": outputs}


def _in_process(system: str, model: str, sentences: list[str], threads: int, env: dict) -> dict:
    done = subprocess.run([sys.executable, __file__, "--system", system, "--model", model,
                           "--threads", str(threads)], input=json.dumps(sentences), env=env,
                          capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{system} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def run(model: str, source: list[str], threads: int, rounds: int, names: list[str],
        ct2_settings: tuple[str, ...] = tuple(CT2_SETTINGS)) -> list[str]:
    """The latency of each system (`SYSTEMS`) on `source`, one sentence a call; the table's rows. The
    compiled steps start from an empty cache of their own: the first process of each compiled system
    compiles what it needs (its time is reported), the later ones load it, as "aiayn default" does."""
    with tempfile.TemporaryDirectory() as work:
        base = {**os.environ, "AIAYN_CACHE_DIR": str(Path(work) / "cache")}  # every worker's
        ct2 = {}
        if any(n.startswith("ctranslate2") for n in names):
            aiayn("export", "ctranslate2", model, str(Path(work) / "ct2"), env=base)
        settings: dict[str, dict] = {n: {} for n in names}
        first_run: dict[str, float] = {}
        for name in sorted(names, key=lambda n: "compiled" not in n):  # compiled first: the default's cache
            if "compiled" in name:
                started = time.perf_counter()
                _in_process(name, model, source[:WARM_UP + 1], threads, base)
                first_run[name] = time.perf_counter() - started
                print(f"{name}: first run (compiles) {first_run[name]:.1f} s", flush=True)
            if name.startswith("ctranslate2"):  # its fastest setting here, on the first 30 sentences
                tried = {}
                for setting in ct2_settings:
                    extra, n = CT2_SETTINGS[setting]
                    got = _in_process(name, str(Path(work) / "ct2"), source[:30], n or threads,
                                      {**base, **extra})
                    tried[setting] = statistics.median(got["times"])
                best = min(tried, key=tried.get)
                settings[name] = {"setting": best, "env": CT2_SETTINGS[best][0],
                                  "threads": CT2_SETTINGS[best][1] or threads}
                print(f"{name}: " + ", ".join(f"{s} {t * 1e3:.1f} ms" for s, t in tried.items()), flush=True)
                ct2[name] = str(Path(work) / "ct2")
        times: dict[str, list[float]] = {n: [] for n in names}
        outputs: dict[str, list[str]] = {}
        for _ in range(rounds):
            for name in names:
                got = _in_process(name, ct2.get(name, model), source, settings[name].get("threads", threads),
                                  {**base, **settings[name].get("env", {})})
                times[name] += got["times"]
                outputs[name] = got["outputs"]
            print("round:", ", ".join(f"{n} p50 {statistics.median(times[n]) * 1e3:.1f} ms" for n in names),
                  flush=True)
    rows = ["| system | setting | p50 (ms) | p90 (ms) | first run (s) | speed relative to CTranslate2 "
            "of its type (p50) |", "|---|---|---|---|---|---|"]
    for n in names:
        p50, p90 = statistics.median(times[n]), statistics.quantiles(times[n], n=10)[-1]
        peer = "ctranslate2 int8" if "int8" in n else "ctranslate2 float32"
        relative = (f"{statistics.median(times[peer]) / p50:.2f}x" if peer in times and
                    not n.startswith("ctranslate2") else "")
        first = f"{first_run[n]:.1f}" if n in first_run else ""
        setting = settings[n].get("setting", "")
        rows.append(f"| {n} | {setting} | {p50 * 1e3:.1f} | {p90 * 1e3:.1f} | {first} | {relative} |")
        print(rows[-1], flush=True)
    same = [n for n in names if n in ("aiayn float32", "aiayn compiled", "aiayn default")]
    if len(same) > 1:
        print("float32 outputs equal:", all(outputs[n] == outputs[same[0]] for n in same), flush=True)
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", choices=SYSTEMS, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    json.dump(worker(args.system, args.model, json.loads(sys.stdin.read()), args.threads), sys.stdout)
