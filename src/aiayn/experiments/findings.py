"""What an experiment measures in and what it returns: its context, its finding, and tables."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class ExperimentContext:
    out: Path  # where figures go
    quick: bool = False  # reduced sizes, for CI
    training_steps: int = 1500  # updates per model of claims 9, 11, 12 (about 30 minutes each, 2 CPU cores)
    run_dir: Path | None = None  # the training runs of claims 9, 11 and 12 (default: out / "runs")


@dataclass
class Finding:
    number: int
    claim: str
    method: str  # what was measured, how
    table: str  # Markdown
    supported: bool | None  # None: the measurement cannot decide
    verdict: str  # one or two sentences from the numbers
    figures: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    machine: str = ""  # where it was measured: CPU, threads, torch


def markdown_table(header: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)
