"""Fixtures of the compiled-step tests."""

import pytest

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
