"""Which kernels a compiled decoder step's matrix products run on, chosen by timing them on this
machine rather than written for one CPU.

Inductor writes a step's float linear maps one of two ways (`store.Kind.packed`): plain products
(the library's GEMM, MKL's on CPUs; the compiled model's decoder weights stored by column,
`inference.weights_by_column`) or weights packed once for oneDNN. Which is faster depends on the
row count and on the CPU: on an Intel Xeon with AMX, plain products win below 8 rows; on an AMD EPYC
(Zen 4) MKL takes a generic path, and packed weights win at 4 rows by 2-6x per product (a lone
sentence of beam 4: 20.7 against 36.2 ms, benchmarks/detail/decode_speed.md). So the first time a
step of a row count is compiled on a machine, the model's decoder linear maps and output layer are
timed at that row count both ways (`time_layouts`: a fraction of a second), the faster is kept
(`packed`), and the choice is stored beside the compiled steps (`.kernels.json` in the cache
directory: by machine, torch, the maps' shapes and the rows), so later processes take it without
timing. `aiayn cache info` lists the choices with the times they were made on.

A lone sentence's whole search compiled as one graph (decoding/whole.py) runs its products plain
(Inductor does not pack inside its loop): where packed products win at its rows, the search runs on
the packed compiled steps instead (`whole.takes`).

$AIAYN_KERNELS overrides the measurement: `plain`, `packed`, or `rows` (packed from `PACKED_FROM`
rows, the rule measured on the Xeon; the tests use it, to compile the same steps on every machine).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import os
import statistics
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from aiayn import files
from aiayn.decoding.cache import store

CANDIDATES = ("plain", "packed")
PACKED_FROM = 8  # $AIAYN_KERNELS=rows: packed from this many rows (or any count), as timed on the Xeon
FILE = ".kernels.json"  # in the cache directory; its name starts with "." so it is no entry
REPRESENTATIVE_ROWS = 32  # the rows timed for a step that takes any count of rows
EAGER_ROWS = (4, 128)  # the rows the eager path's packing is timed at: a lone sentence's beam, a batch's
ROUNDS, CALLS = 5, 8  # rounds, each timing CALLS calls of every candidate in turn; the median round

Shapes = tuple[tuple[int, int, int], ...]  # (in features, out features, how many) of a step's maps
clock: Callable[[], float] = time.perf_counter  # what `time_layouts` reads (the tests give a fake one)
_known: dict[tuple, bool] = {}  # this process's choices, by `_key`
_shapes_of: weakref.WeakKeyDictionary[nn.Module, Shapes] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def packed(model: nn.Module, rows: int) -> bool:
    """Whether a compiled decoder step of `rows` rows (0: any count) packs its float weights for
    oneDNN on this machine: $AIAYN_KERNELS if set, else the faster of the two ways as timed here
    (once per machine, torch, shapes and rows; stored)."""
    forced = _forced()
    if forced == "rows":
        return rows == 0 or rows >= PACKED_FROM
    if forced:
        return forced == "packed"
    if not _packable():
        return False
    shapes = _shapes(model)
    timed_rows = rows or REPRESENTATIVE_ROWS
    return _chosen(_key(shapes, timed_rows), shapes, timed_rows, "compiled",
                   lambda: time_layouts(shapes, timed_rows))


def linear_shapes(model: nn.Module) -> Shapes:
    """The linear maps a decoder step runs, the decoder's and the output layer's, by shape: each
    module's own 2-D weight (out, in), whatever holds it (nn.Linear, or a packed map of inference.py)."""
    maps = [m for m in model.decoder.modules() if not isinstance(m, nn.Embedding)] + [model.output_proj]
    counts: dict[tuple[int, int], int] = {}
    for m in maps:
        weight = m._parameters.get("weight", m._buffers.get("weight"))
        if isinstance(weight, torch.Tensor) and weight.dim() == 2:
            shape = (weight.size(1), weight.size(0))  # (in, out)
            counts[shape] = counts.get(shape, 0) + 1
    return tuple(sorted((i, o, n) for (i, o), n in counts.items()))


def time_layouts(shapes: Shapes, rows: int, candidates: tuple[str, ...] = CANDIDATES) -> dict[str, float]:
    """Seconds that one step's linear maps (`shapes`) take at `rows` rows on each of `candidates`:
    plain (weights by column, as a compiled model holds them), packed for oneDNN, or packed for MKL
    (`mkl`, the eager path's `inference.MKLPackedLinear`); the median of ROUNDS rounds, each timing
    CALLS calls of every candidate in turn, so that a drift in the machine's speed hits all alike."""
    g = torch.Generator().manual_seed(0)
    inputs = {i: torch.randn(rows, i, generator=g) for i, _, _ in shapes}
    maps = [(torch.randn(o, i, generator=g) * i ** -0.5, torch.zeros(o), n) for i, o, n in shapes]

    def plain() -> Callable[[], None]:
        weights = [(w.t().contiguous().t(), b, n) for w, b, n in maps]

        def run() -> None:
            for w, b, n in weights:
                for _ in range(n):
                    F.linear(inputs[w.size(1)], w, b)
        return run

    def packed() -> Callable[[], None]:
        weights = [(torch.ops.mkldnn._reorder_linear_weight(w, rows), b, n, w.size(1)) for w, b, n in maps]

        def run() -> None:
            for p, b, n, i in weights:
                for _ in range(n):
                    torch.ops.mkldnn._linear_pointwise(inputs[i], p, b, "none", [], "")
        return run

    def mkl() -> Callable[[], None]:
        weights = [(torch.ops.mkl._mkl_reorder_linear_weight(w, rows), w, b, n) for w, b, n in maps]

        def run() -> None:
            for p, w, b, n in weights:
                for _ in range(n):
                    torch.ops.mkl._mkl_linear(inputs[w.size(1)], p, w, b, rows)
        return run

    makers = {"plain": plain, "packed": packed, "mkl": mkl}
    runs = {name: makers[name]() for name in candidates}
    samples: dict[str, list[float]] = {name: [] for name in runs}
    with torch.inference_mode():
        for run in runs.values():  # warm-up: first calls allocate
            run()
        for _ in range(ROUNDS):
            for name, run in runs.items():
                start = clock()
                for _ in range(CALLS):
                    run()
                samples[name].append((clock() - start) / CALLS)
    return {name: statistics.median(times) for name, times in samples.items()}


def eager_packing(model: nn.Module) -> str:
    """How the eager path's float32 linear maps are packed on this machine (`inference.pack_for_cpu`):
    `mkl` (MKL's packed GEMM, packed anew for each row count a map keeps having) or `onednn` (packed
    once): the faster of the two as timed here on the model's maps, at a lone sentence's beam (4 rows)
    and a batch's (128) together; stored as the compiled steps' choices are. $AIAYN_KERNELS: packed
    means onednn, plain and rows mkl."""
    forced = _forced()
    if forced:
        return "onednn" if forced == "packed" else "mkl"
    if not (_packable() and torch._C.has_mkl):
        return "mkl" if torch._C.has_mkl else "onednn"
    shapes = _shapes(model)

    def measure() -> dict[str, float]:
        times = {"mkl": 0.0, "packed": 0.0}
        for rows in EAGER_ROWS:
            for name, seconds in time_layouts(shapes, rows, tuple(times)).items():
                times[name] += seconds
        return times

    key = (*_key(shapes, EAGER_ROWS[0]), "eager")
    return "onednn" if _chosen(key, shapes, EAGER_ROWS[0], "eager", measure) else "mkl"


def choices() -> list[dict[str, Any]]:
    """The choices stored on this machine's cache (for `aiayn cache info`), oldest first."""
    return list(_read().values())


def forget() -> None:
    """Drop the stored choices (`aiayn cache clear`): they are timed again when next needed."""
    with _lock:
        _known.clear()
        with contextlib.suppress(OSError):
            (store.cache_dir() / FILE).unlink()


def _packable() -> bool:
    """Whether oneDNN's packed float matmul is there to choose (a CPU build with it)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _key(shapes: Shapes, rows: int) -> tuple:
    machine = _machine()
    return (machine["features"], machine["kernels"], machine["onednn"], torch.__version__,
            torch.get_num_threads(), shapes, rows)


@functools.cache
def _machine() -> dict[str, str]:
    """This CPU as the compiled steps' entries name it, read once a process (/proc/cpuinfo)."""
    return store.machine(torch.device("cpu"))


def _shapes(model: nn.Module) -> Shapes:
    """`linear_shapes` of `model`, found once per model (a lone sentence's search asks each time)."""
    found = _shapes_of.get(model)
    if found is None:
        found = _shapes_of[model] = linear_shapes(model)
    return found


def _name(key: tuple) -> str:
    return json.dumps(key, separators=(",", ":"))


def _forced() -> str:
    """$AIAYN_KERNELS: plain, packed or rows; "" when unset (the choice is timed)."""
    forced = os.environ.get("AIAYN_KERNELS", "").strip().lower()
    if forced and forced not in (*CANDIDATES, "rows"):
        raise ValueError(f"AIAYN_KERNELS={forced!r}: use plain, packed or rows (unset: measured)")
    return forced


def _chosen(key: tuple, shapes: Shapes, rows: int, path: str, measure: Callable[[], dict[str, float]]
            ) -> bool:
    """Whether packed for oneDNN beats the other candidate `measure` times (plain for the compiled
    steps, MKL for the eager path): known in this process, else stored, else timed now and stored. A
    kernel this build lists but cannot run here keeps what was used before (not packed)."""
    with _lock:
        if key not in _known:
            stored = _read().get(_name(key))
            if stored is None:
                try:
                    times = measure()
                except RuntimeError:
                    _known[key] = False
                    return False
                other = min(t for name, t in times.items() if name != "packed")
                stored = _record(key, shapes, rows, times["packed"] < other, times, path)
            _known[key] = bool(stored["packed"])
        return _known[key]


def _record(key: tuple, shapes: Shapes, rows: int, choice: bool, times: dict[str, float], path: str
            ) -> dict[str, Any]:
    """Store a choice made on `times` (seconds by candidate) for the compiled steps or the eager path."""
    record = {"key": _name(key), "path": path, "rows": rows, "shapes": [list(s) for s in shapes],
              "packed": choice, "microseconds": {k: round(v * 1e6, 1) for k, v in times.items()},
              "measured": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpu": _cpu()}
    _write(record)
    return record


def _read() -> dict[str, dict[str, Any]]:
    try:
        records = json.loads((store.cache_dir() / FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {r["key"]: r for r in records if isinstance(r, dict) and "key" in r and "packed" in r} \
        if isinstance(records, list) else {}


def _write(record: dict[str, Any]) -> None:
    """Add `record` to the stored choices (written whole, atomically; a cache that is not this user's
    alone is not written: the choice then lasts for this process)."""
    root = store.cache_dir()
    if store.not_ours_alone(root, create=True) is not None:
        return
    records = [r for k, r in _read().items() if k != record["key"]] + [record]
    with contextlib.suppress(OSError):
        files.write_atomically(root / FILE, json.dumps(records, indent=1).encode(), mode=0o600)


def _cpu() -> str:
    from aiayn.timing import cpu_name

    return cpu_name()


def describe(record: dict[str, Any]) -> str:
    """A stored choice in words, for `aiayn cache info`."""
    times = record.get("microseconds", {})
    shapes = record.get("shapes", [])
    timed = ", ".join(f"{name} {us} us" for name, us in times.items())
    if record.get("path") == "eager":
        chosen = "oneDNN packed" if record.get("packed") else "MKL packed"
        return (f"the eager path ({len(shapes)} shapes of linear map, {' + '.join(map(str, EAGER_ROWS))} "
                f"rows): {chosen} ({timed}) on {record.get('cpu')}, {record.get('measured')}")
    return (f"{record.get('rows')} rows ({len(shapes)} shapes of linear map): "
            f"{'packed' if record.get('packed') else 'plain'} ({timed} a step) on {record.get('cpu')}, "
            f"{record.get('measured')}")

