"""What `pip install aiayn` installs is enough to run its commands: every package that importing the
command line loads belongs to aiayn's own dependencies (or theirs). The test suite's environment
holds more (transformers, spaCy, ...), so a missing dependency does not show in other tests."""

import importlib.metadata as metadata
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: list[str]) -> set[str]:
    """The distributions `names` need, theirs included (extras and environment markers aside)."""
    seen, todo = set(), [n.lower().replace("_", "-") for n in names]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r]
    return seen


BLOCKING = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Block())
import aiayn.cli, aiayn.translation
"""


def test_the_command_line_imports_with_only_the_declared_dependencies():
    """As if only aiayn's dependencies were installed: every other package's modules made impossible
    to import (optional imports, such as torch's of dill, fail quietly as they would)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    allowed = _closure([_name(r) for r in project["dependencies"]]) | {"aiayn"}
    blocked = sorted(module for module, owners in metadata.packages_distributions().items()
                     if not any(d.lower().replace("_", "-") in allowed for d in owners))
    done = subprocess.run([sys.executable, "-c", BLOCKING, json.dumps(blocked)], capture_output=True,
                          text=True)
    assert done.returncode == 0, f"aiayn needs a package pyproject.toml does not list: {done.stderr[-600:]}"
