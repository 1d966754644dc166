"""What a run reports: training metrics since the last report (`Window`) and the run's record,
one JSON line per report in metrics.jsonl (`MetricsLog`)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Window:
    """Training metrics since the last metrics line: loss and NLL per token, and speed."""

    tokens: int = 0
    loss: float = 0.0  # summed over tokens
    nll: float = 0.0
    start: float = field(default_factory=time.perf_counter)

    def add(self, step_metrics: dict[str, float]) -> None:
        self.tokens += step_metrics["tokens"]
        self.loss += step_metrics["loss"] * step_metrics["tokens"]
        self.nll += step_metrics["nll"] * step_metrics["tokens"]

    def speed(self) -> float:
        return self.tokens / max(time.perf_counter() - self.start, 1e-9)

    def summary(self) -> dict[str, float]:
        return {"loss": self.loss / self.tokens, "nll": self.nll / self.tokens, "tokens": self.tokens,
                "tgt_tokens_per_s": self.speed()}


class MetricsLog:
    """Metrics appended as JSON lines to RUN_DIR/metrics.jsonl."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, kind: str, **values: Any) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"kind": kind, **values}) + "\n")

    def records(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The records written so far (of one `kind`, or all); a line cut short by a killed process
        is skipped."""
        records = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and "kind" in record and "step" in record:
                records.append(record)
        return [r for r in records if kind in (None, r["kind"])]

    def keep_until(self, step: int) -> None:
        """Drop the records of updates after `step`: a run resumed there replays them, and logs them
        again. A line cut short by a crash is dropped too."""
        if not self.path.exists():
            return
        kept = "".join(json.dumps(r) + "\n" for r in self.records() if r["step"] <= step)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(kept, encoding="utf-8")
        tmp.replace(self.path)
