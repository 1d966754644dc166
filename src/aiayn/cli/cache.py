"""`aiayn cache`: the compiled decoder steps kept on disk (aiayn/decoding/packages.py)."""

from __future__ import annotations

import argparse

from aiayn.decoding import packages


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="show or clear the compiled decoder steps kept on disk",
        description="The decoder steps compiled for a model, a row count and this machine are kept in "
                    "$AIAYN_CACHE_DIR/steps (default ~/.cache/aiayn/steps), so later processes start "
                    "without compiling. 'info' lists them; 'clear' removes them (they are compiled "
                    "again when next needed); 'prune' removes only the stale ones, made by another "
                    "version of aiayn or torch, which this installation never uses again.")
    p.add_argument("action", choices=("info", "clear", "prune"),
                   help="info: list the entries; clear: remove them all; prune: remove the stale ones")


def run(args: argparse.Namespace) -> int:
    if args.action in ("clear", "prune"):
        removed, freed = packages.clear(None if args.action == "clear" else packages.stale)
        print(f"removed {removed} {'stale ' if args.action == 'prune' else ''}compiled steps "
              f"({freed / 1e6:.1f} MB) from {packages.cache_dir()}")
        return 0
    found = packages.entries()
    total = sum(size for _, _, size in found)
    stale = {entry: size for entry, recorded, size in found if packages.stale(recorded)}
    print(f"{packages.cache_dir()}: {len(found)} compiled steps, {total / 1e6:.1f} MB"
          + (f"; {len(stale)} stale ({sum(stale.values()) / 1e6:.1f} MB, made by another version of "
             "aiayn or torch: 'aiayn cache prune' removes them)" if stale else ""))
    root = packages.cache_dir()
    problem = packages.not_ours_alone(root) if root.exists() else None
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
              f"{fields.get('dtype')}  {packages.describe(fields)}  "
              f"{fields.get('machine', {}).get('device')}  compiled in {recorded.get('seconds')} s "
              f"on {recorded.get('created')}{'  stale' if entry in stale else ''}")
    for refused in packages.refusals():
        machine = refused.get("machine", {}).get("device")
        print(f"torch {refused.get('torch')} on {machine} cannot load compiled steps "
              f"({refused.get('problem')}; found {refused.get('checked')}): its decoding runs eagerly")
    return 0
