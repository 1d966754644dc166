"""What the benchmarks share: the machine's matmul peak, timing with warm-up and medians, the
Multi30k batches, and recording results in benchmarks/detail/ (benchmarks/RESULTS.md summarises them)."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from aiayn.data.corpora import load_corpus
from aiayn.data.readers import ParallelCorpus
from aiayn.timing import cpu_name, timed_calls
from aiayn.tokenizer import Tokenizer

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"  # the summary, edited by hand
DETAIL = RESULTS.parent / "detail"  # each benchmark's runs, appended by record()
RECORDS = "records.jsonl"  # beside the topic files: the same runs, one JSON object a line
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CPU = torch.device("cpu")


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a wall-clock reading includes it (CUDA only)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def batch_times(run: Callable[[Any], object], batches: list, device: torch.device = CPU) -> list[float]:
    """Seconds `run` takes on each batch (a system translating it), after one warm-up batch."""
    run(batches[0])  # warm-up
    times = []
    for batch in batches:
        start = time.perf_counter()
        run(batch)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def peak_matrix_size(device: torch.device) -> int:
    """n of the n x n matmul that measures a device's peak: enough work to keep it busy."""
    return 8192 if device.type == "cuda" else 1024


def matmul_peak_gflops(n: int, repeats: int = 10, device: torch.device = CPU,
                       dtype: torch.dtype = torch.float32) -> float:
    """GFLOP/s of torch.matmul on n x n matrices of `dtype` on `device` (on the CPU with the current
    threads): the peak for MFU."""
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))

    def matmul() -> None:
        a @ b
        synchronize(device)

    return 2 * n**3 / statistics.median(timed_calls(matmul, repeats, warmup=3)) / 1e9


class PeakMemory:
    """Peak resident memory of this process inside a `with` block, in MiB (Linux; None elsewhere),
    or on a CUDA device, the peak of the memory PyTorch allocated there.

    Resets the high-water mark (the kernel's VmHWM, or PyTorch's CUDA peak) on entry, so each block
    is measured on its own; `start` is the memory held on entry (model, data, earlier blocks' caches).
    """

    start: float | None = None
    peak: float | None = None

    def __init__(self, device: torch.device = CPU) -> None:
        self.device = device

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start = torch.cuda.memory_allocated(self.device) / 2**20
            return self
        try:
            Path("/proc/self/clear_refs").write_text("5")  # 5: reset the peak RSS
            self.start = _status_mib("VmRSS")
        except OSError:
            self.start = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self.device.type == "cuda":
            self.peak = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self.peak = _status_mib("VmHWM") if self.start is not None else None

    def __str__(self) -> str:
        if self.peak is None:
            return "n/a"
        return f"{self.peak:,.0f} MiB (+{max(self.peak - self.start, 0.0):,.0f})"


def _status_mib(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024  # kB
    raise OSError(f"no {field} in /proc/self/status")


def machine(device: torch.device = CPU) -> str:
    gpu = f"{torch.cuda.get_device_name(device)}; " if device.type == "cuda" else ""
    return (f"{gpu}{cpu_name()}, {os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads; "
            f"Python {platform.python_version()}, torch {torch.__version__}")


def versions(*packages: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in packages:
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} (absent)")
    return ", ".join(found)


def detail(topic: str) -> Path:
    """The file in benchmarks/detail/ that a benchmark's runs are appended to: detail("train_speed")."""
    return DETAIL / f"{topic}.md"


def record(title: str, table: str, notes: str = "", device: torch.device = CPU, *, path: Path) -> None:
    """Append one run to `path` (a topic file under benchmarks/detail/, see `detail`) with its command,
    machine, versions and date, and the same as one JSON line to records.jsonl in the same folder
    (benchmarks/detail/records.jsonl), for scripts."""
    command = "python " + " ".join(sys.argv)
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    measured, host = commit(), machine(device)
    software = versions("aiayn", "transformers", "ctranslate2")
    entry = (f"\n## {title} ({when})\n\n`{command}` at commit {measured}\n\nMachine: {host}.\n"
             f"Versions: {software}.\n\n{table}\n")
    if notes:
        entry += f"\n{notes}\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(entry)
    line = {"title": title, "date": when, "command": command, "commit": measured, "machine": host,
            "versions": software, "table": table, "notes": notes, "file": _relative(path)}
    records = path.parent / RECORDS
    with open(records, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"recorded in {path} and {records}")


def _relative(path: Path) -> str:
    """`path` from the repository's root where it lies inside it (as records.jsonl names files)."""
    try:
        return path.resolve().relative_to(RESULTS.parents[1]).as_posix()
    except ValueError:
        return str(path)


def commit() -> str:
    """The git commit of the code measured, marked "+ changes" when the working tree differs."""
    def git(*args: str) -> str:
        try:
            run = subprocess.run(["git", *args], capture_output=True, text=True, cwd=RESULTS.parent)
        except OSError:  # no git
            return ""
        return run.stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                  ":(top,exclude)benchmarks/RESULTS.md",  # the summary and earlier runs' records
                  ":(top,exclude)benchmarks/detail")  # are no code change
    return head + (" + changes" if changed else "")


def data_dir() -> None:
    """Point AIAYN_DATA_DIR at ../shared/data unless it is set."""
    if "AIAYN_DATA_DIR" not in os.environ and (SHARED_DATA / "multi30k").exists():
        os.environ["AIAYN_DATA_DIR"] = str(SHARED_DATA)


def parser(doc: str) -> argparse.ArgumentParser:
    """A benchmark's command line: its docstring as help, and the --smoke and --record options."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny model, little data: checks it runs (CI)")
    p.add_argument("--record", action="store_true",
                   help="append the results to the benchmark's file in benchmarks/detail/")
    return p


def training_data(smoke: bool) -> tuple[ParallelCorpus, Tokenizer]:
    """Multi30k en->de train with a joint 8k BPE vocabulary (smoke: a synthetic copy task, 512)."""
    data_dir()
    corpus = load_corpus("synthetic:copy" if smoke else "multi30k", "en", "de")
    return corpus, Tokenizer.train(corpus.source + corpus.target, 512 if smoke else 8000)


def smoke_model() -> Path:
    """A tiny model trained for a few updates to reverse letters, for the scripts' smoke modes: it
    translates badly, and loops."""
    import tempfile

    from aiayn.cli import main as aiayn

    run = Path(tempfile.mkdtemp()) / "smoke"
    assert aiayn(["train", "--preset", "tiny", "--train", "synthetic:reverse", "--out", str(run),
                  "--max-steps", "20", "--batch-tokens", "512", "--valid-every", "0",
                  "--bleu-every", "0"]) == 0
    return run


def run_name(path: str | Path) -> str:
    """A run's name in a table: runs/exp-c2/averaged -> exp-c2/averaged."""
    return "/".join(Path(path).parts[-2:])
