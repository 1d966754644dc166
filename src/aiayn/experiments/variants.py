"""Models of one comparison trained alike (on Multi30k en->de, or English-Chinese), for the claims that
train (9, 11, 12, 13)."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from aiayn.config import DataConfig, DecodeConfig, TrainConfig, model_config
from aiayn.experiments.findings import ExperimentContext

if TYPE_CHECKING:
    from aiayn.data.batching import TokenizedCorpus
    from aiayn.model import Transformer
    from aiayn.tokenizer import Tokenizer


@dataclass(frozen=True)
class Setup:
    """What the models of a comparison are trained on, and how (besides the variants' overrides)."""

    spec: str  # training corpus
    valid: str  # validation corpus
    src: str
    tgt: str
    preset: str
    vocab: int  # pieces of the joint vocabulary
    warmup: int
    batch_tokens: int
    separate_vocab: int = 0  # pieces of each side's vocabulary with vocabulary=separate (0: `vocab`)
    shape: tuple[tuple[str, int], ...] = ()  # model settings over the preset's
    name: str = ""  # its runs' directory prefix ("" for Multi30k en->de, the first setup)
    recipe: str = "recipes/multi30k-small.toml"  # the recipe the comparison cuts short

    @property
    def direction(self) -> str:
        return f"{self.src}->{self.tgt}"


MULTI30K = Setup("multi30k", "multi30k:val", "en", "de", "small", 8000, 1000, 4096)
QUICK = Setup("synthetic:reverse", "synthetic:reverse:val", "en", "de", "tiny", 512, 30, 1024)
# recipes/tatoeba-zh.toml's shape: 4+4 layers, 128 wide
TINY_SHAPE = (("n_encoder_layers", 4), ("n_decoder_layers", 4), ("d_model", 128), ("d_ff", 256))


def tatoeba(src: str, tgt: str) -> Setup:
    """English-Chinese (tatoeba-zh) in one direction: 8,000 joint pieces against 4,000 a side."""
    return Setup("tatoeba-zh", "tatoeba-zh:val", src, tgt, "small", 8000, 1000, 4096, 4000, TINY_SHAPE,
                 f"tatoeba-{src}{tgt}", "recipes/tatoeba-zh.toml's shape")


@dataclass
class Trained:
    """Models of one comparison, trained alike, and what they translate."""

    setup: Setup  # what they were trained on (quick: the synthetic task, with the setup's labels)
    steps: int
    longest: int  # positions training uses (the longest sentence + eos or bos, joint vocabulary)
    long_tokens: int  # the fewest tokens of the long inputs (joint vocabulary)
    bleu: dict[str, float] = field(default_factory=dict)  # validation BLEU per variant
    long: dict[str, str] = field(default_factory=dict)  # per variant: "BLEU x" on long inputs, "cannot: why"
    long_bleu: dict[str, float] = field(default_factory=dict)  # the variants that translate long inputs
    parameters: dict[str, int] = field(default_factory=dict)  # per variant
    read_back: list[str] = field(default_factory=list)  # variants trained by an earlier run, not this one
    seconds: dict[str, float] = field(default_factory=dict)  # per variant: training time
    # per variant, with `valid_every`: (update, validation loss in nats per reference word)
    curves: dict[str, list[tuple[int, float]]] = field(default_factory=dict)


def train_variants(ctx: ExperimentContext, variants: dict[str, dict], valid_every: int = 0,
                   setup: Setup = MULTI30K) -> Trained:
    """Train one model per variant (model config overrides) alike on `setup` (quick: the synthetic
    reverse task) for `training_steps` updates; score validation BLEU with beam 4, and 20 inputs
    longer than any training sentence (four validation sentences joined). Learned positions cover
    the positions training uses, no more. A variant with vocabulary=separate gets one BPE
    vocabulary per language (`setup.separate_vocab` pieces each). With `valid_every`, the
    validation loss every that many updates, per reference word (character, into Chinese) so that
    tokenizations compare.

    A variant whose run directory already holds a model trained to the same configs (an earlier
    run of the experiments into the same place) is read back instead of trained again."""
    from aiayn.data.batching import tokenize
    from aiayn.data.corpora import load_corpus
    from aiayn.tokenizer import Tokenizer

    quick = replace(QUICK, name=setup.name, src=setup.src, tgt=setup.tgt, recipe=setup.recipe)  # same labels
    setup, steps = (quick, 60) if ctx.quick else (setup, ctx.training_steps)
    corpus = load_corpus(setup.spec, setup.src, setup.tgt)
    valid = load_corpus(setup.valid, setup.src, setup.tgt)
    tokenizers = {"joint": Tokenizer.learn(corpus.source, corpus.target, setup.vocab)}
    long = _LongInputs([_joined(valid.source[i:i + 4], setup.src) for i in range(0, 80, 4)],
                       [_joined(valid.target[i:i + 4], setup.tgt) for i in range(0, 80, 4)])
    trains = {"joint": tokenize(corpus, tokenizers["joint"], 256)}
    result = Trained(setup, steps, _longest(trains["joint"]),
                     min(len(s) for s in tokenizers["joint"].encode(long.sources)) + 1)
    runs = Path(ctx.run_dir or ctx.out / "runs")
    run_dir = runs / "-".join([setup.name, *variants] if setup.name else variants)  # one per comparison
    for name, overrides in variants.items():
        kind = overrides.get("vocabulary", "joint")
        if kind not in tokenizers:
            apart = setup.separate_vocab or setup.vocab
            tokenizers[kind] = Tokenizer.learn(corpus.source, corpus.target, apart, src_vocab_size=apart)
            trains[kind] = tokenize(corpus, tokenizers[kind], 256)
        valid_data = tokenize(valid, tokenizers[kind])
        model = _variant(result, name, overrides, tokenizers[kind], trains[kind],
                         valid_data if valid_every else None, steps, valid_every, run_dir / name)
        if valid_every:
            words = sum(_words(t, setup.tgt) + 1 for t in valid.target)  # + 1: each sentence's end (eos)
            result.curves[name] = _curve(run_dir / name, words)
        _score(result, name, model, tokenizers[kind], valid_data, valid.target, long)
    return result


@dataclass(frozen=True)
class _LongInputs:
    sources: list[str]  # four validation sentences joined, each
    references: list[str]  # their references joined alike


def _variant(result: Trained, name: str, overrides: dict, tokenizer: Tokenizer, train_data: TokenizedCorpus,
             valid_data: TokenizedCorpus | None, steps: int, valid_every: int, run: Path) -> Transformer:
    """The variant's model, trained into `run` or read back from an earlier run; its parameters and
    training seconds recorded in `result`."""
    from aiayn.model import Transformer, parameter_counts
    from aiayn.train.logs import MetricsLog

    setup, sizes = result.setup, {}
    if overrides.get("vocabulary") == "separate":
        sizes = {"src_vocab_size": tokenizer.source_vocab_size}
    torch.manual_seed(1)
    model = Transformer(model_config(setup.preset, vocab_size=tokenizer.vocab_size, **sizes,
                                     max_positions=_longest(train_data), dropout=0.3,
                                     attention_dropout=0.0, activation_dropout=0.0,
                                     **dict(setup.shape), **overrides))
    result.parameters[name] = parameter_counts(model)["total"]
    config = TrainConfig(warmup_steps=setup.warmup, lr_scale=0.5, max_steps=steps, valid_every=valid_every,
                         bleu_every=0, save_every=0, keep_checkpoints=1, log_every=100)
    data = DataConfig(batch_tokens=setup.batch_tokens)
    before = _trained_before(run, model, tokenizer, data, config)
    if before is not None:
        result.read_back.append(name)
    model = before if before is not None else _trained(model, tokenizer, train_data, valid_data, data,
                                                       config, run)
    records = MetricsLog(run / "metrics.jsonl").records()
    result.seconds[name] = next((r["elapsed_s"] for r in reversed(records) if r["kind"] == "train"), 0.0)
    return model


def _curve(run: Path, words: int) -> list[tuple[int, float]]:
    """The run's validation losses: (update, nats per reference word)."""
    from aiayn.train.logs import MetricsLog

    return [(r["step"], r["nll"] * r["tokens"] / words)
            for r in MetricsLog(run / "metrics.jsonl").records() if r["kind"] == "valid"]


def _score(result: Trained, name: str, model: Transformer, tokenizer: Tokenizer, valid_data: TokenizedCorpus,
           references: list[str], long: _LongInputs) -> None:
    """Validation BLEU of the variant's model, beam 4, and on the long inputs (or why it cannot
    translate them), into `result`."""
    from aiayn.decoding.translator import translate, translate_ids
    from aiayn.evaluate import score, tokenizer_for

    bleu_tokenize = tokenizer_for(result.setup.tgt)  # characters into Chinese
    hypotheses = translate_ids(model, tokenizer, valid_data.source, DecodeConfig(), progress=False)
    result.bleu[name] = score([h[0].text for h in hypotheses], references, bleu_tokenize).bleu
    try:
        long_hyps = translate(model, tokenizer, long.sources, DecodeConfig(), progress=False)
        result.long_bleu[name] = score([h[0].text for h in long_hyps], long.references, bleu_tokenize).bleu
        result.long[name] = f"BLEU {result.long_bleu[name]:.1f}"
    except ValueError as e:
        result.long[name] = f"cannot: {str(e).split(';')[0]}"


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


def _words(text: str, lang: str) -> int:
    """Words of `text`; in a language written without spaces, its characters."""
    from aiayn.text.segment import NO_SPACES

    return len("".join(text.split())) if lang in NO_SPACES else len(text.split())


def _joined(sentences: list[str], lang: str) -> str:
    """Sentences as one text: with spaces between them, none in a language written without."""
    from aiayn.text.segment import NO_SPACES

    return ("" if lang in NO_SPACES else " ").join(sentences)


def _longest(data: TokenizedCorpus) -> int:
    return max(len(s) for s in data.source + data.target) + 1  # with eos or bos


def method(t: Trained, what: str, *others: Trained) -> str:
    """How `t`'s models (and the same comparison in `others`' directions) were trained and scored."""
    same = "".join(f" The same for {o.setup.direction}." for o in others)
    return (f"{what}, trained alike on {t.setup.spec} {t.setup.direction} for {t.steps:,} updates each (the "
            f"recipe of {t.setup.recipe}, cut short); validation sacreBLEU with beam 4.{same}"
            f"{read_back(t, *others)}")


def read_back(*runs: Trained) -> str:
    """The sentence saying which of these runs' models an earlier run trained (their training
    minutes are that run's), or nothing."""
    named = [f"{t.setup.direction} {' and '.join(t.read_back)}" for t in runs if t.read_back]
    if not named:
        return ""
    were = "models were" if sum(len(t.read_back) for t in runs) > 1 else "model was"
    return (f" The {' and the '.join(named)} {were} trained by an earlier run into the same place and read "
            "back: the claim's seconds count this run's work only.")


def long_inputs(t: Trained) -> str:
    return (f" Then 20 inputs of at least {t.long_tokens} tokens, four validation sentences joined, scored "
            "against the joined references.")
