"""The public training API: train a Transformer on parallel text, or resume a run.

    import aiayn

    run = aiayn.train_model("runs/tiny", train="multi30k", src_lang="en", tgt_lang="de",
                            preset="tiny", max_steps=100)
    print(run.checkpoint, run.metrics["loss"])
    translator = aiayn.load_translator(run.run_dir)

Options are the fields of `ModelConfig`, `DataConfig` and `TrainConfig`, by name (the flags of
`aiayn train`, with `_` for `-`); precedence, lowest first: the dataclasses' defaults, the preset,
a recipe file (`config`), the options. Everything is checked before any data is read. A fresh
run learns a SentencePiece tokenizer on the training text unless `tokenizer` names one; a resumed
run continues the saved model and data exactly: its training options replace the saved ones, and
the preset, recipe file, model and data options, when given, must equal the run's. `aiayn train`
is this function on the command line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn import checkpoint
from aiayn import config as cfg
from aiayn.data import binarized, multilingual, prepared
from aiayn.data.batching import TokenizedCorpus, padding_fraction, tokenize
from aiayn.data.corpora import default_valid, load_corpus
from aiayn.data.mixing import Mix
from aiayn.data.readers import DataError
from aiayn.devices import resolve_device
from aiayn.files import is_run_dir
from aiayn.model import Transformer, parameter_counts
from aiayn.tokenizer import Tokenizer
from aiayn.train import distributed, init
from aiayn.train.loop import train
from aiayn.train.stopping import limit_reached

__all__ = ["TrainingRun", "train_model"]

_SECTIONS = {"model": cfg.ModelConfig, "data": cfg.DataConfig, "train": cfg.TrainConfig}


@dataclass
class TrainingRun:
    """What a call of `train_model` did."""

    run_dir: Path
    step: int  # updates done, in this call and before it
    checkpoint: Path  # the checkpoint written last (RUN_DIR/checkpoints/step_N)
    metrics: dict[str, Any]  # of the last update: loss, tokens, ...; "valid" and "bleu" when measured
    stopped_by: int | None  # the signal (SIGINT, SIGTERM) that stopped the run early, or None
    early_stop: str | None = None  # why the run stopped by itself (--patience), or None


def train_model(out: str | Path, *, resume: bool = False, preset: str | None = None,
                config: str | Path | None = None, **options: Any) -> TrainingRun:
    """Train a model into the run directory `out`, or with `resume` continue the run there.

    `preset`: tiny, small, base or big (default: base on a GPU, small otherwise); `config`: a recipe
    file (.toml or .json); `options`: fields of the model, data and training configs by name, for
    example `train="data/train"`, `src_lang="en"`, `d_model=256`, `max_steps=1000`.
    Raises `ConfigError` for a wrong option, `DataError` for unusable data (a subclass of
    `AiaynError` each) before training starts.
    """
    out = Path(out)
    sections = _split(options)
    ranks = distributed.from_environment()
    with contextlib.ExitStack() as stack:
        if not ranks.main:  # under torchrun rank 0 speaks for all; errors still reach stderr
            stack.enter_context(contextlib.redirect_stdout(stack.enter_context(open(os.devnull, "w"))))
        return _train_model(out, resume, preset, config, sections, ranks)


def _train_model(out: Path, resume: bool, preset: str | None, config: str | Path | None,
                 sections: dict[str, dict[str, Any]], ranks: distributed.Ranks) -> TrainingRun:
    if resume:
        model, tokenizer, data, train_config, state = _resumed(out, preset, config, sections)
    else:
        model, tokenizer, data, train_config = _fresh(out, preset, config, sections, ranks)
        state = None
    if train_config.threads:
        torch.set_num_threads(train_config.threads)
    train_data = _mix(data, tokenizer)
    valid_data = _valid(data, tokenizer) if ranks.main else None
    _describe(model, train_data, data, train_config, ranks)
    result = train(model, tokenizer, train_data, valid_data, data, train_config, out, state, ranks)
    return TrainingRun(out, result["step"], checkpoint.step_path(out, result["step"]), result["metrics"],
                       result["stopped_by"], result.get("early_stop"))


def _split(options: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Options by name -> {"model": {...}, "data": {...}, "train": {...}}; None means not given."""
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    owner = {f.name: name for name, cls in _SECTIONS.items() for f in dataclasses.fields(cls)}
    unknown = sorted(set(options) - set(owner))
    if unknown:
        raise cfg.ConfigError(f"unknown training option(s) {', '.join(unknown)}: options are the fields "
                              "of ModelConfig, DataConfig and TrainConfig")
    for name, value in options.items():
        if value is not None:
            sections[owner[name]][name] = value
    return sections


def _fresh(out: Path, preset: str | None, config: str | Path | None,
           options: dict[str, dict[str, Any]], ranks: distributed.Ranks):
    if checkpoint.step_checkpoints(out):
        raise cfg.ConfigError(f"{out} already holds checkpoints: pass --resume to continue that run, "
                              "or choose another --out")
    if out.is_dir() and not is_run_dir(out) and any(out.iterdir()):
        raise cfg.ConfigError(f"{out} is not empty and is not a training run: choose a new --out")
    recipe = _recipe(preset, config, options)
    if recipe.data.pairs:  # a multilingual model's languages, as its files name them: its first direction's
        first_src, first_tgt = recipe.data.pairs[0].split("-")
        recipe = dataclasses.replace(recipe, data=dataclasses.replace(recipe.data, src_lang=first_src,
                                                                      tgt_lang=first_tgt))
    if recipe.train.init_from:
        return _from_parent(out, recipe)
    data, train_config = recipe.data, recipe.train
    model_options = recipe.model
    asked = cfg.model_config(recipe.preset, **model_options)  # vocabulary sizes and ids: the tokenizer's
    _check_lengths(asked, data)
    if not recipe.preset_given:
        print(f"preset: {recipe.preset} (none given; the default on this device. --preset base is the "
              "paper's base model)")
    tokenizer = _tokenizer(data, asked, train_config.seed, ranks)
    sizes = {"vocab_size": tokenizer.vocab_size}
    if tokenizer.separate:
        sizes["src_vocab_size"] = tokenizer.source_vocab_size
    _check_vocabulary(tokenizer, asked, data)
    model_config = cfg.model_config(recipe.preset, **{
        **model_options, **sizes, "pad_id": tokenizer.pad_id,
        "bos_id": tokenizer.bos_id, "eos_id": tokenizer.eos_id})
    torch.manual_seed(train_config.seed)
    return Transformer(model_config), tokenizer, data, train_config


def _tokenizer(data: cfg.DataConfig, asked: cfg.ModelConfig, seed: int,
               ranks: distributed.Ranks) -> Tokenizer:
    """A new run's tokenizer: the one given, or one learned from the training corpora (one vocabulary
    over all the languages of a multilingual model)."""
    if data.tokenizer:
        return Tokenizer.load(data.tokenizer)
    if tokenized := [spec for spec in data.train if binarized.is_corpus_dir(Path(spec))]:
        raise cfg.ConfigError(f"{tokenized[0]} is a tokenized corpus: give its tokenizer with --tokenizer, "
                              "or the whole data directory with --data")
    if ranks.world > 1:
        raise cfg.ConfigError("under torchrun every rank must use one vocabulary: prepare it first "
                              "(`aiayn prepare --train SPEC --out DATA_DIR`) and pass --data DATA_DIR "
                              "(or --tokenizer)")
    if data.pairs:
        if asked.separate:
            raise cfg.ConfigError("--pairs learns one vocabulary over all the languages: train with "
                                  "--vocabulary joint")
        by_language: dict[str, list[str]] = {}  # each language's sentences, from the first direction with it
        for d in map(multilingual.Direction.parse, data.pairs):
            if d.src not in by_language or d.tgt not in by_language:
                corpora = [load_corpus(spec, d.src, d.tgt) for spec in data.train]
                by_language.setdefault(d.src, [s for c in corpora for s in c.source])
                by_language.setdefault(d.tgt, [t for c in corpora for t in c.target])
        return Tokenizer.learn_languages(by_language, asked.vocab_size, seed)
    corpora = [load_corpus(spec, data.src_lang, data.tgt_lang) for spec in data.train]
    source = [s for corpus in corpora for s in corpus.source]
    target = [t for corpus in corpora for t in corpus.target]
    if not any(source) or not any(target):
        raise DataError(f"{', '.join(c.name for c in corpora)}: no text to learn a tokenizer from "
                        f"({len(source):,} pairs, all empty on one side)")
    return Tokenizer.learn(source, target, asked.vocab_size, seed, asked.source_vocab_size if asked.separate
                           else None)


def _from_parent(out: Path, recipe: cfg.Recipe):
    """A new run that starts from the model `--init-from` names (train/init.py)."""
    parent = init.load_parent(recipe.train.init_from)
    if out.resolve() == parent.path.resolve() or out.resolve() in parent.path.resolve().parents:
        raise cfg.ConfigError(f"--out {out} holds the model it starts from: choose another --out")
    preset = cfg.PRESETS[recipe.preset] if recipe.preset_given else {}
    # A preset's vocabulary size is what a new tokenizer would learn; the parent's tokenizer is given.
    given = {**{k: v for k, v in preset.items() if k != "vocab_size"}, **recipe.model}
    init.check_options(parent, given, recipe.data.tokenizer, "options")
    if parent.language_token and recipe.data.pairs and recipe.data.language_token != parent.language_token:
        raise cfg.ConfigError(f"{parent.path} is told the target language in the {parent.language_token}: "
                              f"train on from it with --language-token {parent.language_token}")
    torch.manual_seed(recipe.train.seed)  # as a fresh run: its dropout draws from the seed
    model = init.child(parent, recipe.model)
    _check_lengths(model.config, recipe.data)
    train_config = dataclasses.replace(recipe.train, init_from=str(parent.path.resolve()),
                                       init_sha256=parent.sha256)
    print(f"starting from {parent.path} (weights sha256 {parent.sha256[:12]}): its architecture, tokenizer "
          "and weights; a fresh optimiser, learning-rate schedule and step")
    return model, parent.tokenizer, recipe.data, train_config


def _check_vocabulary(tokenizer: Tokenizer, model: cfg.ModelConfig, data: cfg.DataConfig) -> None:
    """A given tokenizer has the vocabularies the model config asks for."""
    if tokenizer.separate != model.separate:
        has = "separate source and target vocabularies" if tokenizer.separate else "one joint vocabulary"
        fix = "--vocabulary separate --no-share-embeddings" if tokenizer.separate else "--vocabulary joint"
        raise cfg.ConfigError(f"the tokenizer {data.tokenizer} has {has}: train with {fix}")


def _recipe(preset: str | None, config: str | Path | None,
            options: dict[str, dict[str, Any]]) -> cfg.Recipe:
    """The checked recipe from defaults, preset, recipe file and options (each overriding the one before)."""
    sections = _sections(preset, config, options)
    if sections["train"].get("init_from") and not set(init.FINE_TUNING) & set(sections["train"]):
        sections["train"] = {**init.FINE_TUNING, **sections["train"]}  # a schedule for trained weights
        print("learning rate after --init-from: " + ", ".join(f"--{k.replace('_', '-')} {v}"
                                                              for k, v in init.FINE_TUNING.items()))
    return cfg.recipe(sections, f"{config} and the options" if config else "options")


def _sections(preset: str | None, config: str | Path | None,
              options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The recipe file's sections with the options merged in (and the preset, when given): what was
    asked, before defaults."""
    sections = cfg.load_config_file(config) if config else {}
    if "train" in options["data"] and "train_weights" not in options["data"]:  # the file's weights
        sections.get("data", {}).pop("train_weights", None)  # were for the file's corpora
    for name in _SECTIONS:
        sections[name] = {**sections.get(name, {}), **options[name]}
    if sections["data"].get("data"):
        sections["data"] = _with_prepared(sections["data"])
    if preset:
        sections["preset"] = preset
    return sections


def _with_prepared(data: dict[str, Any]) -> dict[str, Any]:
    """The data options with those that `data` (a prepared data directory) stands for filled in."""
    if not isinstance(data["data"], str):
        return data  # the config's own check names the wrong type
    found = prepared.load(data["data"])
    options = found.data_options()
    clash = [k for k in ("train", "valid", "tokenizer") if k in data]
    clash += [k for k in ("src_lang", "tgt_lang") if k in data and data[k] != options[k]]
    if clash:
        names = ", ".join("--" + k.replace("_", "-") for k in clash)
        raise cfg.ConfigError(f"--data {data['data']} already sets {names} (from `aiayn prepare`): "
                              "give one or the other")
    return {**data, **options}


def _check_lengths(model: cfg.ModelConfig, data: cfg.DataConfig) -> None:
    """Learned positions must cover the longest training sequence (--max-len tokens + eos, and the
    target language's piece with --pairs)."""
    longest = data.max_len + 1 + bool(data.pairs)
    if model.positional == "learned" and model.max_positions < longest:
        raise cfg.ConfigError(f"max_positions={model.max_positions} learned positions cannot hold training "
                              f"sequences of max_len={data.max_len} tokens + eos: raise --max-positions to "
                              f"{longest} or lower --max-len")


def _resumed(out: Path, preset: str | None, config: str | Path | None,
             options: dict[str, dict[str, Any]]):
    if not checkpoint.step_checkpoints(out):
        raise cfg.ConfigError(f"{out}: no checkpoints to resume from (start a run without --resume)")
    ck = checkpoint.load_latest(out)
    train_options = options["train"]
    if preset or config or options["model"] or options["data"] or "init_from" in train_options:
        train_options = _same_run(ck, preset, config, options)
    train_config = cfg.build(cfg.TrainConfig, {**cfg.to_dict(ck.train), **train_options},
                             f"{config} and the options" if config else "options")
    changed = [f"--{f.name.replace('_', '-')} {getattr(ck.train, f.name)} -> {getattr(train_config, f.name)}"
               for f in dataclasses.fields(cfg.TrainConfig)
               if getattr(train_config, f.name) != getattr(ck.train, f.name)]
    state = ck.state
    reached = limit_reached(train_config, ck.step, state["position"]["epoch"], state["elapsed"] / 60)
    if reached:
        raise cfg.ConfigError(f"{out} has already reached {reached} (step {ck.step:,}): nothing to resume; "
                              f"raise {reached.split()[0]} to train further")
    early, patience = state.get("early_stop"), train_config.patience
    if early and patience and patience <= ck.train.patience:
        raise cfg.ConfigError(f"{out} stopped early at step {ck.step:,} ({early}): nothing to resume; raise "
                              "--patience, or give --patience 0 (no early stopping), to train further")
    print(f"resuming {out} at step {ck.step:,} from {ck.path.name}"
          + (f"; training options changed: {', '.join(changed)}" if changed else ""))
    return ck.model, ck.tokenizer, ck.data, train_config, state


def _same_run(ck: checkpoint.Checkpoint, preset: str | None, config: str | Path | None,
              options: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The training options of a resume that also names the run's preset, recipe file or model and
    data options: each model and data option named (the preset's fields included) must equal the
    saved run's, so that a script may repeat the command that started the run, with --resume."""
    sections = _sections(preset, config, options)
    source = f"{config} and the options" if config else "options"
    # checked as a fresh run's would be, the training options over the run's own
    recipe = cfg.recipe({**sections, "train": {**cfg.to_dict(ck.train), **sections["train"]}}, source)
    preset_fields = cfg.PRESETS[recipe.preset] if recipe.preset_given else {}
    parent = ck.train.init_from  # a child has its parent's vocabulary, and none of a preset's dropout
    skip = {"vocab_size", *init.TRAINING_CHOICES} if parent else set()  # (as _from_parent and init.child)
    asked_model = {**{k: v for k, v in preset_fields.items() if k not in skip}, **recipe.model}
    built = cfg.model_config(recipe.preset, **recipe.model)
    data = recipe.data
    if data.pairs:  # a multilingual run's languages are its first direction's, as _fresh sets them
        data = dataclasses.replace(data, src_lang=data.pairs[0].split("-")[0],
                                   tgt_lang=data.pairs[0].split("-")[1])
    differ = []
    for name in asked_model:
        asked, saved = getattr(built, name), getattr(ck.model.config, name)
        if name in ("vocab_size", "src_vocab_size") and not parent:
            if data.tokenizer:  # a tokenizer given sets the sizes, whatever was asked
                continue
            same = saved <= asked or not asked  # a tokenizer learned may have fewer pieces than asked
        else:
            same = asked == saved
        if not same:
            differ.append(f"{name} (the run has {saved}, asked {asked})")
    for name in sections["data"]:
        if getattr(data, name) != getattr(ck.data, name):
            differ.append(f"{name} (the run has {_shown(getattr(ck.data, name))}, asked "
                          f"{_shown(getattr(data, name))})")
    asked_parent = sections["train"].get("init_from")
    if asked_parent is not None and not _same_parent(parent, asked_parent):
        differ.append(f"init_from (the run has {parent or 'none'}, asked {asked_parent or 'none'})")
    if differ:
        raise cfg.ConfigError("--resume continues the saved model and data; cannot change "
                              + "; ".join(differ))
    return {k: v for k, v in sections["train"].items() if k != "init_from"}


def _same_parent(saved: str, asked: str) -> bool:
    """Whether --init-from `asked` names the model a run started from: the checkpoint it saved, or
    the run directory that holds it (a run directory's newest checkpoint is what a run starts from)."""
    if not saved or not asked:
        return not saved and not asked
    checkpoint_dir, named = Path(saved).resolve(), Path(asked).resolve()
    return named in (checkpoint_dir, checkpoint_dir.parent.parent)  # RUN/checkpoints/step_N, or RUN


def _shown(value: Any) -> str:
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


def _tokenized(spec: str, data: cfg.DataConfig, tokenizer: Tokenizer, max_len: int | None,
               direction: multilingual.Direction | None = None
               ) -> TokenizedCorpus | binarized.MappedCorpus:
    """The corpus `spec` names, tokenized: read through memory maps when it is a tokenized corpus
    directory, else read and tokenized here."""
    if binarized.is_corpus_dir(Path(spec)) and direction:
        raise cfg.ConfigError(f"{spec} is a tokenized corpus of one direction: give --pairs the text it was "
                              "prepared from")
    if binarized.is_corpus_dir(Path(spec)):
        tokenized = binarized.MappedCorpus(spec, max_len)
        meta = tokenized.meta
        written = meta.get("source_vocab_size", meta["vocab_size"]), meta["vocab_size"]
        has = tokenizer.source_vocab_size, tokenizer.vocab_size
        if written != has:
            raise DataError(f"{spec} was encoded with vocabularies of {written[0]:,} (source) and "
                            f"{written[1]:,} (target) pieces, the tokenizer has {has[0]:,} and {has[1]:,}: "
                            "give the tokenizer it was prepared with (--data DATA_DIR)")
        name = spec
    else:
        src, tgt = (direction.src, direction.tgt) if direction else (data.src_lang, data.tgt_lang)
        corpus = load_corpus(spec, src, tgt)
        tokenized, name = tokenize(corpus, tokenizer, max_len), corpus.name
        if direction:
            tokenized = multilingual.told(tokenized, tokenizer, direction, data.language_token)
            name = f"{name} {direction}"
    print(tokenized.summary(name))
    return tokenized


def _mix(data: cfg.DataConfig, tokenizer: Tokenizer) -> Mix:
    """The training corpora, tokenized, each with pairs left, and how they mix (reported)."""
    corpora = []
    for spec in data.train:
        for direction in map(multilingual.Direction.parse, data.pairs) if data.pairs else [None]:
            corpus = _tokenized(spec, data, tokenizer, data.max_len, direction)
            name = f"{spec} {direction}" if direction else spec
            if not len(corpus):
                raise DataError(f"no training pair left: {corpus.summary(name)}; check the files and "
                                "--max-len")
            corpora.append((name, corpus))
    mix = Mix(corpora, data.train_weights, data.sampling_temperature)
    for line in mix.report():
        print(line)
    return mix


def _valid(data: cfg.DataConfig, tokenizer: Tokenizer
           ) -> TokenizedCorpus | dict[str, TokenizedCorpus] | None:
    spec = data.valid or default_valid(data.train[0])  # the first corpus's: the one the run is for
    if not spec:
        print("no validation set: give --valid SPEC (the forms --train takes) to measure validation "
              "loss and keep the best checkpoint by BLEU")
        return None
    if data.pairs:  # each direction validated on its own
        return {pair: _tokenized(spec, data, tokenizer, None, multilingual.Direction.parse(pair))
                for pair in data.pairs}
    return _tokenized(spec, data, tokenizer, None)


def _describe(model: Transformer, train_data: Mix, data: cfg.DataConfig,
              train_config: cfg.TrainConfig, ranks: distributed.Ranks) -> None:
    if not ranks.main:
        return
    counts = parameter_counts(model)
    parts = ", ".join(f"{k} {v / 1e6:.2f}M" for k, v in counts.items() if v and k != "total")
    print(f"model: {counts['total'] / 1e6:.2f}M parameters ({parts})")
    src_lens, tgt_lens = train_data.lengths()
    batches = train_data.batches(data.batch_tokens, train_config.seed, 0)
    src_pad, tgt_pad = padding_fraction(batches, src_lens), padding_fraction(batches, tgt_lens)
    print(f"batches: {len(batches):,} per epoch of up to {data.batch_tokens:,} tokens; "
          f"padding {src_pad:.1%} source, {tgt_pad:.1%} target")
    device = resolve_device(train_config.device)
    threads = f", {torch.get_num_threads()} threads" if device.type == "cpu" else ""
    processes = f"; {ranks.world} processes (torchrun), each on its own share of every update" \
        if ranks.world > 1 else ""
    print(f"device: {device}{threads}{processes}")
