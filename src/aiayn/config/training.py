"""What a training run reads (`DataConfig`: corpora, languages, tokenizer, batches) and how it
trains (`TrainConfig`: schedule, regularisation, checkpoints, stopping, devices).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from aiayn.config.fields import ConfigError, _check_fields, _opt, check_device


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it is cut into batches."""

    data: str = _opt(
        "", "data directory from `aiayn prepare`: its tokenizer and tokenized corpora, read through "
            "memory maps (stands for --train, --valid, --tokenizer and the languages)", metavar="DIR"
    )
    train: tuple[str, ...] = _opt(
        ("multi30k",),
        "training data: multi30k[:SPLIT], tatoeba-zh[:SPLIT] (English-Chinese), synthetic:copy, "
        "synthetic:reverse, FILE.tsv[.gz], SRC_FILE,TGT_FILE, PREFIX (reads PREFIX.SRC_LANG and "
        "PREFIX.TGT_LANG, plain or .gz), hf:NAME_OR_PATH[:CONFIG][:SPLIT] (HuggingFace datasets, hub or "
        "local files), or a tokenized corpus directory (DATA_DIR/train). Given more than once, the "
        "corpora are mixed (--train-weights)",
        metavar="SPEC",
    )
    train_weights: tuple[float, ...] = _opt(
        (), "with several --train: how often each is sampled, in their order (3,1: three quarters of each "
            "epoch from the first, its pairs repeated or left for later epochs as needed; an epoch holds as "
            "many pairs as all together); none: each pair once an epoch", bounds="> 0", metavar="W,W,...")
    sampling_temperature: float = _opt(
        1.0, "with several --train and no --train-weights: sample each corpus in proportion to its size "
             "to the power 1/T; 1: in proportion to size (each pair once an epoch), larger: closer to "
             "equal shares, so small corpora are not starved (fairseq's temperature; 5 is usual)",
        bounds=">= 1", metavar="T")
    valid: str = _opt(
        "", "validation data, same forms as --train; empty: the named dataset's own val split",
        metavar="SPEC",
    )
    pairs: tuple[str, ...] = _opt(
        (), "train one multilingual model on these directions, SRC-TGT each (en-de,de-en,en-fr): every "
            "--train corpus is read in each direction, one vocabulary is learned over all the languages, "
            "and the model is told the target language by a piece, >>fr<< (--language-token); none: "
            "--src-lang to --tgt-lang", metavar="SRC-TGT,...", joined=True)
    language_token: str = _opt(
        "target", "with --pairs: where the model is told the target language, >>fr<<: target: as the "
                  "decoder's first token, in place of <s> (fairseq's decoder language token; "
                  "better on Multi30k: benchmarks/detail/multilingual.md); source: as the source's "
                  "first token (Johnson et al., OPUS-MT)", ("target", "source"))
    src_lang: str = _opt("en", "source language code", metavar="LANG")
    tgt_lang: str = _opt("de", "target language code", metavar="LANG")
    tokenizer: str = _opt(
        "", "tokenizer directory from `aiayn prepare` (or a SentencePiece .model file); "
            "empty: learn one from the training data", metavar="PATH"
    )
    max_len: int = _opt(256, "drop training pairs with more subword tokens than this on either side",
                        bounds=">= 1")
    batch_tokens: int = _opt(
        4096, "tokens per batch, padding included, on each side (the paper: about 25,000)", bounds=">= 1"
    )

    @property
    def told_in_decoder(self) -> bool:
        """A multilingual model whose decoder starts from the target language's piece, not <s>."""
        return bool(self.pairs) and self.language_token == "target"

    def __post_init__(self) -> None:
        _check_fields(self)
        if not self.train:
            raise ConfigError("train=() names no training data")
        for pair in self.pairs:
            if not re.match(r"^([a-z]{2,3}(?:_[A-Za-z]+)?)-(?!\1$)[a-z]{2,3}(?:_[A-Za-z]+)?$", pair):
                raise ConfigError(f"pairs: {pair!r} is not a direction SRC-TGT of two language codes (en-de)")
        if len(set(self.pairs)) < len(self.pairs):
            raise ConfigError(f"pairs={','.join(self.pairs)} names a direction twice")
        if self.train_weights and self.pairs:
            raise ConfigError("train_weights weigh --train corpora; with --pairs the directions are sampled "
                              "by --sampling-temperature")
        if self.train_weights and self.sampling_temperature != 1.0:
            raise ConfigError(f"train_weights and sampling_temperature={self.sampling_temperature:g} both "
                              "say how to sample the corpora: give one")
        if self.train_weights and len(self.train_weights) != len(self.train):
            raise ConfigError(f"train_weights={','.join(f'{w:g}' for w in self.train_weights)} gives "
                              f"{len(self.train_weights)} weight(s) for {len(self.train)} --train corpora")


@dataclass(frozen=True)
class TrainConfig:
    """The optimisation recipe (section 5) and the bookkeeping of a training run."""

    init_from: str = _opt(
        "", "start from this model: its architecture, tokenizer and weights (an aiayn run or checkpoint, "
            "or a Marian directory); the optimiser, learning-rate schedule and step start afresh",
        metavar="MODEL")
    init_sha256: str = _opt("", "sha256 of the weights the run started from (recorded)", flag=False)
    label_smoothing: float = _opt(0.1, "label smoothing epsilon_ls", bounds="[0, 1)")
    bpe_dropout: float = _opt(
        0.0, "BPE-dropout (Provilkov et al. 2020): skip each BPE merge with this probability while cutting "
             "a training sentence, drawn afresh every epoch (reproducibly from --seed); never at validation "
             "or translation; 0: the usual pieces. 0.1 is usual, a help on small corpora", bounds="[0, 1)",
        metavar="P")
    ema_decay: float = _opt(
        0.0, "keep an exponential moving average of the weights, avg = D * avg + (1 - D) * weights after "
             "each update, saved in every checkpoint; validation and checkpoints/best use it, and "
             "`aiayn average --ema`, `aiayn translate --ema` read it; 0: none. 0.999 is usual",
        bounds="[0, 1)", metavar="D")
    lr_scale: float = _opt(
        1.0, "factor on the paper's rate d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)", bounds="> 0"
    )
    warmup_steps: int = _opt(4000, "linear warm-up steps before the inverse-square-root decay",
                            bounds=">= 1")
    lr_decay: str = _opt(
        "inverse-sqrt", "after the warm-up: inverse-sqrt (the paper), or linear from the peak to 0 at "
                        "--max-steps (a run of a fixed, short budget)", ("inverse-sqrt", "linear"))
    adam_beta1: float = _opt(0.9, "Adam beta1", bounds="[0, 1)")
    adam_beta2: float = _opt(0.98, "Adam beta2", bounds="[0, 1)")
    adam_eps: float = _opt(1e-9, "Adam epsilon", bounds=">= 0")
    clip_norm: float = _opt(0.0, "clip the gradient norm to this value; 0 turns clipping off",
                            bounds=">= 0")
    update_tokens: int = _opt(
        0, "accumulate batches until an update holds this many target tokens; 0: one batch per update",
        bounds=">= 0")
    max_steps: int = _opt(0, "stop after this many updates; 0: no limit", bounds=">= 0")
    max_epochs: int = _opt(0, "stop after this many passes over the data; 0: no limit", bounds=">= 0")
    max_minutes: float = _opt(0.0, "stop after this much wall time; 0: no limit", bounds=">= 0")
    valid_every: int = _opt(500, "validate every this many updates (and at the end); 0: at the end only",
                           bounds=">= 0")
    bleu_every: int = _opt(
        0, "translate the validation set and score sacreBLEU and chrF every this many updates (and at the "
           "end); 0: never", bounds=">= 0"
    )
    bleu_beam: int = _opt(4, "beam size for that validation BLEU (length penalty 0.6, as evaluation)",
                          bounds=">= 1")
    stop_metric: str = _opt(
        "bleu", "the validation score that picks the best checkpoint (RUN_DIR/checkpoints/best, kept "
                "whatever --keep-checkpoints removes) and that --patience watches: loss (every --valid-every "
                "updates), bleu or chrf (every --bleu-every updates)", ("loss", "bleu", "chrf"))
    patience: int = _opt(0, "stop once --stop-metric has not improved for this many validations in a row "
                            "(early stopping); 0: never", bounds=">= 0")
    min_delta: float = _opt(0.0, "with --patience: an improvement is a change of --stop-metric by more than "
                                 "this", bounds=">= 0")
    save_every: int = _opt(
        500, "save a checkpoint every this many updates (and at the end); 0: at the end only", bounds=">= 0")
    keep_checkpoints: int = _opt(5, "keep only the newest this many step checkpoints", bounds=">= 1")
    log_every: int = _opt(50, "append training metrics to metrics.jsonl every this many updates; 0: never",
                         bounds=">= 0")
    seed: int = _opt(1, "seed for initialisation, dropout and batch order")
    device: str = _opt("auto", "auto (CUDA when present, else CPU), cpu, cuda or cuda:N", metavar="DEVICE")
    threads: int = _opt(0, "CPU threads for PyTorch; 0: PyTorch's default", bounds=">= 0")
    precision: str = _opt(
        "auto",
        "bfloat16: autocast matmuls to bfloat16 (weights, optimizer and loss stay float32); fast on "
        "GPUs and on CPUs with AMX or AVX512-BF16 units, slow on other CPUs. float32: no autocast. "
        "auto: bfloat16 on CUDA, float32 on CPU",
        ("auto", "float32", "bfloat16"),
    )

    def __post_init__(self) -> None:
        _check_fields(self)
        check_device(self.device)
        if self.lr_decay == "linear" and self.max_steps <= self.warmup_steps:
            raise ConfigError(f"lr_decay=linear falls to 0 at max_steps, which must be more than "
                              f"warmup_steps (max_steps={self.max_steps}, warmup_steps={self.warmup_steps})")
        loss = self.stop_metric == "loss"
        if self.patience and not (self.valid_every if loss else self.bleu_every):
            flag, when = ("--valid-every", "at the end only") if loss else ("--bleu-every", "never")
            raise ConfigError(f"patience={self.patience} watches validation {self.stop_metric}, measured "
                              f"every {flag} updates (0: {when}): give {flag} N, or another --stop-metric")

