"""BPE-dropout and the moving average of the weights inside the training loop: a run with them resumes
exactly, the pieces and the average reach what they should, and without them nothing changes."""

import json

import torch

from aiayn import checkpoint
from aiayn.config import DataConfig, TrainConfig, model_config
from aiayn.data.batching import collate
from aiayn.model import Transformer
from aiayn.train.distributed import Ranks
from aiayn.train.loop import _Run, train
from aiayn.train.step import evaluate

DATA = DataConfig(batch_tokens=512)
CONFIG = TrainConfig(warmup_steps=10, valid_every=6, save_every=6, log_every=6, max_steps=18, bpe_dropout=0.3,
                     ema_decay=0.9)


def new_model(tokenizer):
    torch.manual_seed(1)
    return Transformer(model_config("tiny", vocab_size=tokenizer.vocab_size))


def weights(model):
    return model.state_dict()


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


def test_a_run_with_bpe_dropout_and_an_average_resumes_to_the_run_trained_straight(copy_task, tmp_path):
    tokenizer, train_data, valid_data = copy_task
    straight = new_model(tokenizer)
    train(straight, tokenizer, train_data, valid_data, DATA, CONFIG, tmp_path / "straight")
    half = TrainConfig(**{**vars(CONFIG), "max_steps": 12})
    train(new_model(tokenizer), tokenizer, train_data, valid_data, DATA, half, tmp_path / "resumed")
    ck = checkpoint.load(checkpoint.resolve(tmp_path / "resumed"))
    assert ck.step == 12 and ck.state["ema"]["updates"] == 12 and len(ck.state["ema"]["weights"]) > 0
    train(ck.model, ck.tokenizer, train_data, valid_data, DATA, CONFIG, tmp_path / "resumed", ck.state)

    assert same(weights(straight), weights(ck.model))
    ends = [checkpoint.load(checkpoint.resolve(tmp_path / run), ema=True).model
            for run in ("straight", "resumed")]
    assert same(weights(ends[0]), weights(ends[1]))
    assert not same(weights(ends[0]), weights(straight))  # the average is not the last weights

    plain = new_model(tokenizer)  # without BPE-dropout the run ends elsewhere: the pieces did differ
    usual = TrainConfig(**{**vars(CONFIG), "bpe_dropout": 0.0})
    train(plain, tokenizer, train_data, valid_data, DATA, usual, tmp_path / "usual")
    assert not same(weights(straight), weights(plain))


def test_validation_and_the_best_checkpoint_use_the_average(copy_task, tmp_path):
    tokenizer, train_data, valid_data = copy_task
    config = TrainConfig(**{**vars(CONFIG), "bpe_dropout": 0.0, "stop_metric": "loss"})
    model = new_model(tokenizer)
    train(model, tokenizer, train_data, valid_data, DATA, config, tmp_path)
    last = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()
            if '"valid"' in line][-1]
    averaged = checkpoint.load(checkpoint.resolve(tmp_path), ema=True).model
    ids = tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id
    batches = [collate(range(i, min(i + 100, len(valid_data))), valid_data, *ids)
               for i in range(0, len(valid_data), 100)]
    on_average = evaluate(averaged, batches, config.label_smoothing, tokenizer.pad_id, torch.device("cpu"))
    on_weights = evaluate(model, batches, config.label_smoothing, tokenizer.pad_id, torch.device("cpu"))
    assert abs(last["loss"] - on_average["loss"]) < 1e-4 < abs(last["loss"] - on_weights["loss"])
    best = checkpoint.load(tmp_path / "checkpoints" / "best").model  # the loss falls: the last is best
    assert same(weights(best), weights(averaged))


def test_without_bpe_dropout_batches_hold_the_usual_pieces(copy_task, tmp_path):
    tokenizer, train_data, _ = copy_task
    run = _Run(new_model(tokenizer), tokenizer, None, DATA, TrainConfig(), tmp_path, Ranks(),
               torch.device("cpu"))
    assert run.resampler is None and run.ema is None
    group = [list(range(40))]
    batch = run.own_batches(group, train_data)[0]
    usual = collate(group[0], train_data, tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id)
    assert torch.equal(batch.src, usual.src) and torch.equal(batch.tgt_out, usual.tgt_out)
