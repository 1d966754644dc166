"""Load on `aiayn serve`: concurrent single-sentence clients against the server with batching across
requests, the same server translating one request at a time (--no-batching, as OpenNMT-py's,
LibreTranslate's and marian-server's do), and offline `Translator.translate` on the same
sentences: in one call (the ceiling, batches of 128 sorted by length) and in batches of as many
sentences as there are clients, in the order they come (the most a server's batches can hold).
Level by level, each system right after the other, so that a level's ratios do not take in the
machine's drift between minutes. Then, optionally, a soak at 32 clients that samples the server's
resident memory every 30 s.

    python benchmarks/serve_load.py --model runs/quickstart              # 1, 8, 32, 128 clients
    python benchmarks/serve_load.py --model runs/quickstart --soak-minutes 10 --record

Every server listens on 127.0.0.1 only; each level sends a fixed number of requests. The clients
are lean HTTP/1.1 keep-alive connections (`Connection`, 0.1 ms of CPU a request): the load
generator shares the machine's cores with the server, and a heavier client (httpx: 2.2 ms a
request) took a fifth of what the server could use at 32 clients (benchmarks/detail/serve_load.md).
Targets: at 32 and 128 clients, throughput >= 5x the one-at-a-time server and >= 0.7x the offline
ceiling with no errors; at 1 client, p50 latency <= the offline single-sentence time + 10 ms;
soak: resident memory grows < 5% from minute 2 to the end, no errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import torch
from common import data_dir, detail, parser, record

from aiayn.data.corpora import load_corpus
from aiayn.translation import load_translator


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="runs/quickstart", help="the model to serve (default: runs/quickstart)")
    p.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32, 128])
    p.add_argument("--requests", type=int, default=512, help="requests per level (default: 512)")
    p.add_argument("--threads", type=int, default=torch.get_num_threads(),
                   help="the server's torch threads (default: torch's, the CPUs or OMP_NUM_THREADS)")
    p.add_argument("--soak-minutes", type=float, default=0, help="soak at 32 clients (default: none)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    with contextlib.ExitStack() as stack:
        if args.smoke:
            model = stack.enter_context(tempfile.TemporaryDirectory()) + "/run"
            _train_tiny(model)
            sentences = load_corpus("synthetic:copy", "", "").source[:64]
            args.clients, args.requests = [1, 4], 16
        else:
            data_dir()
            model = args.model
            sentences = load_corpus("multi30k:test_2016_flickr", "en", "de").source
        rows, notes = run_levels(model, sentences, args)
        table = _table(rows)
        if args.soak_minutes:
            soak = run_soak(model, sentences, args.soak_minutes, args.threads)
            table += "\n\n" + soak
    print(table)
    print(notes)
    if args.record:
        record("Serving under load: batching across requests vs one at a time vs offline", table, notes,
               path=detail("serve_load"))


def run_levels(model: str, sentences: list[str], args) -> tuple[list[dict], str]:
    """Each client level in turn: the offline translator (one call, batches of as many sentences as
    clients, one sentence at a time), then the server with batching, then the one without, each
    right after the other. This machine's speed drifts by a fifth within minutes
    (benchmarks/detail/serve_load.md), so a level's ratios come from measurements seconds apart."""
    translator = load_translator(model, device="cpu", threads=args.threads)
    translator.translate(sentences[:64])  # warm
    wanted = [sentences[i % len(sentences)] for i in range(args.requests)]
    levels = []
    with serve(model, args.threads, True) as batched, serve(model, args.threads, False) as one_at_a_time:
        for clients in args.clients:
            level = {"clients": clients, "ceiling": _offline(translator, wanted, None),
                     "single": _singles(translator, sentences[:50])}
            if clients > 1:
                level["alike"] = _offline(translator, wanted, clients)
            level["on"] = asyncio.run(load(batched, wanted, clients))
            level["off"] = asyncio.run(load(one_at_a_time, wanted, clients))
            levels.append(level)
    rows = []
    for level in levels:
        c = level["clients"]
        rows.append({"system": "offline Translator.translate (ceiling)", "clients": c, **level["ceiling"]})
        if "alike" in level:
            rows.append({"system": f"offline Translator.translate, batches of {c} as they come", "clients": c,
                         **level["alike"]})
        rows.append({"system": "aiayn serve", "clients": c, **level["on"]})
        rows.append({"system": "aiayn serve --no-batching", "clients": c, **level["off"]})
    return rows, _verdicts(levels)


def _offline(translator, sentences: list[str], batch: int | None) -> dict:
    """`Translator.translate` on `sentences`: in one call (batches of 128 sorted by length), or in
    batches of `batch` in the order they come (the most a server with that many clients can form)."""
    started, cpu = time.perf_counter(), time.process_time()
    step = batch or len(sentences)
    done = [t for i in range(0, len(sentences), step) for t in translator.translate(sentences[i:i + step])]
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"sent_s": len(sentences) / seconds, "tok_s": sum(len(t.tokens) for t in done) / seconds,
            "p50": None, "p95": None, "p99": None, "errors": 0, "cpu": cpu / len(sentences)}


def _singles(translator, sentences: list[str]) -> dict:
    """One sentence at a time: the median seconds, and sentences per second."""
    seconds = []
    for s in sentences:
        started = time.perf_counter()
        translator.translate([s])
        seconds.append(time.perf_counter() - started)
    return {"median": statistics.median(seconds), "sent_s": len(seconds) / sum(seconds)}


async def load(url: str, sentences: list[str], clients: int) -> dict:
    """Send each sentence as one request from `clients` concurrent clients; -> throughput, latency."""
    queue: asyncio.Queue[str] = asyncio.Queue()
    for s in sentences:
        queue.put_nowait(s)
    latencies, errors, output_tokens = [], 0, 0
    before, cpu = await _tokens_so_far(url), _cpu_s(server_pids[url])

    async def client() -> None:
        nonlocal errors
        async with Connection(url) as http:
            while not queue.empty():
                sentence = queue.get_nowait()
                started = time.perf_counter()
                status = await http.post("/v1/translate", {"text": sentence})
                latencies.append(time.perf_counter() - started)
                errors += status != 200

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    cpu = _cpu_s(server_pids[url]) - cpu  # before the next request: the server's own CPU time
    output_tokens = await _tokens_so_far(url) - before
    q = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else latencies * 99
    return {"sent_s": len(sentences) / wall, "tok_s": output_tokens / wall, "p50": q[49], "p95": q[94],
            "p99": q[98], "errors": errors, "cpu": cpu / len(sentences)}


def run_soak(model: str, sentences: list[str], minutes: float, threads: int) -> str:
    """32 clients for `minutes`; the server's resident memory every 30 s."""
    samples, errors, answered = [], 0, 0
    with serve(model, threads, True) as url:
        pid = server_pids[url]
        end = time.monotonic() + minutes * 60

        async def soak() -> None:
            nonlocal errors, answered
            async def client(i: int) -> None:
                nonlocal errors, answered
                async with Connection(url) as http:
                    n = i
                    while time.monotonic() < end:
                        text = sentences[n % len(sentences)]
                        errors += await http.post("/v1/translate", {"text": text}) != 200
                        answered += 1
                        n += 32

            async def sampler() -> None:
                started = time.monotonic()
                while time.monotonic() < end:
                    samples.append((time.monotonic() - started, _rss_mib(pid)))
                    await asyncio.sleep(min(30, max(end - time.monotonic(), 0)))
                samples.append((time.monotonic() - started, _rss_mib(pid)))

            await asyncio.gather(sampler(), *(client(i) for i in range(32)))

        asyncio.run(soak())
    after_2 = [rss for t, rss in samples if t >= 120] or [samples[-1][1]]
    growth = (samples[-1][1] - after_2[0]) / after_2[0]
    lines = ["| minute | server resident memory (MiB) |", "|---|---|"]
    lines += [f"| {t / 60:.1f} | {rss:,.0f} |" for t, rss in samples]
    verdict = "met" if growth < 0.05 and errors == 0 else "not met"
    lines.append(f"\nSoak: {minutes:g} min at 32 clients, {answered:,} requests, {errors} errors; resident "
                 f"memory {growth:+.1%} from minute 2 to the end (target < 5%, no errors: {verdict}).")
    return "\n".join(lines)


class Connection:
    """One client's keep-alive HTTP/1.1 connection to `url` (http://host:port), lean on CPU: a request
    is one write, its answer a read of the head and of Content-Length bytes. A request that fails on
    the wire answers status 0 and the next one connects again."""

    def __init__(self, url: str, timeout: float = 300) -> None:
        host, _, port = url.removeprefix("http://").rstrip("/").rpartition(":")
        self.host, self.port, self.timeout = host, int(port), timeout
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __aenter__(self) -> Connection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None

    async def post(self, path: str, payload: object) -> int:
        """POST `payload` as JSON to `path`; -> the answer's status (its body is read, then dropped).
        A kept-alive connection that the server closed meanwhile is opened again, once."""
        body = json.dumps(payload).encode()
        return await self._send((f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: "
                                 f"application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)

    async def get(self, path: str) -> int:
        """GET `path`; -> the answer's status."""
        return await self._send(f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode())

    async def _send(self, request: bytes) -> int:
        reused = self.streams is not None
        while True:
            try:
                return await asyncio.wait_for(self._exchange(request), self.timeout)
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as e:
                self.close()
                unanswered = isinstance(e, ConnectionError) or (
                    isinstance(e, asyncio.IncompleteReadError) and not e.partial)
                if not (reused and unanswered):
                    return 0
                reused = False  # closed by the server while idle: open it again, once

    async def _exchange(self, request: bytes) -> int:
        if self.streams is None:
            self.streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self.streams
        writer.write(request)
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = {name.strip().lower(): value.strip()
                  for name, _, value in (line.partition(":") for line in head[1:])}
        if "content-length" not in fields:  # a chunked answer: not what the server sends
            raise RuntimeError(f"an answer without Content-Length from {self.host}:{self.port}: {head[0]}")
        await reader.readexactly(int(fields["content-length"]))
        if fields.get("connection", "").lower() == "close":
            self.close()
        return int(head[0].split()[1])


@contextlib.contextmanager
def serve(model: str | list[str], threads: int, batching: bool, options: tuple[str, ...] = (),
          log: IO | None = None) -> Iterator[str]:
    """`aiayn serve` of a model (or several) in a process of its own on a free port of 127.0.0.1
    (`log`: where its output goes), once ready; -> its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    models = [model] if isinstance(model, str) else list(model)
    command = [sys.executable, "-m", "aiayn", "serve", *models, "--host", "127.0.0.1", "--port", str(port),
               "--threads", str(threads), "--device", "cpu", "--max-queue", "100000"]
    server = subprocess.Popen(command + ([] if batching else ["--no-batching"]) + list(options), stdout=log,
                              stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start: {' '.join(command)}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/ready").status_code == 200:
                    break
            time.sleep(0.2)
        server_pids[url] = server.pid
        yield url
    finally:
        server.terminate()
        server.wait(60)


server_pids: dict[str, int] = {}


def _cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far, all its threads, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _tokens_so_far(url: str) -> float:
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{url}/metrics")).text
    return next(float(line.split()[-1]) for line in text.splitlines()
                if line.startswith("aiayn_output_tokens_total"))


def _table(rows: list[dict]) -> str:
    ms = lambda x: "-" if x is None else f"{x * 1000:,.0f}"  # noqa: E731
    lines = ["| system | clients | sentences/s | output tokens/s | p50 ms | p95 ms | p99 ms | errors "
             "| CPU ms per sentence |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['system']} | {r['clients']} | {r['sent_s']:,.1f} | {r['tok_s']:,.0f} | {ms(r['p50'])} | "
              f"{ms(r['p95'])} | {ms(r['p99'])} | {r['errors']} | {r['cpu'] * 1000:,.1f} |" for r in rows]
    return "\n".join(lines)


def _verdicts(levels: list[dict]) -> str:
    ceilings = [level["ceiling"]["sent_s"] for level in levels]
    notes = [f"Offline ceiling {min(ceilings):,.1f}-{max(ceilings):,.1f} sentences/s. Each level's ratios "
             "are against the offline translator measured just before it. CPU per sentence: the server "
             "process's own (the load generator's share of the machine left out) against the offline "
             "translator's; then that ratio's two parts: the server against the offline translator given "
             "batches of as many sentences as there are clients, in the order they come (the server's own "
             "cost), and those batches against the ceiling's."]
    for level in levels:
        c, on, off, ceiling = level["clients"], level["on"], level["off"], level["ceiling"]
        ratio = on["cpu"] / ceiling["cpu"]
        line = (f"- {c} client{'s' if c > 1 else ''}: the server's CPU per sentence {ratio:.2f}x the "
                "offline translator's")
        if c == 32:
            line += f" (target <= 1.2x: {'met' if ratio <= 1.2 else 'not met'})"
        if "alike" in level:
            alike = level["alike"]
            batching = alike["sent_s"] / level["single"]["sent_s"]
            line += (f" = {on['cpu'] / alike['cpu']:.2f}x the offline translator's in batches of {c} x "
                     f"{alike['cpu'] / ceiling['cpu']:.2f}x; those batches make {batching:.2f}x its "
                     "sentences/s one at a time")
        notes.append(line + ".")
        if c == 1:
            p50, most = on["p50"], level["single"]["median"] + 0.010
            notes.append(f"  p50 {p50 * 1000:,.1f} ms against the offline single sentence + 10 ms = "
                         f"{most * 1000:,.1f} ms ({'met' if p50 <= most else 'not met'}).")
        else:
            ratio_off, ratio_ceiling = on["sent_s"] / off["sent_s"], on["sent_s"] / ceiling["sent_s"]
            met = ratio_off >= 5 and ratio_ceiling >= 0.7 and on["errors"] == 0
            verdict = f" (target >= 5x and >= 0.7x, no errors: {'met' if met else 'not met'})"
            notes.append(f"  {ratio_off:.2f}x the one-at-a-time server, {ratio_ceiling:.2f}x the offline "
                         f"ceiling, {on['errors']} errors{verdict if c in (32, 128) else ''}.")
    return "\n".join(notes)


def _train_tiny(out: str) -> None:
    from aiayn.training import train_model

    with contextlib.redirect_stdout(sys.stderr):
        train_model(out, preset="tiny", train="synthetic:copy", max_steps=5, batch_tokens=512, valid_every=0,
                    bleu_every=0, threads=1)


if __name__ == "__main__":
    main()
