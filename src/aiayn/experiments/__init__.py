"""The paper's well-known claims, checked by measurement (`aiayn experiments`).

Each experiment is a function `(ExperimentContext) -> Finding`: it measures, prints nothing, and
returns its numbers as a Markdown table, optional figures, and a verdict computed from the
numbers, never written in advance. `quick=True` shrinks every experiment to seconds for CI.

Each finding is saved to OUT/findings/claimN.json as soon as it is measured, and the report is
built from every finding saved there: the long claims 9, 11, 12 and 13 (which train models) can
run on their own (`--only 9 11 12 13`) and a crash loses only the claim being measured.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import time
from collections.abc import Callable
from pathlib import Path

from aiayn.experiments.findings import ExperimentContext, Finding, markdown_table

__all__ = ["ExperimentContext", "Finding", "markdown_table", "experiments", "run", "report", "saved"]


# The claims in their order (claim N is the Nth), as module.function: named, not imported, so
# that `aiayn`'s command line need not load their modules (matplotlib takes half a second).
CLAIMS = ("attention.scaling", "attention.heads", "attention.symmetry", "parameters.sharing",
          "parameters.embedding_scale", "positions.relative", "decoding.parallel_training",
          "attention.quadratic_cost", "positions.learned_vs_sinusoidal", "attention.additive",
          "positions.relative_vs_sinusoidal", "vocabularies.joint_vs_separate",
          "vocabularies.chinese_separate")


def experiments() -> list[Callable[[ExperimentContext], Finding]]:
    """The claims' experiments, in order (`CLAIMS`)."""
    found = []
    for claim in CLAIMS:
        module, function = claim.split(".")
        found.append(getattr(importlib.import_module(f"aiayn.experiments.{module}"), function))
    return found


def run(context: ExperimentContext, only: set[int] | None = None,
        progress: Callable[[str], None] = print) -> list[Finding]:
    """Measure the claims (all, or those in `only`), saving each finding as soon as it is measured."""
    context.out.mkdir(parents=True, exist_ok=True)
    findings = []
    for number, experiment in enumerate(experiments(), start=1):
        if only and number not in only:
            continue
        start = time.perf_counter()
        finding = experiment(context)
        finding.seconds = time.perf_counter() - start
        finding.machine = machine()
        save(finding, context.out, context.quick)
        progress(f"claim {number}: {_label(finding.supported)} ({finding.seconds:.0f} s) - {finding.claim}")
        findings.append(finding)
    return findings


def machine() -> str:
    """This machine as the findings record it: "Intel(R) Xeon(R) Processor (AVX512, AMX), 2 threads,
    torch 2.13.0+cpu"."""
    import torch

    from aiayn.timing import cpu_name

    return f"{cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def measured_where(findings: list[Finding]) -> str:
    """Which claims were measured on which machine: "claims 1-10 on A; claims 11, 12 on B"."""
    claims: dict[str, list[int]] = {}
    for f in findings:
        claims.setdefault(f.machine or "a machine not recorded", []).append(f.number)
    return "; ".join(f"claim{'s' if len(numbers) > 1 else ''} {_numbers(numbers)} on {where}"
                     for where, numbers in claims.items())


def _numbers(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> "1-3, 5"."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 2 else ", ".join(map(str, r)) for r in runs)


def save(finding: Finding, out: Path, quick: bool) -> Path:
    """OUT/findings/claimN.json; figure paths relative to OUT."""
    path = out / "findings" / f"claim{finding.number}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = dataclasses.asdict(finding) | {
        "figures": [Path(f).relative_to(out).as_posix() for f in finding.figures], "quick": quick}
    path.write_text(json.dumps(record, indent=1), encoding="utf-8")
    return path


def saved(out: Path, quick: bool) -> list[Finding]:
    """Every finding saved under OUT by runs of the same kind (quick or full), in claim order."""
    findings = []
    for path in (out / "findings").glob("claim*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        if record.pop("quick") == quick:
            record["figures"] = [out / f for f in record["figures"]]
            findings.append(Finding(**record))
    return sorted(findings, key=lambda f: f.number)


def report(findings: list[Finding], path: Path, header: str = "") -> Path:
    """The Markdown report: each claim, how it was measured, the numbers, figures, and the verdict."""
    parts = ["# The paper's claims, measured\n", header,
             markdown_table(["#", "claim", "verdict", "seconds"],
                            [[f.number, f.claim, _label(f.supported), f"{f.seconds:.0f}"] for f in findings])]
    for f in findings:
        parts.append(f"\n## {f.number}. {f.claim}\n\n**Method.** {f.method}\n\n{f.table}\n")
        parts += [f"![claim {f.number}]({fig.relative_to(path.parent).as_posix()})\n" for fig in f.figures]
        parts.append(f"**Verdict: {_label(f.supported)}.** {f.verdict}\n")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _label(supported: bool | None) -> str:
    return {True: "supported", False: "not supported", None: "undecided"}[supported]
