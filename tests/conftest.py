from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from aiayn.config import model_config
from aiayn.model import Transformer

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--runslow", action="store_true", help="also run tests marked slow")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--runslow"):
        return
    skip = pytest.mark.skip(reason="slow: pass --runslow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def data_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The shared Multi30k data directory, as AIAYN_DATA_DIR; tests that need it skip without it."""
    path = Path(os.environ.get("AIAYN_DATA_DIR", SHARED_DATA))
    if not (path / "multi30k" / "train.en.gz").exists():
        pytest.skip(f"Multi30k not found under {path}")
    monkeypatch.setenv("AIAYN_DATA_DIR", str(path))
    return path


def tiny_model(**overrides) -> Transformer:
    """A small random model in eval mode (no dropout), vocabulary 50 unless overridden."""
    torch.manual_seed(0)
    return Transformer(model_config("tiny", **{"vocab_size": 50, **overrides})).eval()


def random_ids(batch: int, length: int, vocab: int = 50, seed: int = 0) -> torch.Tensor:
    """Ids that avoid the 4 special ids."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, vocab, (batch, length), generator=g)
