"""Typed configuration: the model's hyper-parameters (named as in the paper), data and training.

Each field carries its help text, its allowed values (`choices`) or range (`bounds`) in
`metadata`, so the command line (`aiayn train --help`), recipe files and `aiayn info` explain
and check every option from one place. Every value is checked when a config is built, from
flags and TOML alike: a wrong type, a value out of range or an unknown key is a `ConfigError`
that names the option, never a traceback later in training. Presets are plain dictionaries of
overrides.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiayn.errors import AiaynError


def _opt(default: Any, help: str, choices: tuple[str, ...] | None = None, flag: bool = True,
         bounds: str | None = None, metavar: str | None = None, joined: bool = False) -> Any:
    """A config field with its help text; `choices` or `bounds` (">= 1", "> 0", "[0, 1)") say which
    values it takes; `flag=False` keeps it off the command line; `joined`: a list field whose flag
    takes the items joined by commas (else the flag is given once per item)."""
    return field(default=default, metadata={"help": help, "choices": choices, "flag": flag,
                                            "bounds": bounds, "metavar": metavar, "joined": joined})


class ConfigError(AiaynError, ValueError):
    """A configuration value or key that cannot be used; the message says which and where."""


@dataclass(frozen=True)
class ModelConfig:
    """The Transformer's shape (section 3 and Table 3 of the paper)."""

    vocab_size: int = _opt(
        8000, "size V of the joint source/target BPE vocabulary (with vocabulary=separate: the target's)",
        bounds=">= 5")
    vocabulary: str = _opt("joint", "joint: one BPE vocabulary for both languages (the paper); separate: one "
                                    "per language, which needs --no-share-embeddings", ("joint", "separate"))
    src_vocab_size: int = _opt(0, "with vocabulary=separate: size of the source vocabulary (0: vocab_size)",
                               bounds=">= 0")
    d_model: int = _opt(512, "width d_model of embeddings and of every sub-layer output", bounds=">= 1")
    n_heads: int = _opt(8, "attention heads h; each has d_k = d_v = d_model / h", bounds=">= 1")
    d_ff: int = _opt(2048, "inner width d_ff of the position-wise feed-forward network", bounds=">= 1")
    n_encoder_layers: int = _opt(6, "encoder layers N", bounds=">= 1")
    n_decoder_layers: int = _opt(6, "decoder layers N", bounds=">= 1")
    dropout: float = _opt(
        0.1, "P_drop on embeddings + positions and on each sub-layer output before the residual add",
        bounds="[0, 1)")
    attention_dropout: float = _opt(0.1, "dropout on the attention weights", bounds="[0, 1)")
    activation_dropout: float = _opt(0.1, "dropout after the feed-forward activation", bounds="[0, 1)")
    activation: str = _opt("relu", "feed-forward activation", ("relu", "gelu", "silu"))
    norm_position: str = _opt(
        "post",
        "post: LayerNorm(x + Sublayer(x)) as in the paper; pre: x + Sublayer(LayerNorm(x))",
        ("post", "pre"),
    )
    positional: str = _opt(
        "sinusoidal", "absolute position information: fixed sinusoids (paper), learned, or none (then "
        "relative_positions must give the order)", ("sinusoidal", "learned", "none")
    )
    pe_layout: str = _opt(
        "interleaved",
        "sinusoid layout: interleaved (paper: sin on even dims, cos on odd) or concatenated "
        "[sin | cos] (tensor2tensor, fairseq, Marian)",
        ("interleaved", "concatenated"),
    )
    max_positions: int = _opt(1024, "number of learned positions (positional=learned only)", bounds=">= 1")
    relative_positions: int = _opt(
        0, "relative position representations in self-attention (Shaw et al. 2018): learned vectors "
           "for the distances -K..K, per layer, shared by the heads; this is K, 0 for none (the paper)",
        bounds=">= 0")
    relative_values: bool = _opt(
        True, "with relative_positions: add them to the values as well as to the keys (Shaw et al.)")
    share_embeddings: bool = _opt(True, "one embedding matrix for source and target tokens")
    tie_output: bool = _opt(True, "tie the decoder embedding to the pre-softmax linear layer")
    scale_embedding: bool = _opt(
        True, "multiply embeddings by sqrt(d_model) (the paper; HuggingFace Marian models may not)"
    )
    output_bias: bool = _opt(False, "a bias on the output logits (Marian's final_logits_bias)")
    layer_norm_eps: float = _opt(1e-5, "epsilon of every LayerNorm", bounds="> 0")
    # Special ids come from the tokenizer, not from the command line.
    pad_id: int = _opt(0, "id of the padding token", flag=False, bounds=">= 0")
    bos_id: int = _opt(2, "id that starts every target sequence", flag=False, bounds=">= 0")
    eos_id: int = _opt(3, "id that ends every sequence", flag=False, bounds=">= 0")

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.d_model % self.n_heads:
            raise ConfigError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        if self.positional == "sinusoidal" and self.d_model % 2:
            raise ConfigError(f"sinusoidal positions need an even d_model, got {self.d_model}")
        if self.separate and self.share_embeddings:
            raise ConfigError("share_embeddings gives source and target tokens one embedding, which needs "
                              "one vocabulary: with vocabulary=separate pass --no-share-embeddings "
                              "(tie_output still ties the target embedding to the output layer)")
        if self.positional == "none" and not self.relative_positions:
            raise ConfigError("positional=none leaves the model blind to word order: give "
                              "relative_positions > 0, or sinusoidal or learned positions")
        for name in ("pad_id", "bos_id", "eos_id"):
            if getattr(self, name) >= self.vocab_size:
                raise ConfigError(f"{name}={getattr(self, name)} is not below vocab_size={self.vocab_size}")

    @property
    def d_k(self) -> int:
        return self.d_model // self.n_heads

    @property
    def separate(self) -> bool:
        """Whether source and target have vocabularies of their own."""
        return self.vocabulary == "separate"

    @property
    def source_vocab_size(self) -> int:
        """Rows of the source embedding: vocab_size, or the source's own with separate vocabularies."""
        return (self.src_vocab_size or self.vocab_size) if self.separate else self.vocab_size


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


@dataclass(frozen=True)
class DecodeConfig:
    """How to translate: the search (section 6.1: beam 4, length penalty 0.6, input length + 50),
    batches, and how a text is cut into the sentences a model translates."""

    beam_size: int = _opt(4, "beam width; 1 is greedy decoding", bounds=">= 1")
    nbest: int = _opt(1, "hypotheses to output per sentence, best first (at most the beam size)",
                     bounds=">= 1")
    length_penalty: float = _opt(0.6, "length penalty alpha; 0 turns it off", bounds=">= 0")
    penalty_form: str = _opt(
        "gnmt", "gnmt: ((5 + |Y|) / 6)^alpha (the paper); plain: |Y|^alpha (fairseq, Marian, HuggingFace)",
        ("gnmt", "plain"),
    )
    max_output_extra: int = _opt(50, "output at most the source length + this many tokens (the paper's rule)",
                                bounds=">= 0")
    max_output_len: int = _opt(0, "output at most this many tokens instead; 0: use --max-output-extra",
                              bounds=">= 0")
    alternatives: int = _opt(
        0, "the N most likely ways to go on at the first position after a prefix (--prefix; or at the "
           "first position), each completed by the search, best first (CTranslate2's return_alternatives); "
           "0: none", bounds=">= 0", metavar="N")
    decoder_start: int = _opt(-1, "the decoder's first token: a multilingual model's target language "
                                  "(language_token target); -1: <s>", flag=False, bounds=">= -1")
    repetition_penalty: float = _opt(
        1.0, "against repetition loops: the score of every token a translation already holds is divided by "
             "this (multiplied where negative), so above 1 a repeated token becomes less likely "
             "(CTranslate2's and HuggingFace's repetition_penalty); 1: off", bounds="> 0")
    no_repeat_ngram_size: int = _opt(
        0, "against repetition loops: no sequence of this many tokens twice in a translation "
           "(CTranslate2's and HuggingFace's no_repeat_ngram_size); 0: off", bounds=">= 0", metavar="N")
    temperature: float = _opt(0.0, "sample with this temperature instead of searching; 0: search",
                               bounds=">= 0")
    top_k: int = _opt(0, "when sampling, only from the k most probable tokens; 0: from all", bounds=">= 0")
    batch_size: int = _opt(128, "sentences per batch, or source tokens with --batch-by tokens", bounds=">= 1")
    batch_by: str = _opt("sentences", "what --batch-size counts", ("sentences", "tokens"))
    seed: int = _opt(1, "seed for sampling")
    split: bool = _opt(
        True, "cut each text into its lines (kept exactly) and sentences, translate those, and join "
              "them back with the text's own whitespace; --no-split: each text is one sentence")
    format: str = _opt(
        "text", "what each text is: text, or html (only its text is translated; tags, attributes, "
                "comments, <script>/<style>/<code>/<pre> and translate=\"no\" elements are kept, and "
                "inline tags inside a sentence stay on the words they mark)", ("text", "html"))
    max_source_len: int = _opt(
        0, "cut a sentence of more source tokens than this at its best boundaries (never dropped or "
           "truncated); 0: the model's own limit (--max-len of its training, or its learned positions)",
        bounds=">= 0")
    compile: bool = _opt(
        False, "run each decoder step compiled by TorchInductor ahead of time: a search's steps (one for "
               "batches of 8 rows or more, one each for fewer) compile for tens of seconds once per model "
               "and machine, kept on disk for later processes ($AIAYN_CACHE_DIR, `aiayn cache`); then "
               "decoding is faster (benchmarks/detail/decode_speed.md), with the same translations up to "
               "float rounding; with --int8, on int8 matmuls (fastest on CPUs with AMX or VNNI units). "
               "--no-compile: never. Neither given: compiled if this model has been compiled on this "
               "machine before, or (aiayn translate) the --input file is long enough to repay compiling")

    def __post_init__(self) -> None:
        _check_fields(self)
        if self.nbest > self.beam_size:
            raise ConfigError(f"nbest={self.nbest} must be at most beam_size={self.beam_size}")


@dataclass(frozen=True)
class ServeConfig:
    """How `aiayn serve` listens, gathers requests into batches, and what it accepts."""

    host: str = _opt("127.0.0.1", "address to listen on (0.0.0.0: every interface)", metavar="ADDR")
    port: int = _opt(8000, "TCP port to listen on", bounds="[1, 65535]")
    batching: bool = _opt(True, "gather sentences of concurrent requests into one search; "
                                "--no-batching translates one request at a time")
    workers: int = _opt(0, "searches that run at once, each on its share of --threads; 0: 2 on a CPU of "
                           "2 or more cores (small batches: more sentences per second and per CPU second "
                           "than one search on every core), else 1, and 1 with a compiled decoder step. "
                           "--no-batching: 1", bounds=">= 0")
    max_batch_tokens: int = _opt(4096, "source tokens of the sentences gathered into one search",
                                 bounds=">= 1")
    max_wait_ms: float = _opt(5.0, "how long the first sentence waits for others to share its search",
                              bounds=">= 0")
    return_wait_ms: float = _opt(30.0, "after a search, how long the next waits for the clients it answered "
                                       "to send again (a program translating sentence by sentence does at "
                                       "once); 0: not at all", bounds=">= 0")
    max_queue: int = _opt(4096, "sentences waiting at most (of requests that are not bulk: see --max-bulk); "
                                "beyond, requests get 503 and Retry-After", bounds=">= 1")
    max_bulk: int = _opt(8, "bulk requests (a file, or more source tokens than --max-batch-tokens, or more "
                            "sentences than --max-queue) translated at once at most; beyond, 503 and "
                            "Retry-After. Their sentences are searched while no other sentence waits, by all "
                            "searches but one (--workers)", bounds=">= 1")
    timeout: float = _opt(60.0, "seconds a request may take; after that it gets 504", bounds="> 0")
    file_timeout: float = _opt(600.0, "seconds a file (/translate_file) may take, all of it; after that it "
                                      "gets 504", bounds="> 0")
    max_texts: int = _opt(128, "texts in one request at most (also of /detect)", bounds=">= 1")
    max_chars: int = _opt(4000, "characters of one text at most (also of /detect); detecting a file's "
                                "language reads its first this many", bounds=">= 1")
    max_tokens: int = _opt(400, "source tokens of one text at most", bounds=">= 1")
    max_output_tokens: int = _opt(1024, "output tokens a request may ask for at most (/v1/translate's "
                                        "max_len)", bounds=">= 1")
    max_body_bytes: int = _opt(1 << 20, "bytes of a request body at most, a file's upload included (413 "
                                        "beyond)", bounds=">= 1")
    max_file_bytes: int = _opt(16 << 20, "bytes of a .docx, .pptx, .odt, .odp or .epub file unpacked at most "
                                         "(each is a zip archive)", bounds=">= 1")
    max_file_tokens: int = _opt(100_000, "source tokens of one file at most", bounds=">= 1")
    prep_threads: int = _opt(2, "threads that prepare texts and files (cutting into sentences, tokenising, "
                                "detecting languages, reading and writing files) beside the event loop and "
                                "the searches", bounds=">= 1")
    max_beam_size: int = _opt(16, "largest beam a request may ask for", bounds=">= 1")
    req_limit: int = _opt(0, "requests per minute from one client address to the translating endpoints; "
                             "beyond, 429 with Retry-After; 0: no limit", bounds=">= 0")
    key_req_limit: int = _opt(0, "requests per minute with one API key to the translating endpoints; 0: no "
                                 "limit", bounds=">= 0")
    zero_shot: bool = _opt(False, "also serve a multilingual model's directions it was not trained on, from "
                                  "a language it has read into one it has written (zero-shot: untrained "
                                  "quality)")
    drain_timeout: float = _opt(30.0, "seconds SIGTERM waits for requests in flight before exiting",
                                bounds=">= 0")

    def __post_init__(self) -> None:
        _check_fields(self)


# Presets: the paper's Table 3 models, and CPU-sized ones. Values override ModelConfig defaults.
PRESETS: dict[str, dict[str, Any]] = {
    "base": dict(n_encoder_layers=6, n_decoder_layers=6, d_model=512, d_ff=2048, n_heads=8,
                 dropout=0.1, attention_dropout=0.1, activation_dropout=0.1),
    "big": dict(n_encoder_layers=6, n_decoder_layers=6, d_model=1024, d_ff=4096, n_heads=16,
                dropout=0.3, attention_dropout=0.3, activation_dropout=0.3),
    "small": dict(n_encoder_layers=3, n_decoder_layers=3, d_model=256, d_ff=1024, n_heads=4),
    # For tests: with 512 pieces every synthetic symbol is one piece after the 256 byte pieces.
    "tiny": dict(n_encoder_layers=2, n_decoder_layers=2, d_model=64, d_ff=128, n_heads=4,
                 vocab_size=512),
}


def build(cls: type, overrides: dict[str, Any], source: str = "overrides") -> Any:
    """Build `cls` from its defaults and `overrides`; any error names `source` (a file, the command line)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown {cls.__name__} option(s): {', '.join(unknown)}")
    try:
        return cls(**overrides)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def model_config(preset: str = "base", **overrides: Any) -> ModelConfig:
    """A preset's ModelConfig with `overrides` applied on top."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    return build(ModelConfig, {**PRESETS[preset], **overrides}, f"preset {preset}")


SECTIONS = ("preset", "model", "data", "train")


@dataclass(frozen=True)
class Recipe:
    """A checked training recipe: the preset, the model options on top of it, data and training."""

    preset: str
    model: dict[str, Any]  # overrides of the preset; the tokenizer sets vocab_size and the special ids
    data: DataConfig
    train: TrainConfig
    preset_given: bool = True  # False: no preset was named, and `default_preset` chose one


def recipe(sections: dict[str, Any], source: str) -> Recipe:
    """Check a recipe's sections (`preset`, and the tables `model`, `data`, `train`) and build its
    configs, so that any mistake fails here, naming `source`, before data is read."""
    if not isinstance(sections, dict):
        raise ConfigError(f"{source}: a recipe is a table of sections, not {type(sections).__name__}")
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{source}: unknown section(s) {', '.join(unknown)}; use {', '.join(SECTIONS)}")
    for name in ("model", "data", "train"):
        if not isinstance(sections.get(name, {}), dict):
            raise ConfigError(f"{source}: [{name}] must be a table of options, "
                              f"not {type(sections[name]).__name__}")
    train = build(TrainConfig, sections.get("train", {}), source)
    preset = sections["preset"] if "preset" in sections else default_preset(train.device)
    if not isinstance(preset, str) or preset not in PRESETS:
        raise ConfigError(f"{source}: unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    model = sections.get("model", {})
    build(ModelConfig, {**PRESETS[preset], **model}, source)
    return Recipe(preset, model, build(DataConfig, sections.get("data", {}), source), train,
                  "preset" in sections)


def default_preset(device: str) -> str:
    """The preset when none is named: the paper's base model on a GPU, `small` elsewhere (base, with
    tens of millions of parameters, would take a CPU days)."""
    import torch

    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "base" if on_gpu else "small"


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a recipe file (.toml or .json) with optional sections `preset`, `model`, `data`, `train`;
    `recipe` checks the values."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
        raw = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: cannot parse: {e}") from None
    recipe(raw, str(path))  # fail on the file's own mistakes before flags are merged in
    return raw


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(name: str) -> str:
    """`name` if it is a device aiayn knows how to ask for (auto, cpu, mps, cuda, cuda:N)."""
    if not DEVICE.match(name):
        raise ConfigError(f"device={name!r} is not one of auto, cpu, cuda, cuda:N, mps")
    return name


_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
_TYPE_NAMES = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}
LISTS = {"tuple[str, ...]": "str", "tuple[float, ...]": "float"}  # list fields: the type of an item


def _check_fields(config: Any) -> None:
    """Every field has its declared type (an int where a float is asked for becomes a float; a list
    field takes a list, or one item, and becomes a tuple), one of its choices and a value within its
    bounds; otherwise a ConfigError names the field."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.type in LISTS:
            item = LISTS[f.type]
            items = [value] if isinstance(value, _TYPES[item]) and not isinstance(value, bool) else value
            if not isinstance(items, (list, tuple)):
                raise ConfigError(f"{f.name}={value!r} must be a list of {item}s, not {type(value).__name__}")
            object.__setattr__(config, f.name, tuple(_checked(f, item, v) for v in items))
        else:
            object.__setattr__(config, f.name, _checked(f, f.type, value))


def _checked(f: dataclasses.Field, kind: str, value: Any) -> Any:
    """`value` of field `f` (or an item of it) checked as a `kind` (int, float, str, bool)."""
    if not isinstance(value, _TYPES[kind]) or (isinstance(value, bool) and kind != "bool"):
        raise ConfigError(f"{f.name}={value!r} must be {_TYPE_NAMES[kind]}, not {type(value).__name__}")
    if kind == "float":
        if not math.isfinite(value):
            raise ConfigError(f"{f.name}={value!r} must be a finite number")
        value = float(value)
    choices, bounds = f.metadata.get("choices"), f.metadata.get("bounds")
    if choices and value not in choices:
        raise ConfigError(f"{f.name}={value!r} is not one of {', '.join(choices)}")
    if bounds and not in_bounds(value, bounds):
        raise ConfigError(f"{f.name}={value!r} must be {describe_bounds(bounds)}")
    return value


def in_bounds(value: float, bounds: str) -> bool:
    """Whether `value` lies within `bounds`: ">= x", "> x", or an interval such as "[0, 1)"."""
    if bounds.startswith(">"):
        op, limit = bounds.split()
        return value >= float(limit) if op == ">=" else value > float(limit)
    low, high = (float(x) for x in bounds[1:-1].split(","))
    above = value >= low if bounds[0] == "[" else value > low
    below = value <= high if bounds[-1] == "]" else value < high
    return above and below


def describe_bounds(bounds: str) -> str:
    if bounds.startswith(">"):
        op, limit = bounds.split()
        return f"{'at least' if op == '>=' else 'greater than'} {limit}"
    return f"in {bounds}"
