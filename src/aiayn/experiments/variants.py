"""Models of one comparison trained alike on Multi30k en->de, for the claims that train (9, 11, 12)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aiayn.config import DataConfig, DecodeConfig, TrainConfig, model_config
from aiayn.experiments.findings import ExperimentContext

if TYPE_CHECKING:
    from aiayn.data.batching import TokenizedCorpus
    from aiayn.model import Transformer
    from aiayn.tokenizer import Tokenizer


@dataclass
class Trained:
    """Models of one comparison, trained alike, and what they translate."""

    spec: str
    preset: str
    steps: int
    longest: int  # positions training uses (the longest sentence + eos or bos, joint vocabulary)
    long_tokens: int  # the fewest tokens of the long inputs (joint vocabulary)
    bleu: dict[str, float] = field(default_factory=dict)  # validation BLEU per variant
    long: dict[str, str] = field(default_factory=dict)  # per variant: "BLEU x" on long inputs, "cannot: why"
    long_bleu: dict[str, float] = field(default_factory=dict)  # the variants that translate long inputs
    parameters: dict[str, int] = field(default_factory=dict)  # per variant
    read_back: list[str] = field(default_factory=list)  # variants trained by an earlier run, not this one
    # per variant, with `valid_every`: (update, validation loss in nats per reference word)
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def train_variants(ctx: ExperimentContext, variants: dict[str, dict], valid_every: int = 0) -> Trained:
    """Train one model per variant (model config overrides) alike on Multi30k en->de (quick: the
    synthetic reverse task) for `training_steps` updates; score validation BLEU with beam 4, and
    20 inputs longer than any training sentence (four validation sentences joined). Learned
    positions cover the positions training uses, no more. A variant with vocabulary=separate gets
    one BPE vocabulary per language, each the size of the joint one. With `valid_every`, the
    validation loss every that many updates, per reference word so that tokenizations compare.

    A variant whose run directory already holds a model trained to the same configs (an earlier
    run of the experiments into the same place) is read back instead of trained again."""
    from aiayn.data.batching import tokenize
    from aiayn.data.corpora import load_corpus
    from aiayn.decoding.translator import translate, translate_ids
    from aiayn.evaluate import score
    from aiayn.model import Transformer, parameter_counts
    from aiayn.tokenizer import Tokenizer
    from aiayn.train.loop import MetricsLog

    spec, preset, vocab, steps, warmup, batch_tokens = (
        ("synthetic:reverse", "tiny", 512, 60, 30, 1024) if ctx.quick
        else ("multi30k", "small", 8000, ctx.training_steps, 1000, 4096))
    corpus = load_corpus(spec, "en", "de")
    valid = load_corpus("synthetic:reverse:val" if ctx.quick else "multi30k:val", "en", "de")
    words = sum(len(t.split()) + 1 for t in valid.target)  # + 1: the end of each sentence (eos)
    tokenizers = {"joint": Tokenizer.learn(corpus.source, corpus.target, vocab)}
    long_lines = [" ".join(valid.source[i:i + 4]) for i in range(0, 80, 4)]
    long_refs = [" ".join(valid.target[i:i + 4]) for i in range(0, 80, 4)]
    joint_train = tokenize(corpus, tokenizers["joint"], 256)
    result = Trained(spec, preset, steps, _longest(joint_train),
                     min(len(s) for s in tokenizers["joint"].encode(long_lines)) + 1)
    run_dir = Path(ctx.run_dir or ctx.out / "runs") / "-".join(variants)  # one per comparison
    for name, overrides in variants.items():
        kind = overrides.get("vocabulary", "joint")
        if kind not in tokenizers:
            tokenizers[kind] = Tokenizer.learn(corpus.source, corpus.target, vocab, src_vocab_size=vocab)
        tokenizer = tokenizers[kind]
        train_data = joint_train if kind == "joint" else tokenize(corpus, tokenizer, 256)
        valid_data = tokenize(valid, tokenizer)
        sizes = {"src_vocab_size": tokenizer.source_vocab_size} if kind == "separate" else {}
        torch.manual_seed(1)
        model = Transformer(model_config(preset, vocab_size=tokenizer.vocab_size, **sizes,
                                         max_positions=_longest(train_data), dropout=0.3,
                                         attention_dropout=0.0, activation_dropout=0.0, **overrides))
        result.parameters[name] = parameter_counts(model)["total"]
        config = TrainConfig(warmup_steps=warmup, lr_scale=0.5, max_steps=steps, valid_every=valid_every,
                             bleu_every=0, save_every=0, keep_checkpoints=1, log_every=100)
        data = DataConfig(batch_tokens=batch_tokens)
        before = _trained_before(run_dir / name, model, tokenizer, data, config)
        if before is not None:
            result.read_back.append(name)
        model = before if before is not None else _trained(
            model, tokenizer, train_data, valid_data if valid_every else None, data, config, run_dir / name)
        if valid_every:
            result.curves[name] = [(r["step"], r["nll"] * r["tokens"] / words)
                                   for r in MetricsLog(run_dir / name / "metrics.jsonl").records("valid")]
        hypotheses = translate_ids(model, tokenizer, valid_data.source, DecodeConfig(), progress=False)
        result.bleu[name] = score([h[0].text for h in hypotheses], valid.target).bleu
        try:
            long_hyps = translate(model, tokenizer, long_lines, DecodeConfig(), progress=False)
            result.long_bleu[name] = score([h[0].text for h in long_hyps], long_refs).bleu
            result.long[name] = f"BLEU {result.long_bleu[name]:.1f}"
        except ValueError as e:
            result.long[name] = f"cannot: {str(e).split(';')[0]}"
    return result


def _trained_before(run: Path, model: Transformer, tokenizer: Tokenizer, data: DataConfig,
                    config: TrainConfig) -> Transformer | None:
    """The model of `run` if it was trained to `config.max_steps` updates with these configs."""
    from aiayn import checkpoint

    path = checkpoint.step_path(run, config.max_steps)
    if not checkpoint.is_checkpoint(path):
        return None
    done = checkpoint.load(path, with_state=False)
    asked = (model.config, tokenizer, data, config)
    return done.model.eval() if (done.model.config, done.tokenizer, done.data, done.train) == asked else None


def _trained(model: Transformer, tokenizer: Tokenizer, train_data: TokenizedCorpus,
             valid_data: TokenizedCorpus | None, data: DataConfig, config: TrainConfig,
             run: Path) -> Transformer:
    """`model` trained into `run`, which starts empty (an earlier run with other configs is removed)."""
    from aiayn.train.loop import train

    if (run / "metrics.jsonl").exists():
        shutil.rmtree(run)
    train(model, tokenizer, train_data, valid_data, data, config, run)
    return model


def _longest(data: TokenizedCorpus) -> int:
    return max(len(s) for s in data.source + data.target) + 1  # with eos or bos


def method(t: Trained, what: str) -> str:
    again = (f" The {' and '.join(t.read_back)} model{'s were' if len(t.read_back) > 1 else ' was'} "
             "trained by an earlier run into the same place and read back, so the seconds are this "
             "run's evaluation only." if t.read_back else "")
    return (f"{what}, trained alike on {t.spec} en->de for {t.steps:,} updates each (the recipe of "
            f"recipes/multi30k-small.toml, cut short); validation sacreBLEU with beam 4.{again}")


def long_inputs(t: Trained) -> str:
    return (f" Then 20 inputs of at least {t.long_tokens} tokens, four validation sentences joined, scored "
            "against the joined references.")
