import errno
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from aiayn import checkpoint, files
from aiayn.checkpoint import CheckpointError
from aiayn.config import DataConfig, TrainConfig
from aiayn.files import OutputError
from aiayn.tokenizer import Tokenizer
from tests.conftest import random_ids, tiny_model


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(["a b c d e f g"] * 30, 300)


def model_for(tokenizer, **overrides):
    return tiny_model(vocab_size=tokenizer.vocab_size, **overrides)


def save(path, tokenizer, state=None, **overrides):
    return checkpoint.save(path, model_for(tokenizer, **overrides), tokenizer, DataConfig(), TrainConfig(),
                           state)


def test_round_trip_restores_config_weights_tokenizer_and_state(tmp_path, tokenizer):
    model = model_for(tokenizer, share_embeddings=False)
    state = {"step": 7, "position": {"epoch": 1, "batch": 3}, "optimizer": {}, "rng": {}}
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
    model = checkpoint.load(save(tmp_path / "ck", tokenizer)).model
    assert model.output_proj.weight is model.src_embed.weight is model.tgt_embed.weight


def test_the_weights_file_is_byte_for_byte_the_same_in_every_process(tmp_path, tokenizer):
    """Problem 9: model.safetensors was not byte-reproducible (tied names in a random order)."""
    script = ("import sys, torch; from aiayn import checkpoint; from tests.conftest import tiny_model; "
              "sys.stdout.buffer.write(checkpoint.weights_bytes(tiny_model(vocab_size=300)))")
    repo = Path(__file__).parents[1]
    outputs = [subprocess.run([sys.executable, "-c", script], capture_output=True, check=True, cwd=repo,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")]
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0]) > 1000


def test_an_interrupted_write_leaves_no_visible_checkpoint(tmp_path, tokenizer, monkeypatch):
    run = tmp_path / "run"
    save(checkpoint.step_path(run, 10), tokenizer, {"step": 10, "position": {}, "optimizer": {}, "rng": {}})

    def crash(*args, **kwargs):
        raise RuntimeError("killed")

    monkeypatch.setattr(checkpoint, "weights_bytes", crash)
    with pytest.raises(RuntimeError):
        save(checkpoint.step_path(run, 20), tokenizer, {"step": 20})
    assert [p.name for p in checkpoint.step_checkpoints(run)] == ["step_00000010"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_00000010"]  # no leftovers
    assert checkpoint.load(checkpoint.resolve(run)).step == 10


def test_a_full_disk_is_said_as_such_and_the_previous_checkpoint_is_intact(tmp_path, tokenizer, monkeypatch):
    """Problem 6: a full disk gave no clear message and left half-written directories behind."""
    state = {"step": 10, "position": {}, "optimizer": {}, "rng": {}}
    path = save(tmp_path / "best", tokenizer, state)
    real_write = Path.write_bytes

    def disk_full(self, data):
        if self.name == "model.safetensors":
            real_write(self, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", disk_full)
    with pytest.raises(OutputError, match=f"{path}: no space left on device .* already at {path} is intact"):
        save(path, tokenizer, {**state, "step": 20})
    monkeypatch.undo()
    assert checkpoint.load(path).step == 10
    assert [p.name for p in tmp_path.iterdir()] == ["best"]


def test_prune_keeps_the_newest(tmp_path, tokenizer):
    for step in (1, 2, 3):
        save(checkpoint.step_path(tmp_path, step), tokenizer, {"step": step})
    checkpoint.prune(tmp_path, keep=2)
    assert [p.name for p in checkpoint.step_checkpoints(tmp_path)] == ["step_00000002", "step_00000003"]


def test_sinusoids_are_not_saved(tmp_path, tokenizer):
    path = save(tmp_path / "ck", tokenizer)
    meta = json.loads((path / "config.json").read_text())
    assert meta["model"]["positional"] == "sinusoidal"
    from safetensors import safe_open
    with safe_open(str(path / "model.safetensors"), "pt") as f:
        assert not any("position" in k for k in f.keys())


def test_loading_a_directory_that_is_not_a_checkpoint_says_so(tmp_path):
    with pytest.raises(CheckpointError, match="not a checkpoint directory"):
        checkpoint.load(tmp_path)
    with pytest.raises(CheckpointError, match="neither a checkpoint nor a run directory"):
        checkpoint.resolve(tmp_path)


def test_a_crafted_training_state_cannot_run_code(tmp_path, tokenizer):
    """Problem 2: `torch.load(weights_only=False)` ran whatever a training_state.pt asked for."""
    path = save(tmp_path / "ck", tokenizer, {"step": 1, "position": {}, "optimizer": {}, "rng": {}})
    marker = tmp_path / "owned"

    class Exploit:
        def __reduce__(self):
            return os.mkdir, (str(marker),)

    with open(path / "training_state.pt", "wb") as f:
        pickle.dump({"step": Exploit()}, f, protocol=2)
    with pytest.raises(CheckpointError, match=r"training_state.pt: refused: .* could run code"):
        checkpoint.load(path)
    assert not marker.exists()


def test_a_training_state_holds_only_tensors_and_plain_values(tmp_path, tokenizer):
    from aiayn.train.order import rng_state, set_rng_state

    state = {"step": 3, "position": {"epoch": 0, "batch": 3}, "optimizer": {}, "rng": rng_state()}
    before = np.random.random(), torch.rand(1)
    path = save(tmp_path / "ck", tokenizer, state)
    torch.load(path / "training_state.pt", weights_only=True)  # no allow-list needed
    set_rng_state(checkpoint.load(path).state["rng"])
    assert (np.random.random(), torch.rand(1)) == before


def test_a_state_written_with_numpys_own_random_state_still_loads(tmp_path, tokenizer):
    from aiayn.train.order import set_rng_state

    legacy = {"torch": torch.get_rng_state(), "python": __import__("random").getstate(),
              "numpy": np.random.get_state()}
    expected = np.random.random()
    path = save(tmp_path / "ck", tokenizer, {"step": 3, "position": {}, "optimizer": {}, "rng": legacy})
    set_rng_state(checkpoint.load(path).state["rng"])
    assert np.random.random() == expected


@pytest.mark.parametrize("damage, message", [
    (lambda p: (p / "model.safetensors").write_bytes((p / "model.safetensors").read_bytes()[:100]),
     "model.safetensors: cannot read the weights"),
    (lambda p: (p / "config.json").write_text("{\"model\": {"), "config.json: cannot read"),
    (lambda p: (p / "config.json").write_text("[]"), "config.json: no model, data, train section"),
    (lambda p: (p / "tokenizer.model").write_bytes(b"garbage"), "tokenizer.model: not a SentencePiece model"),
    (lambda p: (p / "training_state.pt").write_bytes(b"PK\x03\x04 cut short"),
     "training_state.pt: cannot read the training state"),
])
def test_a_damaged_file_is_an_error_naming_it(tmp_path, tokenizer, damage, message):
    """Problem 6: a truncated model.safetensors or a bad config.json gave a raw traceback without the file."""
    path = save(tmp_path / "ck", tokenizer, {"step": 1, "position": {}, "optimizer": {}, "rng": {}})
    damage(path)
    with pytest.raises(CheckpointError, match=message) as e:
        checkpoint.load(path)
    assert str(path) in str(e.value)


@pytest.mark.parametrize("field, value", [("n_heads", 2), ("activation", "gelu"), ("eos_id", 4)])
def test_a_config_that_disagrees_with_the_weights_is_an_error(tmp_path, tokenizer, field, value):
    """Problem 7: a checkpoint whose config.json disagreed with its weights loaded and translated garbage."""
    path = save(tmp_path / "ck", tokenizer)
    meta = json.loads((path / "config.json").read_text())
    meta["model"][field] = value
    (path / "config.json").write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match=f"config.json does not match the model in .*{field} is"):
        checkpoint.load(path)


def test_a_tokenizer_that_disagrees_with_the_model_is_an_error(tmp_path, tokenizer):
    path = checkpoint.save(tmp_path / "ck", tiny_model(vocab_size=50), tokenizer, DataConfig(), TrainConfig())
    with pytest.raises(CheckpointError, match="vocab_size 50 there but 275 pieces in the tokenizer"):
        checkpoint.load(path)


def test_resume_takes_the_newest_checkpoint_that_loads_and_says_which_it_skipped(tmp_path, tokenizer):
    """Problem 6: resume did not fall back to the newest checkpoint that loads."""
    for step in (10, 20, 30):
        save(checkpoint.step_path(tmp_path, step), tokenizer,
             {"step": step, "position": {}, "optimizer": {}, "rng": {}})
    (checkpoint.step_path(tmp_path, 30) / "model.safetensors").write_bytes(b"")
    (checkpoint.step_path(tmp_path, 20) / "training_state.pt").unlink()
    said = []
    ck = checkpoint.load_latest(tmp_path, report=said.append)
    assert ck.step == 10 and ck.path.name == "step_00000010"
    assert said[0].startswith("skipping step_00000030: ") and "model.safetensors" in said[0]
    assert said[1].startswith("skipping step_00000020: ") and "training_state.pt: missing" in said[1]


def test_resume_without_any_loadable_training_state_is_an_error_naming_the_file(tmp_path, tokenizer):
    """Problem 3: a checkpoint without training_state.pt resumed silently at step 0."""
    save(checkpoint.step_path(tmp_path, 10), tokenizer)  # as an average or a conversion: no state
    with pytest.raises(CheckpointError, match=r"step_00000010/training_state.pt: missing"):
        checkpoint.load_latest(tmp_path, report=lambda _: None)


def test_averaging_checkpoints_with_different_tokenizers_is_an_error(tmp_path, tokenizer):
    """Problem 7: checkpoints with different tokenizers were averaged."""
    other = Tokenizer.train(["h i j k l m n"] * 30, 300)
    assert other.vocab_size == tokenizer.vocab_size
    a, b = save(tmp_path / "a", tokenizer), save(tmp_path / "b", other)
    with pytest.raises(CheckpointError, match="has a different tokenizer"):
        checkpoint.average([a, b], tmp_path / "avg")
    assert not (tmp_path / "avg").exists()


def test_saving_a_checkpoint_over_something_else_is_refused(tmp_path, tokenizer):
    """Problem 1: checkpoint.save moved any existing directory aside and deleted it."""
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not empty and holds no aiayn checkpoint"):
        save(tmp_path / "out", tokenizer)
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"
    save(tmp_path / "ck", tokenizer)
    save(tmp_path / "ck", tokenizer)  # an older checkpoint is replaced
    assert checkpoint.is_checkpoint(tmp_path / "ck")


def test_leftovers_of_a_killed_run_are_found_in_its_checkpoints(tmp_path):
    pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                         text=True, check=True).stdout.strip()
    root = tmp_path / "checkpoints"
    for name in (f".step_00000020.tmp-{pid}", f".best.tmp-{pid}", f".notes.tmp-{pid}"):
        (root / name).mkdir(parents=True)
    removed = sorted(p.name for p in checkpoint.clean_leftovers(tmp_path))
    assert removed == [f".best.tmp-{pid}", f".step_00000020.tmp-{pid}"]
    assert (root / f".notes.tmp-{pid}").exists()  # not a checkpoint's: not ours to remove
    assert files.clean_leftovers(root, lambda name: False) == []
