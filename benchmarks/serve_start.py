"""`aiayn serve --compile` on a machine that has never compiled the model (an empty step cache): how
soon it is ready, how fast it answers while other processes compile its decoder steps, and when the
compiled steps take over.

    python benchmarks/serve_start.py --model runs/quickstart
    python benchmarks/serve_start.py --model runs/quickstart --record

The server starts in a process of its own with a new, empty `AIAYN_CACHE_DIR` (removed afterwards).
From its start: the seconds until `/ready` answers 200; then one-sentence `/v1/translate` requests,
one after another (Multi30k test_2016_flickr sentences), until its log says "compiled decoder steps
in use" (at most --wait seconds), and as many after. Targets (issue 71): ready within 10 s, each
answer while compiling within 1 s.

The server listens on 127.0.0.1 only and is sent a bounded number of requests.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import data_dir, detail, parser, record
from serve_load import _train_tiny

from aiayn.data.corpora import load_corpus

TAKEN_OVER = "compiled decoder steps in use"


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="runs/quickstart", help="the model to serve (default: runs/quickstart)")
    p.add_argument("--threads", type=int, default=2, help="the server's torch threads (default 2)")
    p.add_argument("--wait", type=float, default=600,
                   help="seconds to wait for the compiled steps to take over (default 600)")
    p.add_argument("--after", type=int, default=50, help="requests once they have taken over (default 50)")
    args = p.parse_args()
    with contextlib.ExitStack() as stack:
        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        if args.smoke:  # ready and answering eagerly; the compiles are not waited for
            model = str(work / "run")
            _train_tiny(model)
            sentences = load_corpus("synthetic:copy", "", "").source[:20]
            args.wait, args.after = 0, 0
        else:
            data_dir()
            model = args.model
            sentences = load_corpus("multi30k:test_2016_flickr", "en", "de").source
        measured = cold_start(model, sentences, args, work)
    text = _table(measured)
    print(text)
    if args.record:
        record("A server started on an empty step cache", text, path=detail("serve_start"))


def cold_start(model: str, sentences: list[str], args, work: Path) -> dict:
    """Start the server on an empty cache, time /ready, then requests until the steps take over."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache, log_path = work / "cache", work / "server.log"
    cache.mkdir(mode=0o700)
    command = [sys.executable, "-m", "aiayn", "serve", model, "--compile", "--host", "127.0.0.1",
               "--port", str(port), "--threads", str(args.threads), "--device", "cpu"]
    url, measured = f"http://127.0.0.1:{port}", {"while": [], "at": [], "after": []}  # at: when each ended
    with open(log_path, "w") as log:
        started = time.perf_counter()
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                  env={**os.environ, "AIAYN_CACHE_DIR": str(cache)})
    try:
        measured["ready"] = _ready(url, server, started) - started
        i = 0  # the log is read after each answer: when the steps took over, to an answer's time
        while TAKEN_OVER not in log_path.read_text() and time.perf_counter() - started < args.wait \
                or not measured["while"]:
            measured["while"].append(_translate(url, sentences[i % len(sentences)]))
            measured["at"].append(time.perf_counter() - started)
            i += 1
        if TAKEN_OVER in log_path.read_text():
            measured["taken over"] = time.perf_counter() - started
            later = [sentences[(i + k) % len(sentences)] for k in range(args.after)]
            measured["after"] = [_translate(url, sentence) for sentence in later]
        measured["log"] = log_path.read_text()
    finally:
        server.terminate()
        server.wait(60)
    return measured


def _ready(url: str, server: subprocess.Popen, started: float) -> float:
    while True:
        if server.poll() is not None or time.perf_counter() - started > 300:
            raise RuntimeError("the server did not get ready")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{url}/ready").status_code == 200:
                return time.perf_counter()
        time.sleep(0.05)


def _translate(url: str, sentence: str) -> float:
    began = time.perf_counter()
    answer = httpx.post(f"{url}/v1/translate", json={"text": sentence}, timeout=60)
    answer.raise_for_status()
    return time.perf_counter() - began


def _table(m: dict) -> str:
    def ms(xs: list[float], f) -> str:
        return f"{f(xs) * 1000:,.0f} ms" if xs else "-"

    taken = f"{m['taken over']:.1f} s" if "taken over" in m else "not within the wait"
    rows = ["| ready after (from the process's start) | answers while compiling: count, p50, max | "
            "compiled steps in use after | answers after: count, p50 |",
            "|---|---|---|---|",
            f"| {m['ready']:.1f} s | {len(m['while'])}, {ms(m['while'], statistics.median)}, "
            f"{ms(m['while'], max)} | {taken} | {len(m['after'])}, {ms(m['after'], statistics.median)} |"]
    slowest = sorted(zip(m["while"], m["at"], strict=True), reverse=True)[:5]
    rows.append("\nSlowest answers while compiling (ended at, from the start): "
                + ", ".join(f"{t * 1000:,.0f} ms ({at:.1f} s)" for t, at in slowest))
    said = [line for line in m["log"].splitlines()
            if line.startswith(("warmed up", "compiled decoder", "aiayn:"))]
    return "\n".join(rows) + "\n\nThe server's log:\n\n" + "\n".join(f"    {line}" for line in said)


if __name__ == "__main__":
    main()
