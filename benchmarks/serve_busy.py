"""`aiayn serve` under odd and heavy requests: is the event loop free while a large file is being
translated, and does a soak of mixed LibreTranslate traffic with clients hanging up stay clean?

    python benchmarks/serve_busy.py --model runs/quickstart            # both parts
    python benchmarks/serve_busy.py --model runs/quickstart --part busy --html-mib 1

busy: the server idle, then while it translates a large .html file (Multi30k sentences in
paragraphs with inline tags, posted to /translate_file), the same probes: GET /health every 20 ms
(its p99) and one-sentence /v1/translate requests one after another (their median). Targets:
/health p99 within 50 ms, a sentence's median latency within 2x of the idle server's.

soak: mixed LibreTranslate /translate requests (a sentence, a paragraph, an HTML snippet, a list of
sentences) from 16 clients, a tenth of them hanging up before their answer; the server's resident
memory is sampled every 5 s and its log read afterwards. Targets: memory flat (the median of the
run's last quarter within 5% of its second quarter's; the first is the allocator filling its
caches), no 5xx, no traceback or "never retrieved" in the log.

Every server listens on 127.0.0.1 only, and each part sends a bounded number of requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import data_dir, parser, record
from serve_load import Connection, _rss_mib, _train_tiny, serve, server_pids

from aiayn.data.corpora import load_corpus

RUNS = Path(__file__).resolve().parent / "detail" / "serve_busy.md"  # each run, in full


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--model", default="runs/quickstart", help="the model to serve (default: runs/quickstart)")
    p.add_argument("--part", choices=("busy", "soak", "both"), default="both")
    p.add_argument("--html-mib", type=float, default=1.0, help="the busy part's .html file, MiB (default 1)")
    p.add_argument("--probe-seconds", type=float, default=30, help="each busy window's length (default 30)")
    p.add_argument("--requests", type=int, default=2000, help="the soak's requests (default 2,000)")
    p.add_argument("--threads", type=int, default=2, help="the server's torch threads (default 2)")
    args = p.parse_args()
    with contextlib.ExitStack() as stack:
        if args.smoke:
            model = stack.enter_context(tempfile.TemporaryDirectory()) + "/run"
            _train_tiny(model)
            sentences = load_corpus("synthetic:copy", "", "").source[:200]
            args.html_mib, args.probe_seconds, args.requests = 0.02, 1, 40
        else:
            data_dir()
            model = args.model
            sentences = load_corpus("multi30k:train", "en", "de").source
        sections = []
        if args.part in ("busy", "both"):
            sections.append(busy(model, sentences, args))
        if args.part in ("soak", "both"):
            sections.append(soak(model, sentences, args, stack.enter_context(tempfile.TemporaryDirectory())))
    text = "\n\n".join(sections)
    print(text)
    if args.record:
        RUNS.parent.mkdir(exist_ok=True)
        record("The server under odd and heavy requests", text, path=RUNS)


def page(sentences: list[str], mib: float) -> bytes:
    """An HTML page of about `mib` MiB: paragraphs of three sentences, every fifth word in <b>."""
    rng, parts, size = random.Random(0), ["<!DOCTYPE html>\n<html><body>\n"], 0
    while size < mib * (1 << 20):
        chosen = [rng.choice(sentences) for _ in range(3)]
        words = " ".join(chosen).split()
        text = " ".join(f"<b>{w}</b>" if i % 5 == 4 else w for i, w in enumerate(words))
        parts.append(f"<p>{text}</p>\n")
        size += len(parts[-1])
    return ("".join(parts) + "</body></html>\n").encode()


async def probe(url: str, seconds: float, sentences: list[str], until: asyncio.Event | None = None) -> dict:
    """For `seconds` (or until `until` is set): /health every 20 ms, and one-sentence translations one
    after another."""
    end, health, latencies = time.monotonic() + seconds, [], []

    def going() -> bool:
        return time.monotonic() < end and not (until is not None and until.is_set())

    async def healthy() -> None:
        async with Connection(url) as http:
            while going():
                started = time.perf_counter()
                await http.get("/health")
                health.append(time.perf_counter() - started)
                await asyncio.sleep(0.02)

    async def translating() -> None:
        async with Connection(url) as http:
            i = 0
            while going():
                started = time.perf_counter()
                status = await http.post("/v1/translate", {"text": sentences[i % len(sentences)]})
                latencies.append(time.perf_counter() - started)
                assert status == 200, status
                i += 1

    await asyncio.gather(healthy(), translating())
    return {"health_p99": statistics.quantiles(health, n=100)[98] if len(health) > 1 else health[0],
            "probes": len(health), "sentence_p50": statistics.median(latencies), "sentences": len(latencies),
            "seconds": seconds - max(end - time.monotonic(), 0), "health": health}


async def queued(url: str, event: asyncio.Event) -> None:
    """Set `event` once sentences wait in the server's queue (a file's, once it is prepared)."""
    async with httpx.AsyncClient() as client:
        while not event.is_set():
            metrics = (await client.get(f"{url}/metrics")).text
            if any(line.startswith("aiayn_queue_sentences ") and float(line.split()[1]) > 0
                   for line in metrics.splitlines()):
                event.set()
            await asyncio.sleep(0.2)


def busy(model: str, sentences: list[str], args) -> str:
    html = page(sentences, args.html_mib)
    probes = [s for s in sentences[:200] if len(s.split()) < 15]
    options = ("--max-body-bytes", str(len(html) + (1 << 20)), "--max-file-tokens", "10000000",
               "--file-timeout", "36000")
    with serve(model, args.threads, True, options) as url:
        idle = asyncio.run(probe(url, args.probe_seconds, probes))

        async def loaded() -> tuple[dict, dict, str]:
            async with httpx.AsyncClient(timeout=None) as client:
                started, searching = time.perf_counter(), asyncio.Event()
                upload = asyncio.create_task(client.post(
                    f"{url}/translate_file", data={"source": "en", "target": "de"},
                    files={"file": ("page.html", html)}))
                watching = asyncio.create_task(queued(url, searching))
                preparing = await probe(url, 3600, probes, until=searching)  # read, cut, tokenised
                during = await probe(url, args.probe_seconds, probes)  # its sentences searched
                seconds = time.perf_counter() - started
                state = "still being translated" if not upload.done() else \
                    f"translated in {seconds:.1f} s (status {upload.result().status_code})"
                upload.cancel()
                watching.cancel()
                return preparing, during, state

        preparing, during, state = asyncio.run(loaded())
    ms = lambda x: f"{x * 1000:,.1f}"  # noqa: E731
    worst = max(preparing, during, key=lambda x: x["sentence_p50"])
    ratio = worst["sentence_p50"] / idle["sentence_p50"]
    p99 = max(preparing["health_p99"], during["health_p99"])
    lines = [f"### Busy: a {len(html) / (1 << 20):.2f} MiB .html file posted to /translate_file, read and "
             f"cut into sentences in {preparing['seconds']:.1f} s, then searched; {state} at the end",
             "", "| server | /health p99 ms | probes | one sentence p50 ms | sentences |",
             "|---|---|---|---|---|",
             f"| idle | {ms(idle['health_p99'])} | {idle['probes']} | {ms(idle['sentence_p50'])} | "
             f"{idle['sentences']} |",
             f"| preparing the file | {ms(preparing['health_p99'])} | {preparing['probes']} | "
             f"{ms(preparing['sentence_p50'])} | {preparing['sentences']} |",
             f"| searching the file's sentences ({args.probe_seconds:g} s) | {ms(during['health_p99'])} | "
             f"{during['probes']} | "
             f"{ms(during['sentence_p50'])} | {during['sentences']} |", "",
             f"While the file was translated: /health p99 at most {ms(p99)} ms (target <= 50: "
             f"{'met' if p99 <= 0.05 else 'not met'}); a sentence's median latency at most {ratio:.2f}x the "
             f"idle server's (target <= 2x: {'met' if ratio <= 2 else 'not met'})."]
    return "\n".join(lines)


def requests_mix(sentences: list[str], n: int) -> list[dict]:
    """LibreTranslate bodies: a sentence, a paragraph, an HTML snippet, a list."""
    rng, out = random.Random(1), []
    for i in range(n):
        pick = [rng.choice(sentences) for _ in range(rng.randint(2, 5))]
        q = [pick[0], " ".join(pick), "<p>" + "</p><p><i>".join(pick) + "</i></p>", pick][i % 4]
        out.append({"q": q, "source": "en", "target": "de", "format": "html" if i % 4 == 2 else "text"})
    return out


async def hang_up(url: str, body: dict, after: float) -> None:
    """Send a request and close the connection `after` seconds, before the answer (most of the time)."""
    host, _, port = url.removeprefix("http://").rpartition(":")
    payload = httpx.Request("POST", f"{url}/translate", json=body)
    head = (f"POST /translate HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload.content)}\r\n\r\n").encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(head + payload.content)
    await asyncio.sleep(after)
    writer.close()


def soak(model: str, sentences: list[str], args, directory: str) -> str:
    log = Path(directory) / "server.log"
    bodies = requests_mix(sentences, args.requests)
    statuses, samples, gone = [], [], 0
    with open(log, "w") as log_file, serve(model, args.threads, True, (), log_file) as url:
        pid = server_pids[url]

        async def run() -> None:
            nonlocal gone
            queue = list(enumerate(bodies))
            done = asyncio.Event()

            async def client(k: int) -> None:
                nonlocal gone
                rng = random.Random(k)
                async with Connection(url) as http:
                    while queue:
                        i, body = queue.pop()
                        if rng.random() < 0.1:
                            await hang_up(url, body, rng.uniform(0.001, 0.05))
                            gone += 1
                        else:
                            statuses.append(await http.post("/translate", body))

            async def sampler() -> None:
                while not done.is_set():
                    samples.append(_rss_mib(pid))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(done.wait(), 5)
                samples.append(_rss_mib(pid))

            sampling = asyncio.create_task(sampler())
            started = time.perf_counter()
            await asyncio.gather(*(client(k) for k in range(16)))
            done.set()
            await sampling
            samples.append(time.perf_counter() - started)

        asyncio.run(run())
        time.sleep(1)  # the last hang-ups reach the server's log
    seconds = samples.pop()
    written = log.read_text()
    bad = [line for line in written.splitlines() if "Traceback" in line or "never retrieved" in line
           or "ERROR" in line or "Exception" in line]
    quarters = [samples[len(samples) * q // 4:len(samples) * (q + 1) // 4] or samples[-1:] for q in range(4)]
    second, last = statistics.median(quarters[1]), statistics.median(quarters[3])  # the first: warming up
    growth = (last - second) / second
    server_errors = sum(s >= 500 or s == 0 for s in statuses)
    met = growth < 0.05 and server_errors == 0 and not bad
    return "\n".join([
        f"### Soak: {len(bodies):,} LibreTranslate requests in {seconds:.0f} s from 16 clients, {gone} "
        "hung up",
        "", "| | |", "|---|---|",
        f"| answered | {len(statuses):,} ({sum(s == 200 for s in statuses):,} with 200) |",
        f"| 5xx or no answer | {server_errors} |",
        f"| server resident memory, MiB (every 5 s) | {', '.join(f'{m:,.0f}' for m in samples)} |",
        f"| median of the last quarter against the second's | {growth:+.1%} |",
        f"| log lines with a traceback, ERROR or never retrieved | {len(bad)} |",
        "", f"Targets (memory < 5%, no 5xx, a clean log): {'met' if met else 'not met'}."
        + ("".join(f"\n    {line}" for line in bad[:5]))])


if __name__ == "__main__":
    sys.exit(main())
