"""The recipes: each loads as a checked recipe, and the WMT14 one (scripts/wmt14.sh) runs its whole
path (prepare, torchrun with 2 processes, average, evaluate) on a tiny synthetic corpus."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aiayn import checkpoint
from aiayn import config as cfg
from tests.conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("recipe", sorted((ROOT / "recipes").glob("*.toml")), ids=lambda p: p.name)
def test_every_recipe_is_a_valid_recipe(recipe):
    cfg.recipe(cfg.load_config_file(recipe), str(recipe))


def test_the_wmt14_recipe_is_the_papers_base_setting():
    recipe = cfg.recipe(cfg.load_config_file(ROOT / "recipes" / "wmt14-ende-base.toml"), "wmt14")
    model = cfg.model_config(recipe.preset, **recipe.model)
    assert (model.n_encoder_layers, model.n_decoder_layers, model.d_model, model.n_heads, model.d_ff,
            model.dropout) == (6, 6, 512, 8, 2048, 0.1)
    train = recipe.train
    assert (train.update_tokens, train.warmup_steps, train.max_steps, train.keep_checkpoints) == \
        (25000, 4000, 100_000, 5)
    assert (train.label_smoothing, train.adam_beta2, train.adam_eps) == (0.1, 0.98, 1e-9)


def test_the_wmt14_script_runs_its_whole_path_on_a_tiny_corpus(tmp_path):
    env = {**os.environ, "DRY_RUN": "1", "OUT": str(tmp_path / "run"), "DATA": str(tmp_path / "data"),
           "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "wmt14.sh")], env=env, capture_output=True,
                          text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 processes (torchrun)" in done.stdout
    assert json.loads((tmp_path / "data" / "data.json").read_text())["valid"] == "synthetic:reverse:val"
    averaged = checkpoint.load(tmp_path / "run" / "averaged")
    assert averaged.model.config.d_model == cfg.PRESETS["tiny"]["d_model"]
    assert checkpoint.load_latest(tmp_path / "run").step == 6
    scores = json.loads((tmp_path / "run" / "newstest2014.json").read_text())
    assert "bleu" in json.dumps(scores).lower()
    assert len((tmp_path / "run" / "newstest2014.de").read_text().splitlines()) == 500
