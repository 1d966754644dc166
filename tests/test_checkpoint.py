import json

import pytest
import torch

from aiayn import checkpoint
from aiayn.config import DataConfig, TrainConfig
from aiayn.tokenizer import Tokenizer
from tests.conftest import random_ids, tiny_model


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(["a b c d e f g"] * 30, 300)


def test_round_trip_restores_config_weights_tokenizer_and_state(tmp_path, tokenizer):
    model = tiny_model(share_embeddings=False)
    state = {"step": 7, "position": {"epoch": 1, "batch": 3}}
    path = checkpoint.save(tmp_path / "ck", model, tokenizer, DataConfig(src_lang="fr"), TrainConfig(seed=5),
                           state)
    assert sorted(p.name for p in path.iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.model", "training_state.pt"]
    ck = checkpoint.load(path)
    assert ck.model.config == model.config and ck.data.src_lang == "fr" and ck.train.seed == 5
    assert ck.step == 7 and ck.state["position"] == {"epoch": 1, "batch": 3}
    assert ck.tokenizer.source_proto == tokenizer.source_proto and ck.tokenizer.vocab is None
    src, tgt = random_ids(2, 5), random_ids(2, 4, seed=1)
    assert torch.equal(ck.model.eval()(src, tgt), model(src, tgt))


def test_tied_weights_stay_tied_after_loading(tmp_path, tokenizer):
    path = checkpoint.save(tmp_path / "ck", tiny_model(), tokenizer, DataConfig(), TrainConfig())
    model = checkpoint.load(path).model
    assert model.output_proj.weight is model.src_embed.weight is model.tgt_embed.weight


def test_an_interrupted_write_leaves_no_visible_checkpoint(tmp_path, tokenizer, monkeypatch):
    run = tmp_path / "run"
    checkpoint.save(checkpoint.step_path(run, 10), tiny_model(), tokenizer, DataConfig(), TrainConfig(),
                    {"step": 10})

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "save_model", crash)
    with pytest.raises(OSError):
        checkpoint.save(checkpoint.step_path(run, 20), tiny_model(), tokenizer, DataConfig(), TrainConfig(),
                        {"step": 20})
    assert [p.name for p in checkpoint.step_checkpoints(run)] == ["step_00000010"]
    assert checkpoint.resolve(run).name == "step_00000010"
    assert checkpoint.load(checkpoint.resolve(run)).step == 10


def test_prune_keeps_the_newest(tmp_path, tokenizer):
    for step in (1, 2, 3):
        checkpoint.save(checkpoint.step_path(tmp_path, step), tiny_model(), tokenizer, DataConfig(),
                        TrainConfig(), {"step": step})
    checkpoint.prune(tmp_path, keep=2)
    assert [p.name for p in checkpoint.step_checkpoints(tmp_path)] == ["step_00000002", "step_00000003"]


def test_sinusoids_are_not_saved(tmp_path, tokenizer):
    path = checkpoint.save(tmp_path / "ck", tiny_model(), tokenizer, DataConfig(), TrainConfig())
    meta = json.loads((path / "config.json").read_text())
    assert meta["model"]["positional"] == "sinusoidal"
    from safetensors import safe_open
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        assert not any("position" in k for k in f.keys())


def test_loading_a_directory_that_is_not_a_checkpoint_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a checkpoint directory"):
        checkpoint.load(tmp_path)
    with pytest.raises(FileNotFoundError, match="neither a checkpoint nor a run directory"):
        checkpoint.resolve(tmp_path)
