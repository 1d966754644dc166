"""Fixtures of the compiled-step tests."""

import hashlib
from pathlib import Path

import pytest
import torch

from aiayn.decoding import compiled, packages


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache of the test's own; `builds` counts the steps compiled. A search's first step
    runs eagerly here, so that each search compiles one step."""
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "FIRST_STEP_ROWS", 0)
    builds = []
    build = packages.build

    def counted(*args, **kwargs):
        builds.append(args[0])
        return build(*args, **kwargs)

    monkeypatch.setattr(packages, "build", counted)
    return builds


_packages: dict[str, bytes] = {}  # this worker's AOTInductor packages, by what they were compiled from


@pytest.fixture
def inductor_once(monkeypatch):
    """AOTInductor's package for an exported step that it compiled before in this worker (the same
    program, weights and settings) is copied, not compiled again: for the tests of the cache around
    the compiler (tests/decoding/test_compiled.py tests what the compiler makes). Export, the cache's
    building, storing, checking and loading all run; a test that changes Inductor in another way than
    the builds' freezing and packing settings must not use it. -> the packages compiled for real."""
    compile_ = torch._inductor.aoti_compile_and_package
    compiled_now = []

    def once(exported, package_path, **options):
        key = _digest(exported) + repr(sorted(options.items()))
        if key in _packages:
            Path(package_path).write_bytes(_packages[key])
            return package_path
        made = compile_(exported, package_path=package_path, **options)
        _packages[key] = Path(package_path).read_bytes()
        compiled_now.append(key)
        return made

    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", once)
    return compiled_now


def _digest(exported: torch.export.ExportedProgram) -> str:
    """What a compiled package depends on: the program (its graph, with its inputs' shapes), the
    values of its weights and constants, and Inductor's settings that the cache's builds change."""
    from torch._inductor import config

    digest = hashlib.sha256(str(exported).encode())
    digest.update(repr((config.freezing, config.cpp.weight_prepack)).encode())
    for name, tensor in sorted({**exported.state_dict, **exported.constants}.items()):
        if isinstance(tensor, torch.Tensor):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()
