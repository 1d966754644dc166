"""The layers of the code, as docs/architecture.md states them, read from the imports."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "aiayn"


def imports(path: Path) -> set[str]:
    """The aiayn modules a file imports (at any depth of the file, lazily or not)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("aiayn")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aiayn"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def layer(module: str) -> str:
    """The top-level part of aiayn a module belongs to: `aiayn.model.cache` -> "model"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and not parts[1].startswith("__") else ""  # aiayn.__version__: ""


# Which parts of aiayn each part may import; a part always imports from itself.
ALLOWED = {
    "model": {"config", "errors"},
    "decoding": {"config", "errors", "model", "data", "tokenizer", "files", "timing"},  # timing: a leaf
    "checkpoint": {"config", "errors", "files", "model", "tokenizer"},
    "data": {"config", "errors", "files", "tokenizer"},
    "tokenizer": {"errors"},
    "devices": {"config", "errors"},
    "config": {"errors"},
    "files": {"errors"},
    "serve": {"config", "errors", "translation", "text", "explain"},  # the public APIs, and text tools
    "explain": {"config", "errors", "files", "model", "decoding", "tokenizer", "translation"},
    "text": {"errors"},  # what turns real text into sentences and back knows nothing of models
}
NOBODY_IMPORTS = {"cli"}


def sources() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


@pytest.mark.parametrize("path", sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_each_module_imports_only_the_layers_below_it(path):
    part = path.relative_to(SRC).parts[0].removesuffix(".py")
    imported = {layer(m) for m in imports(path)} - {part, ""}
    if part in ALLOWED:
        assert imported <= ALLOWED[part], f"{part} imports {sorted(imported - ALLOWED[part])}"
    if part not in ("cli", "__main__"):
        assert not imported & NOBODY_IMPORTS, f"{path} imports the command line"


def test_the_rule_fails_when_the_model_imports_decoding(tmp_path):
    bad = tmp_path / "transformer.py"
    bad.write_text("from aiayn.decoding.beam import beam_search\n")
    assert {layer(m) for m in imports(bad)} - {"model"} - ALLOWED["model"] == {"decoding"}


def test_the_model_does_not_know_it_may_be_compiled():
    """model/ reads like the paper: no branches on compilation; speed machinery lives in decoding/."""
    for path in sorted((SRC / "model").rglob("*.py")):
        names = {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}
        assert not names & {"is_compiling", "is_dynamo_compiling", "ancestors"}, path


def module_graph() -> dict[str, set[str]]:
    """Each aiayn module -> the aiayn modules it imports (at any depth of the file)."""
    names = {".".join(p.relative_to(SRC.parent).with_suffix("").parts).removesuffix(".__init__"): p
             for p in sources()}
    graph = {}
    for name, path in names.items():
        # `from aiayn.data import hf` imports aiayn.data.hf; so does `from aiayn.data.hf import x`
        found = {m if m in names else m.rpartition(".")[0] for m in imports(path)}
        graph[name] = {m for m in found if m in names and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: each a path that starts and ends at the same module."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node):] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, path + [node])
        done.add(node)

    for node in sorted(graph):
        visit(node, [])
    return found


def test_no_module_imports_one_that_imports_it_back():
    """A cycle (data.corpora <-> data.multi30k, say) makes the order of imports matter: none is left."""
    assert cycles(module_graph()) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


def test_translating_needs_no_training_code():
    """What loads and runs a model for translation reaches no training module (the loop, its data
    order, its checkpoints of optimiser state), at any depth."""
    graph, seen, todo = module_graph(), set(), ["aiayn.translation"]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo += graph[module]
    training = sorted(m for m in seen if m == "aiayn.training" or m.startswith("aiayn.train."))
    assert not training, f"aiayn.translation reaches {training}"
