"""A real file translated end to end, for `decode_speed.py --model RUN`: the headline speed.

Each system translates Multi30k's test_2016_flickr source (1,000 English sentences) with a trained
model exactly as a user would: `aiayn translate RUN --input FILE --output OUT`, in a process of its
own, with natural output lengths (the search stops at end of sentence), the command's own
sentence splitting, batching, tokenisation and detokenisation. Beam 4, plain length penalty 0.6.

Start-up is timed apart: the same command on an empty file (imports, reading the model; for the
compiled step, loading it from the cache happens at the first batch and is counted in the
translation). Translation = the whole process on the file, minus the median start-up. Rounds
alternate the systems, so that drifts in machine speed hit all alike; the median is reported.

The compiled step starts from an empty cache of its own: its first process compiles (reported as
"first run"), the later ones load: what `aiayn translate` without flags then does too ("aiayn
float32" is the eager search, `--no-compile`). CTranslate2 (the model exported by `aiayn export ctranslate2`,
run through `--engine ctranslate2`) is tried with each of its CPU settings (`CT2_SETTINGS`: its
GEMM backend, how its threads wait, one thread) on the whole file, and the fastest is kept.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = ("--beam-size", "4", "--length-penalty", "0.6", "--penalty-form", "plain")
SYSTEMS = {
    "aiayn float32": ("--no-compile",),
    "aiayn compiled": ("--compile",),  # what `aiayn translate` does by default once it is cached
    "aiayn int8": ("--int8", "--no-compile"),
    "aiayn int8 compiled": ("--int8", "--compile"),
    "ctranslate2 float32": ("--engine", "ctranslate2", "--compute-type", "float32"),
    "ctranslate2 int8": ("--engine", "ctranslate2", "--compute-type", "int8"),
}
CT2_SETTINGS = {  # name -> (environment, threads or None for as many as aiayn)
    "MKL (its default)": ({}, None),
    "oneDNN": ({"CT2_USE_MKL": "0"}, None),
    "oneDNN, spinning threads": ({"CT2_USE_MKL": "0", "OMP_WAIT_POLICY": "ACTIVE"}, None),
    "oneDNN, 1 thread": ({"CT2_USE_MKL": "0"}, 1),
}


def aiayn(*args: str, env: dict[str, str]) -> float:
    """Seconds the command took, start to end of its process; fails loudly if it fails."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "aiayn", *args], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"aiayn {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return seconds


def md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def run(model: str, source: list[str], threads: int, rounds: int, names: list[str],
        ct2_settings: tuple[str, ...] = tuple(CT2_SETTINGS)) -> list[str]:
    """Time each system (`SYSTEMS`), CTranslate2 at the fastest of `ct2_settings`; returns the
    table's rows (markdown)."""
    with tempfile.TemporaryDirectory() as work:
        work_ = Path(work)
        text, empty = work_ / "source.en", work_ / "empty.en"
        text.write_text("\n".join(source) + "\n")
        empty.write_text("")
        env = {**os.environ, "AIAYN_CACHE_DIR": str(work_ / "cache")}
        if any(name.startswith("ctranslate2") for name in names):
            aiayn("export", "ctranslate2", model, str(work_ / "ct2"), env=env)

        def command(name: str, source_file: Path, setting: str | None = None) -> tuple[list[str], dict]:
            extra, n = (CT2_SETTINGS[setting] if setting else ({}, None))
            path = str(work_ / "ct2") if name.startswith("ctranslate2") else model
            args = ["translate", path, *SYSTEMS[name], *FLAGS, "--threads", str(n or threads),
                    "--input", str(source_file), "--output", str(work_ / f"{name}.de")]
            return args, {**env, **extra}

        settings: dict[str, str | None] = {name: None for name in names}
        first_run: dict[str, float] = {}
        for name in names:
            if name.startswith("ctranslate2"):  # its fastest setting on this machine
                tried = {s: aiayn(*command(name, text, s)[0], env=command(name, text, s)[1])
                         for s in ct2_settings}
                settings[name] = min(tried, key=tried.get)
                print(f"{name}: " + ", ".join(f"{s} {t:.2f} s" for s, t in tried.items()), flush=True)
            elif "compiled" in name:  # fills the cache
                args, env_ = command(name, text)
                first_run[name] = aiayn(*args, env=env_)
                print(f"{name}: first run (compiles) {first_run[name]:.1f} s", flush=True)
        starts, totals, digests = {n: [] for n in names}, {n: [] for n in names}, {}
        for _ in range(rounds):
            for name in names:
                args, env_ = command(name, empty, settings[name])
                starts[name].append(aiayn(*args, env=env_))
                args, env_ = command(name, text, settings[name])
                totals[name].append(aiayn(*args, env=env_))
                digests[name] = md5(work_ / f"{name}.de")
            print("round:", ", ".join(f"{n} {totals[n][-1]:.2f} s" for n in names), flush=True)

    start = {n: statistics.median(starts[n]) for n in names}
    seconds = {n: statistics.median(totals[n]) - start[n] for n in names}
    rows = ["| system | setting | translation (s) | sentences/s | start-up (s) | first run (s) "
            "| aiayn float32 relative to it | output md5 |", "|---|---|---|---|---|---|---|---|"]
    for n in names:
        relative = f"{seconds[n] / seconds['aiayn float32']:.2f}x" if "aiayn float32" in seconds else ""
        rows.append(f"| {n} | {settings[n] or ''} | {seconds[n]:.2f} | {len(source) / seconds[n]:,.0f} | "
                    f"{start[n]:.2f} | {f'{first_run[n]:.1f}' if n in first_run else ''} | {relative} | "
                    f"{digests[n][:12]} |")
        print(rows[-1], flush=True)
    return rows
