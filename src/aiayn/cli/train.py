"""`aiayn train`: train a Transformer on parallel text, or resume a run."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch

from aiayn import checkpoint
from aiayn import config as cfg
from aiayn.cli.options import add_config_options, add_recipe_options, given, resolve
from aiayn.data.batching import TokenizedCorpus, make_batches, padding_fraction, tokenize
from aiayn.data.corpora import default_valid, load_corpus
from aiayn.model import Transformer, parameter_counts
from aiayn.tokenizer import Tokenizer
from aiayn.train.loop import resolve_device, train


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="train a model",
        description="Train the Transformer on parallel text. Writes RUN_DIR/checkpoints/step_N/ "
                    "(config, weights, tokenizer, training state) and RUN_DIR/metrics.jsonl. "
                    "Ctrl-C stops after the current update and saves a checkpoint; --resume "
                    "continues exactly where a run stopped.")
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
    valid_spec = data.valid or default_valid(data.train)
    valid_data = _tokenized(valid_spec, data, tokenizer, None) if valid_spec else None
    _describe(model, train_data, data, train_config)
    result = train(model, tokenizer, train_data, valid_data, data, train_config, out, state)
    print(f"saved {checkpoint.step_path(out, result['step'])}")
    return 0


def _fresh(args: argparse.Namespace, out: Path):
    if checkpoint.step_checkpoints(out):
        raise cfg.ConfigError(f"{out} already holds checkpoints: pass --resume to continue that run, "
                              "or choose another --out")
    preset, model_options, data, train_config = resolve(args)
    if data.tokenizer:
        tokenizer = Tokenizer.load(data.tokenizer)
    else:
        corpus = load_corpus(data.train, data.src_lang, data.tgt_lang)
        vocab_size = cfg.model_config(preset, **model_options).vocab_size
        tokenizer = Tokenizer.train(corpus.source + corpus.target, vocab_size, train_config.seed)
    model_config = cfg.model_config(preset, **{
        **model_options, "vocab_size": tokenizer.vocab_size, "pad_id": tokenizer.pad_id,
        "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id})
    torch.manual_seed(train_config.seed)
    return Transformer(model_config), tokenizer, data, train_config


def _resumed(args: argparse.Namespace, out: Path):
    fixed = {**given(args, cfg.ModelConfig), **given(args, cfg.DataConfig)}
    if fixed or args.preset or args.config:
        names = ", ".join(sorted(fixed)) or "--preset/--config"
        raise cfg.ConfigError(f"--resume continues the saved model and data; cannot change {names}")
    ck = checkpoint.load(checkpoint.resolve(out))
    train_config = dataclasses.replace(ck.train, **given(args, cfg.TrainConfig))
    print(f"resuming {out} at step {ck.step:,}")
    return ck.model, ck.tokenizer, ck.data, train_config, ck.state


def _tokenized(spec: str, data: cfg.DataConfig, tokenizer: Tokenizer, max_len: int | None
               ) -> TokenizedCorpus:
    corpus = load_corpus(spec, data.src_lang, data.tgt_lang)
    tokenized = tokenize(corpus, tokenizer, max_len)
    print(tokenized.summary(corpus.name))
    return tokenized


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
