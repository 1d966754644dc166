"""Whether this torch can load compiled steps on this machine, found out once in a child process
(`loads`): some builds crash any process that loads an AOTInductor package, which no exception
handler sees. A crash is kept as the machine's verdict for a while; anything else holds for one
process.
"""

from __future__ import annotations

import calendar
import contextlib
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from aiayn import files
from aiayn.decoding.cache import store
from aiayn.decoding.cache.store import cache_dir, current_dir, machine, steps_dir


class Unloadable(RuntimeError):
    """This machine's torch cannot load a compiled step (`loads`): the search runs eagerly."""


_LOAD_CHECK = "import sys, torch; from pathlib import Path; " \
              "from aiayn.decoding.cache.library import Runner; " \
              "Runner(Path(sys.argv[1]), torch.device(sys.argv[2]))"  # what the child process runs


_verdicts: dict[str, str] = {}  # this process's: environment key -> "" (loads) or why not
_said: set[str] = set()  # the verdicts `say_unloadable` has said
CRASHES = {signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE}
VERDICT_DAYS = 30  # a recorded verdict is checked again after this long (and with another torch)


def loads(path: Path, device: torch.device, notice: Callable[[str], None] | None = None) -> bool:
    """Whether this torch loads compiled steps on this machine. Some builds crash the process as
    they load any AOTInductor package (torch 2.11.0+cu130 on the lent H100 and H200: a segmentation
    fault, CPU and CUDA alike), which no exception handler sees; so the first step a machine and torch
    load is loaded in a child process first. A crash of that process (a signal such as SIGSEGV) is
    kept in the cache as this machine's verdict for VERDICT_DAYS (`verdict_path`; `aiayn cache clear`
    forgets it); any other failure (a time-out, an out-of-memory kill, an error) holds for this
    process only, and a later one checks again. If it is no, `notice` says so."""
    if known_unloadable(device) is None:
        problem, lasting = _check_loads(path, device)
        _verdicts[_environment(device)] = problem
        if lasting:
            with contextlib.suppress(OSError):  # verdict_path makes the directory (steps_dir)
                files.write_atomically(verdict_path(device), json.dumps(
                    {"torch": torch.__version__, "machine": machine(device), "problem": problem,
                     "checked": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=1).encode(),
                    mode=0o600)
        if problem:
            say_unloadable(problem, lasting, notice)
    return not _verdicts[_environment(device)]


def known_unloadable(device: torch.device) -> str | None:
    """Why compiled steps do not load here ("" if they do), if this process or the cache knows."""
    key = _environment(device)
    if key not in _verdicts:
        known = read_verdict(device)
        if known is None:
            return None
        _verdicts[key] = known
    return _verdicts[key]


def say_unloadable(problem: str, lasting: bool = True, notice: Callable[[str], None] | None = None) -> None:
    """Say why this process decodes eagerly (once per process): `problem`, and whether it is kept."""
    if problem in _said:
        return
    _said.add(problem)
    again = "'aiayn cache clear' checks again" if lasting else "the next process checks again"
    (notice or store.notice)(f"aiayn: torch {torch.__version__} cannot load a compiled decoder step on this "
                              f"machine ({problem}): decoding runs eagerly ({again})")


def read_verdict(device: torch.device) -> str | None:
    """The cache's verdict for this torch and machine: "" (loads), why not, or None if not known
    (or checked more than VERDICT_DAYS ago)."""
    with contextlib.suppress(OSError, ValueError, AttributeError, TypeError, LookupError):
        recorded = json.loads(verdict_path(device, kept=True).read_text())
        checked = calendar.timegm(time.strptime(recorded["checked"], "%Y-%m-%dT%H:%M:%SZ"))
        if recorded.get("torch") == torch.__version__ and recorded.get("machine") == machine(device) \
                and 0 <= time.time() - checked < VERDICT_DAYS * 86400:
            return str(recorded["problem"])
    return None


def refusals() -> list[dict[str, Any]]:
    """The cache's verdicts that compiled steps do not load (for any torch and machine)."""
    found = []
    for path in sorted(cache_dir().glob(".loads-*.json")):
        with contextlib.suppress(OSError, ValueError):
            recorded = json.loads(path.read_text())
            if isinstance(recorded, dict) and recorded.get("problem"):
                found.append(recorded)
    return found


def verdict_path(device: torch.device, kept: bool = False) -> Path:
    """Where the cache keeps whether compiled steps load with this torch on this machine (a dot
    file: no entry); `kept`: to read one, without making the cache directory (`current_dir`)."""
    return (current_dir() if kept else steps_dir()) / f".loads-{_environment(device)}.json"


def _environment(device: torch.device) -> str:
    """A name for this torch on this machine and device."""
    return _environment_of(str(device))


@functools.cache
def _environment_of(device: str) -> str:
    environment = [torch.__version__, machine(torch.device(device))]
    return hashlib.sha256(json.dumps(environment).encode()).hexdigest()[:16]


def _check_loads(path: Path, device: torch.device) -> tuple[str, bool]:
    """Load `path` in a child process (this one's Python, modules and environment): ("", True) if it
    loads, else what went wrong and whether it lasts (the process crashed: `CRASHES`)."""
    try:
        command, env = python_command(_LOAD_CHECK, str(path), str(device))
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "loading it did not end in 300 s", False
    except OSError as e:  # no process could start (too many, no memory)
        return f"no process could check it ({e})", False
    if done.returncode < 0:
        with contextlib.suppress(ValueError):
            crash = signal.Signals(-done.returncode)
            return f"loading it killed the process with {crash.name}", crash in CRASHES
        return f"loading it killed the process with signal {-done.returncode}", False
    if done.returncode:
        last = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        return f"loading it failed: {last[0][:200]}", False
    return "", True


def python_command(code: str, *args: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a child process running `code` with this process's Python and
    modules (its `sys.path`): neither a fork nor a spawn, which would run the caller's script again."""
    path = os.pathsep.join(p for p in sys.path if p)
    return [sys.executable, "-c", code, *args], {**os.environ, "PYTHONPATH": path}


def forget() -> None:
    """Forget every verdict, kept or this process's (`aiayn cache clear`): the next step loaded checks
    again."""
    for verdict in cache_dir().glob(".loads-*.json"):
        verdict.unlink(missing_ok=True)
    _verdicts.clear()
