"""`aiayn train`: train a Transformer on parallel text, or resume a run."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

import torch

from aiayn import checkpoint
from aiayn import config as cfg
from aiayn.cli.options import add_config_options, add_recipe_options, given, resolve
from aiayn.data.batching import TokenizedCorpus, make_batches, padding_fraction, tokenize
from aiayn.data.corpora import DataError, default_valid, load_corpus
from aiayn.files import is_run_dir
from aiayn.model import Transformer, parameter_counts
from aiayn.tokenizer import Tokenizer
from aiayn.train.loop import limit_reached, resolve_device, train


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="train a model",
        description="Train the Transformer on parallel text. Writes RUN_DIR/checkpoints/step_N/ "
                    "(config, weights, tokenizer, training state) and RUN_DIR/metrics.jsonl. "
                    "Ctrl-C (or SIGTERM) stops after the current update, saves a checkpoint and exits "
                    "with status 130 (143); --resume continues exactly where a run stopped, from the "
                    "newest checkpoint that loads.")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="directory of this training run")
    p.add_argument("--resume", action="store_true",
                   help="continue from the newest checkpoint in RUN_DIR; training options given "
                        "here (for example a larger --max-steps) replace the saved ones")
    add_recipe_options(p)
    add_config_options(p, cfg.ModelConfig, "model (paper section 3)")
    add_config_options(p, cfg.DataConfig, "data")
    add_config_options(p, cfg.TrainConfig, "training (paper section 5)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if args.resume:
        model, tokenizer, data, train_config, state = _resumed(args, out)
    else:
        model, tokenizer, data, train_config = _fresh(args, out)
        state = None
    if train_config.threads:
        torch.set_num_threads(train_config.threads)
    train_data = _tokenized(data.train, data, tokenizer, data.max_len)
    if not len(train_data):
        raise DataError(f"no training pair left: {train_data.summary(data.train)}; check the files "
                        "and --max-len")
    valid_data = _valid(data, tokenizer)
    _describe(model, train_data, data, train_config)
    result = train(model, tokenizer, train_data, valid_data, data, train_config, out, state)
    print(f"saved {checkpoint.step_path(out, result['step'])}")
    if result["stopped_by"] is not None:  # the shell's convention: 128 + the signal's number
        print(f"stopped by {signal.Signals(result['stopped_by']).name}; continue with: "
              f"aiayn train --out {out} --resume", file=sys.stderr)
        return 128 + result["stopped_by"]
    return 0


def _fresh(args: argparse.Namespace, out: Path):
    if checkpoint.step_checkpoints(out):
        raise cfg.ConfigError(f"{out} already holds checkpoints: pass --resume to continue that run, "
                              "or choose another --out")
    if out.is_dir() and not is_run_dir(out) and any(out.iterdir()):
        raise cfg.ConfigError(f"{out} is not empty and is not a training run: choose a new --out")
    recipe = resolve(args)
    data, train_config = recipe.data, recipe.train
    model_options = recipe.model
    _check_lengths(cfg.model_config(recipe.preset, **model_options), data)
    if not recipe.preset_given:
        print(f"preset: {recipe.preset} (none given; the default on this device. --preset base is the "
              "paper's base model)")
    if data.tokenizer:
        tokenizer = Tokenizer.load(data.tokenizer)
    else:
        corpus = load_corpus(data.train, data.src_lang, data.tgt_lang)
        if not any(corpus.source) or not any(corpus.target):
            raise DataError(f"{corpus.name}: no text to learn a tokenizer from ({len(corpus):,} pairs, "
                            "all empty on one side)")
        vocab_size = cfg.model_config(recipe.preset, **model_options).vocab_size
        tokenizer = Tokenizer.train(corpus.source + corpus.target, vocab_size, train_config.seed)
    model_config = cfg.model_config(recipe.preset, **{
        **model_options, "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
        "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id})
    torch.manual_seed(train_config.seed)
    return Transformer(model_config), tokenizer, data, train_config


def _check_lengths(model: cfg.ModelConfig, data: cfg.DataConfig) -> None:
    """Learned positions must cover the longest training sequence (--max-len tokens + eos)."""
    if model.positional == "learned" and model.max_positions < data.max_len + 1:
        raise cfg.ConfigError(f"max_positions={model.max_positions} learned positions cannot hold training "
                              f"sequences of max_len={data.max_len} tokens + eos: raise --max-positions to "
                              f"{data.max_len + 1} or lower --max-len")


def _resumed(args: argparse.Namespace, out: Path):
    fixed = {**given(args, cfg.ModelConfig), **given(args, cfg.DataConfig)}
    if fixed or args.preset or args.config:
        names = ", ".join(sorted(fixed)) or "--preset/--config"
        raise cfg.ConfigError(f"--resume continues the saved model and data; cannot change {names}")
    if not checkpoint.step_checkpoints(out):
        raise cfg.ConfigError(f"{out}: no checkpoints to resume from (start a run without --resume)")
    ck = checkpoint.load_latest(out)
    train_config = cfg.build(cfg.TrainConfig, {**cfg.to_dict(ck.train), **given(args, cfg.TrainConfig)},
                             "command line")
    state = ck.state
    reached = limit_reached(train_config, ck.step, state["position"]["epoch"], state["elapsed"] / 60)
    if reached:
        raise cfg.ConfigError(f"{out} has already reached {reached} (step {ck.step:,}): nothing to resume; "
                              f"raise {reached.split()[0]} to train further")
    print(f"resuming {out} at step {ck.step:,} from {ck.path.name}")
    return ck.model, ck.tokenizer, ck.data, train_config, state


def _tokenized(spec: str, data: cfg.DataConfig, tokenizer: Tokenizer, max_len: int | None
               ) -> TokenizedCorpus:
    corpus = load_corpus(spec, data.src_lang, data.tgt_lang)
    tokenized = tokenize(corpus, tokenizer, max_len)
    print(tokenized.summary(corpus.name))
    return tokenized


def _valid(data: cfg.DataConfig, tokenizer: Tokenizer) -> TokenizedCorpus | None:
    spec = data.valid or default_valid(data.train)
    if not spec:
        print("no validation set: give --valid SPEC (the forms --train takes) to measure validation "
              "loss and keep the best checkpoint by BLEU")
        return None
    return _tokenized(spec, data, tokenizer, None)


def _describe(model: Transformer, train_data: TokenizedCorpus, data: cfg.DataConfig,
              train_config: cfg.TrainConfig) -> None:
    counts = parameter_counts(model)
    parts = ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in counts.items() if v and k != "total")
    print(f"model: {counts['total'] / 1e6:.2f}M parameters ({parts})")
    src_lens, tgt_lens = train_data.lengths()
    batches = make_batches(src_lens, tgt_lens, data.batch_tokens, train_config.seed)
    src_pad, tgt_pad = padding_fraction(batches, src_lens), padding_fraction(batches, tgt_lens)
    print(f"batches: {len(batches):,} per epoch of up to {data.batch_tokens:,} tokens; "
          f"padding {src_pad:.1%} source, {tgt_pad:.1%} target")
    device = resolve_device(train_config.device)
    threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
    print(f"device: {device}{threads}")
