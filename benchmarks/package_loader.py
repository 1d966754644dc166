"""Whether torch's public package loader can replace the private entry points aiayn loads compiled
steps with (decoding/cache/library.py): one greedy step of a model (8 rows), compiled once into a
package (`.pt2`, what `torch._inductor.aoti_load_package` takes) and once as aiayn keeps it (the
package's library alone, loaded by `Runner`), then for each: the time to load it (median of 5, each
in a fresh loader), the time of one call (median of 5 rounds of 200 calls on the same inputs), and
the memory that loading added (resident set). Both give the same outputs.

    python benchmarks/package_loader.py runs/multi30k-ende/averaged --record   # detail/decode_speed.md
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from common import detail, record  # noqa: E402

from aiayn.decoding import packages  # noqa: E402
from aiayn.decoding.cache import compiling, store  # noqa: E402
from aiayn.decoding.cache.library import Runner  # noqa: E402
from aiayn.decoding.compiled import CompiledStep  # noqa: E402
from aiayn.decoding.greedy import greedy_search  # noqa: E402
from aiayn.translation import load_model  # noqa: E402


class _Captured(Exception):
    pass


def resident() -> int:
    """This process's resident memory, bytes."""
    with open("/proc/self/status") as status:
        kb = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return kb * 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="a trained model (checkpoint or run directory)")
    p.add_argument("--record", action="store_true",
                   help="append the table to benchmarks/detail/decode_speed.md")
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    os.environ["AIAYN_COMPILE_WORKERS"] = "0"
    os.environ["AIAYN_CACHE_DIR"] = tempfile.mkdtemp(prefix="aiayn-probe-")
    probe(load_model(args.model).model.eval(), args.record)
    return 0


@torch.inference_mode()  # as a search runs (the example inputs are inference tensors)
def probe(model: torch.nn.Module, keep: bool) -> None:
    captured = {}

    def capture(entry, fields, module, inputs, dynamic):
        captured.update(fields=fields, module=module, inputs=inputs, dynamic=dynamic)
        raise _Captured

    build, packages.build = packages.build, capture
    try:
        src = torch.randint(4, model.config.vocab_size, (8, 12))
        greedy_search(model, src, torch.full((8,), 5), step=CompiledStep(model))
    except _Captured:
        pass
    finally:
        packages.build = build
    module, inputs, dynamic = captured["module"], captured["inputs"], captured["dynamic"]
    work = Path(tempfile.mkdtemp(prefix="aiayn-probe-"))
    library = compiling.build(work / "library", captured["fields"], module, inputs, dynamic)
    keep_whole, compiling._library_alone = compiling._library_alone, lambda package: package
    try:
        package = compiling.build(work / "package", captured["fields"], module, inputs, dynamic)
    finally:
        compiling._library_alone = keep_whole

    loaders = {
        "aiayn's Runner (the library alone, private container)": lambda: Runner(library, torch.device("cpu")),
        "torch._inductor.aoti_load_package (the package)":
            lambda: torch._inductor.aoti_load_package(str(package)),
    }
    rows = ["| loader | load, ms | one call, us | memory loading added, MB |", "|---|---|---|---|"]
    outputs = []
    for name, load in loaders.items():
        loads, before = [], resident()
        for _ in range(5):
            start = time.perf_counter()
            step = load()
            loads.append(time.perf_counter() - start)
            if len(loads) == 1:
                added = resident() - before  # the first load's
        outputs.append(step(*inputs))
        rounds = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(200):
                step(*inputs)
            rounds.append((time.perf_counter() - start) / 200)
        rows.append(f"| {name} | {1000 * statistics.median(loads):.1f} | "
                    f"{1e6 * statistics.median(rounds):.0f} | {added / 1e6:.1f} |")
        print(rows[-1], flush=True)
    flat = [[x for x in (o if isinstance(o, tuple | list) else [o]) if isinstance(x, torch.Tensor)]
            for o in outputs]
    same = all(torch.equal(a, b) for a, b in zip(*flat, strict=True))
    table = "\n".join(rows) + f"\n\nSame outputs: {same}. Step: {store.describe(captured['fields'])}."
    print(table)
    if keep:
        record("The public package loader against aiayn's Runner", table, path=detail("decode_speed"))


if __name__ == "__main__":
    sys.exit(main())
