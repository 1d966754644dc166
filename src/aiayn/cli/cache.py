"""`aiayn cache`: the compiled decoder steps kept on disk (aiayn/decoding/cache/)."""

from __future__ import annotations

import argparse

from aiayn.decoding import kernels
from aiayn.decoding.cache import store, verdict


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="show or clear the compiled decoder steps kept on disk",
        description="The decoder steps compiled for a model, a row count and this machine are kept in "
                    "$AIAYN_CACHE_DIR/steps (default ~/.cache/aiayn/steps), so later processes start "
                    "without compiling. 'info' lists them, and the matmul kernels timed on this machine "
                    "for each row count (plain or packed for oneDNN, the faster kept); 'clear' removes "
                    "them (they are compiled and timed again when next needed); 'prune' removes only the "
                    "stale ones, made by another version of aiayn or torch, which this installation never "
                    "uses again.")
    p.add_argument("action", choices=("info", "clear", "prune"),
                   help="info: list the entries; clear: remove them all; prune: remove the stale ones")


def run(args: argparse.Namespace) -> int:
    if args.action in ("clear", "prune"):
        removed, freed = store.clear(None if args.action == "clear" else store.stale)
        if args.action == "clear":  # the next step loaded checks again whether steps load here, and
            verdict.forget()  # the kernels are timed again
            kernels.forget()
        print(f"removed {removed} {'stale ' if args.action == 'prune' else ''}compiled steps "
              f"({freed / 1e6:.1f} MB) from {store.cache_dir()}")
        return 0
    found = store.entries()
    total = sum(size for _, _, size in found)
    stale = {entry: size for entry, recorded, size in found if store.stale(recorded)}
    print(f"{store.cache_dir()}: {len(found)} compiled steps, {total / 1e6:.1f} MB"
          + (f"; {len(stale)} stale ({sum(stale.values()) / 1e6:.1f} MB, made by another version of "
             "aiayn or torch: 'aiayn cache prune' removes them)" if stale else ""))
    root = store.cache_dir()
    problem = store.not_ours_alone(root) if root.exists() else None
    print("  who may write it: " + ("you alone" if problem is None else
                                    f"not you alone ({problem}): aiayn does not use it, and compiles into a "
                                    "private temporary directory instead; chmod 700 it to use it")
          + ". A compiled step is a library that aiayn loads: whoever can write here runs code in every "
            "aiayn process that uses this cache.")
    for entry, recorded, size in found:
        if recorded is None:
            print(f"  {entry.name}  {size / 1e6:6.1f} MB  unreadable (rebuilt when next needed)")
            continue
        fields = recorded.get("fields", {})
        print(f"  {entry.name}  {size / 1e6:6.1f} MB  model {str(fields.get('weights'))[:12]}  "
              f"{fields.get('dtype')}  {store.describe(fields)}  "
              f"{fields.get('machine', {}).get('device')}  compiled in {recorded.get('seconds')} s "
              f"on {recorded.get('created')}{'  stale' if entry in stale else ''}")
    for choice in kernels.choices():
        print(f"  kernels for {kernels.describe(choice)}")
    for refused in verdict.refusals():
        machine = refused.get("machine", {}).get("device")
        print(f"torch {refused.get('torch')} on {machine} cannot load compiled steps "
              f"({refused.get('problem')}; found {refused.get('checked')}): its decoding runs eagerly")
    return 0
