"""The public translation API: load any model aiayn reads, and translate text with it.

    import aiayn

    translator = aiayn.load_translator("runs/quickstart")
    for translation in translator.translate(["A dog runs on the beach."], beam_size=4):
        print(translation.text, translation.score)

`load_translator` recognises what a path holds (an aiayn checkpoint or run directory, a
HuggingFace Marian directory, or a CTranslate2 export), loads it on a device and chooses how it
computes (`prepare`: dtype, int8, a compiled decoder step, and on a CPU weights packed for the
matmul kernels). A `Translator` translates a list of sentences (`translate`) or a stream of lines
of any length, holding only a chunk at a time (`translate_stream`); search options are the
fields of `DecodeConfig`. The command line, the benchmarks and the server load models for
translation only through this module.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from aiayn import allocator, checkpoint
from aiayn import config as cfg
from aiayn.decoding.constrained import Steer
from aiayn.decoding.tracing import gate
from aiayn.decoding.translator import Translation, translate_ids
from aiayn.interop import marian
from aiayn.model import Transformer
from aiayn.text import blocks, documents, kept, markup, segment
from aiayn.text.glossary import Glossary
from aiayn.tokenizer import Tokenizer

ENGINES = ("pytorch", "ctranslate2")
DTYPES = ("float32", "bfloat16", "float16")
CHUNK = 2048  # lines that translate_stream sorts by length into batches and translates together: the
# more, the closer the lengths within a batch, and the shorter the tail of its longest sentences stepping
# alone (measured in benchmarks/detail/decode_speed.md, "A real file end to end")
FIRST_CHUNK = 128  # lines of its first chunk, then whole chunks: the first lines come out soon. A first
# chunk of one whole batch makes fewer decoder steps than a smaller one, for a first line a little later
# (benchmarks/detail/decode_speed.md)
CONFIGS = 64  # kinds of settings `Translator.config` keeps, checked

__all__ = ["AttentionView", "LoadedModel", "Segments", "Translation", "Translator", "load_model",
           "load_translator", "prepare"]


@dataclass
class LoadedModel:
    """A PyTorch model with its tokenizer and languages, from an aiayn checkpoint or a Marian directory."""

    model: Transformer
    tokenizer: Tokenizer
    src_lang: str
    tgt_lang: str
    path: Path  # the checkpoint directory it came from (a run's newest checkpoint, say)
    data: cfg.DataConfig  # how it was trained (defaults for a Marian model)
    train: cfg.TrainConfig
    decoding: dict[str, Any] = dataclasses.field(default_factory=dict)  # search settings it keeps


def model_format(path: str | Path) -> str:
    """What `path` holds: "aiayn" (a checkpoint or a run directory), "marian" or "ctranslate2"."""
    path = Path(path)
    if (path / "model.bin").exists():
        return "ctranslate2"
    if marian.is_marian_dir(path):
        return "marian"
    if checkpoint.is_checkpoint(path) or checkpoint.step_checkpoints(path):
        return "aiayn"
    raise checkpoint.CheckpointError(
        f"{path}: not a model aiayn can read (an aiayn checkpoint or run directory, a Marian "
        "directory, or a CTranslate2 export)")


def load_model(path: str | Path, device: str | torch.device = "cpu", ema: bool = False) -> LoadedModel:
    """The PyTorch model at `path`: an aiayn checkpoint, a run directory (its newest checkpoint), or
    a HuggingFace MarianMTModel directory (needs transformers). `ema`: an aiayn checkpoint's moving
    average of the weights (--ema-decay) instead of its weights."""
    kind = model_format(path)
    if kind == "ctranslate2":
        raise checkpoint.CheckpointError(f"{path}: a CTranslate2 export, which only CTranslate2 runs "
                                         "(engine ctranslate2)")
    if ema and kind != "aiayn":
        raise checkpoint.CheckpointError(f"{path}: a {kind} model has no moving average of its weights; "
                                         "drop --ema")
    if kind == "marian":
        model, tokenizer, languages = marian.load_marian(path)
        data = cfg.DataConfig(src_lang=languages.get("source_lang", ""),  # a Marian model is told the
                              tgt_lang=languages.get("target_lang", ""),  # target in the source (OPUS-MT)
                              pairs=languages.get("pairs", ()), language_token="source")
        return LoadedModel(model.to(device), tokenizer, data.src_lang, data.tgt_lang, Path(path), data,
                           cfg.TrainConfig())
    ck = checkpoint.load(checkpoint.resolve(path), device, with_state=False, ema=ema)
    return LoadedModel(ck.model, ck.tokenizer, ck.data.src_lang, ck.data.tgt_lang, ck.path, ck.data, ck.train,
                       checkpoint.decoding(ck.path))


def prepare(model: Transformer, device: torch.device, dtype: str = "float32", int8: bool = False,
            compile: bool | None = False) -> tuple[Transformer, str, bool]:
    """The model to translate with, computing as asked, a description of how, and whether its searches
    run the compiled decoder step. The one place that chooses: int8 linear maps (CPU; for the compiled
    step or eager), a compiled decoder step (TorchInductor packs the weights itself; on a CPU, the
    weights stored by column for its few-row steps: `inference.weights_by_column`), weights packed
    once for the CPU's matmul kernels (same results, faster), or a plain cast. compile=None: the
    compiled step if this model has been compiled on this machine before (its steps are in the cache,
    `decoding.cache`), else not. `model` (on `device`, in eval mode) may be changed or copied."""
    from aiayn import inference
    from aiayn.decoding.cache import store, verdict
    from aiayn.decoding.compiled import compiled_before

    torch_dtype = getattr(torch, dtype)
    problem = verdict.known_unloadable(device) if compile is not False else ""
    if problem:  # this machine's torch crashes loading compiled steps (`verdict.loads`)
        if compile or store.entries():  # asked for, or what the cache holds would have been used
            verdict.say_unloadable(problem)
        compile = False
    if int8:
        if device.type != "cpu":
            raise cfg.ConfigError("int8 is for CPUs: use device cpu")
        if compile or (compile is None and inference.int8_compilable() and store.entries()):
            compiled = inference.quantize_int8(model, compiled=True)  # a copy
            if compile or compiled_before(compiled):
                return compiled, "int8 compiled", True
        return inference.quantize_int8(model), "int8", False
    if compile or (compile is None and compiled_before(model.to(torch_dtype))):
        model = model.to(torch_dtype)
        if device.type == "cpu":  # the few-row matmuls of its steps, faster on weights by column
            inference.weights_by_column(model)
        return model, f"{dtype} compiled", True
    if device.type == "cpu" and inference.packing_available(torch_dtype):
        return inference.pack_for_cpu(model, torch_dtype), f"{dtype} packed", False
    return model.to(torch_dtype), dtype, False


def load_translator(path: str | Path, *, engine: str | None = None, device: str = "auto",
                    dtype: str = "float32", int8: bool = False, ema: bool = False,
                    compile: bool | None = None, threads: int | None = None, compute_type: str = "default",
                    src_lang: str | None = None,
                    tgt_lang: str | None = None, zero_shot: bool = False, **options: Any) -> Translator:
    """A Translator for the model at `path` (see `model_format`).

    src_lang, tgt_lang: the direction, for a multilingual model (default: the first it was trained
    on; `Translator.towards` gives the others, sharing the model); a bilingual model has its own.
    zero_shot: also a direction the multilingual model was not trained on (see `towards`).

    engine: "pytorch" or "ctranslate2" (default: ctranslate2 for a CTranslate2 export, else pytorch).
    device: auto (CUDA when present), cpu, cuda or cuda:N. threads: CPU threads (process-wide).
    PyTorch only: dtype (float32, bfloat16, float16), int8 (CPU), ema (the moving average of an aiayn
    checkpoint's weights, from training with --ema-decay), compile (a compiled decoder step:
    True, False, or None: if this model has been compiled on this machine before). On a CPU, the
    process's malloc then keeps freed memory for reuse (`allocator.keep_freed_memory`).
    CTranslate2 only: compute_type (default, float32, int8, ...).
    options: search defaults, the fields of DecodeConfig (beam_size, nbest, length_penalty, ...), over
    those an aiayn checkpoint keeps (chosen on a validation set by `aiayn evaluate --sweep`), over
    DecodeConfig's own.
    """
    from aiayn.train.loop import resolve_device

    _check_engine_options(engine, dtype, int8, compile, compute_type, options, ema)  # before reading anything
    engine = _engine_for(path, model_format(path), engine, compute_type)
    if engine == "ctranslate2":
        _check_engine_options(engine, dtype, int8, compile, compute_type, options, ema)
    if threads:
        torch.set_num_threads(threads)
    device_ = resolve_device(device)
    threads_ = torch.get_num_threads()
    plural = "s" if threads_ > 1 else ""
    on = f"on {device_}, {threads_} thread{plural}" if device_.type == "cpu" else f"on {device_}"
    if engine == "ctranslate2":
        from aiayn.interop.ctranslate2 import CTranslate2Translator

        ct2 = CTranslate2Translator(path, device_.type, threads_, compute_type)
        defaults = cfg.build(cfg.DecodeConfig, {"penalty_form": "plain", **options}, "translator options")
        translator = Translator(lambda ids, config, progress, steers=None: ct2.translate(ids, config, steers),
                                defaults, None,
                                ct2.tokenizer, *ct2.languages, f"ctranslate2 {compute_type} {on}",
                                ct2.max_source_len, pairs=ct2.pairs, language_token=ct2.language_token)
        return _in_direction(translator, src_lang, tgt_lang, zero_shot, path)
    if device_.type == "cpu":
        allocator.keep_freed_memory()  # a search's large tensors reuse freed memory (process-wide)
    loaded = load_model(path, device_, ema)
    model, how, compiled = prepare(loaded.model.eval(), device_, dtype, int8, compile)
    defaults = cfg.build(cfg.DecodeConfig, {**loaded.decoding, "compile": compiled, **options},
                         "translator options")

    def run(ids: list[list[int]], config: cfg.DecodeConfig, progress: bool,
            steers: list[Steer] | None = None) -> list[list[Translation]]:
        return translate_ids(model, loaded.tokenizer, ids, config, progress, steers)

    translator = Translator(run, defaults, model, loaded.tokenizer, loaded.src_lang, loaded.tgt_lang,
                            f"pytorch {how} {on}", max_source_len(loaded), pairs=loaded.data.pairs,
                            language_token=loaded.data.language_token)
    return _in_direction(translator, src_lang, tgt_lang, zero_shot, path)


def _in_direction(translator: Translator, src_lang: str | None, tgt_lang: str | None, zero_shot: bool,
                  path: str | Path) -> Translator:
    """`translator` for the direction asked: a multilingual model's (default: its first, see
    `Translator.towards`); a bilingual model translates its own only."""
    if translator.pairs:  # the first direction that fits the languages given (else the first)
        pairs = [pair.split("-") for pair in translator.pairs]
        fits = [(s, t) for s, t in pairs if src_lang in (None, s) and tgt_lang in (None, t)]
        src, tgt = fits[0] if fits else pairs[0]
        return translator.towards(src_lang or src, tgt_lang or tgt, zero_shot)
    has = (translator.src_lang, translator.tgt_lang)
    if all(has) and (src_lang or has[0], tgt_lang or has[1]) != has:
        raise cfg.ConfigError(f"{path} translates {has[0]}->{has[1]}, not {src_lang or has[0]}->"
                              f"{tgt_lang or has[1]}")
    return translator


def max_source_len(loaded: LoadedModel) -> int:
    """The longest sentence, in source tokens, that a model takes: the longest it was trained on,
    and with learned positions, no more than it has positions for (one goes to eos)."""
    c = loaded.model.config
    longest = loaded.data.max_len + bool(loaded.data.pairs)  # and a multilingual model's >>xx<<
    return min(longest, c.max_positions - 1) if c.positional == "learned" else longest


def _check_engine_options(engine: str | None, dtype: str, int8: bool, compile: bool, compute_type: str,
                          options: dict[str, Any], ema: bool = False) -> None:
    """Options of one engine given with the other are errors, not silently ignored."""
    if engine not in (None, *ENGINES):
        raise cfg.ConfigError(f"engine={engine!r} is not one of {', '.join(ENGINES)}")
    if dtype not in DTYPES:
        raise cfg.ConfigError(f"dtype={dtype!r} is not one of {', '.join(DTYPES)}")
    if int8 and dtype != "float32":
        raise cfg.ConfigError(f"--int8 and --dtype {dtype} are alternatives: choose one")
    if engine == "ctranslate2":
        pytorch_only = (("--int8", int8), (f"--dtype {dtype}", dtype != "float32"), ("--compile", compile),
                        ("--ema", ema))
        for flag, given in pytorch_only:
            if given:
                raise cfg.ConfigError(f"{flag} is for --engine pytorch; CTranslate2 takes --compute-type "
                                      "(int8, bfloat16, ...)")
        if options.get("penalty_form") == "gnmt":
            raise cfg.ConfigError("--penalty-form gnmt is for --engine pytorch; CTranslate2's length "
                                  "penalty is the plain form")
    elif engine == "pytorch" and compute_type != "default":
        raise cfg.ConfigError(f"--compute-type {compute_type} is for --engine ctranslate2; PyTorch takes "
                              "--int8 or --dtype")


def _engine_for(path: str | Path, kind: str, engine: str | None, compute_type: str) -> str:
    """The engine for a model of format `kind`: the one asked for, if it can run it."""
    if engine == "ctranslate2" and kind != "ctranslate2":
        raise cfg.ConfigError(f"{path} is not a CTranslate2 export (no model.bin): make one with "
                              "`aiayn export ctranslate2`")
    if engine == "pytorch" and kind == "ctranslate2":
        raise cfg.ConfigError(f"{path} is a CTranslate2 export: translate it with --engine ctranslate2")
    engine = engine or ("ctranslate2" if kind == "ctranslate2" else "pytorch")
    if engine == "pytorch" and compute_type != "default":
        raise cfg.ConfigError(f"--compute-type {compute_type} is for CTranslate2 exports; PyTorch takes "
                              "--int8 or --dtype")
    return engine


# (source ids of each sentence, without eos; search settings; progress bar; what each sentence's
# translation must hold, or None) -> n-best translations
Engine = Callable[[list[list[int]], cfg.DecodeConfig, bool, list[Steer] | None], list[list[Translation]]]


# A text cut into sentences, that joins their translations back into a text: plain text with its
# whitespace (segment.Parts) or HTML with its markup (markup.Document).
Layout = segment.Parts | markup.Document


@dataclass(frozen=True)
class Segments:
    """One text as a model translates it: its sentences (each cut to fit the model) in their
    layout, and each sentence's source ids (without eos). `Translator.segment`."""

    layout: Layout
    ids: list[list[int]]

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.ids)


class Translator:
    """A loaded model, ready to translate. Made by `load_translator`.

    `translate` returns one Translation per text, best first: its text, tokens and scores, the
    other hypotheses of an n-best list (`alternatives`), and, on request, its attention weights.
    A text is cut into its lines and sentences (`split`, the default), all sentences of all texts
    are searched in the same batches, and each text is joined back with its own whitespace. A text
    of one sentence gets that sentence's Translation; a text of several gets its sentences' own
    Translations in `sentences` (each with its alternatives and attention), and for the whole
    text: the log-probability and score summed over them, the tokens one after another, and as
    its k-th alternative each sentence's k-th (or last) alternative joined, as LibreTranslate
    does. A text without words translates to "". With format="html", a text is HTML: only its
    text is translated, its markup kept (text/markup.py). Keyword options override the defaults
    for one call: the fields of DecodeConfig (beam_size, nbest, length_penalty, split, format, ...).
    """

    def __init__(self, engine: Engine, defaults: cfg.DecodeConfig, model: Transformer | None,
                 tokenizer: Tokenizer, src_lang: str, tgt_lang: str, description: str,
                 max_source_len: int = cfg.DataConfig().max_len, pairs: tuple[str, ...] = (),
                 language_token: str = "source") -> None:
        self._engine, self.defaults, self.model, self.tokenizer = engine, defaults, model, tokenizer
        self.src_lang, self.tgt_lang, self.description = src_lang, tgt_lang, description
        self.max_source_len = max_source_len  # source tokens of the longest sentence the model takes
        self.source_prefix: tuple[int, ...] = ()  # ids before every sentence: a direction's >>xx<< (towards)
        self.pairs = pairs  # a multilingual model's directions (SRC-TGT), else none
        self.language_token = language_token  # where a multilingual model is told the target language
        self.zero_shot = False  # whether this direction is one the model was not trained on
        self._configs: dict[tuple[Any, ...], cfg.DecodeConfig] = {}  # `config`'s, by defaults and options

    def directions(self, zero_shot: bool = False) -> list[Translator]:
        """A translator for each direction of a multilingual model (all on its one model), and with
        `zero_shot` for each it was not trained on (see `towards`); a bilingual model's is this one."""
        if not self.pairs:
            return [self]
        sources, targets = (list(dict.fromkeys(p.split("-")[i] for p in self.pairs)) for i in (0, 1))
        every = [f"{s}-{t}" for s in sources for t in targets if s != t] if zero_shot else []
        return [self.towards(*pair.split("-"), zero_shot) for pair in dict.fromkeys([*self.pairs, *every])]

    def towards(self, src_lang: str, tgt_lang: str, zero_shot: bool = False) -> Translator:
        """This multilingual model's translator for another direction (the same model): one it was
        trained on, or with `zero_shot`, any from a language it has read to one it has written
        (Johnson et al.'s zero-shot translation: its quality is that of no training; `zero_shot` on
        the translator says so)."""
        pair = f"{src_lang}-{tgt_lang}"
        sources, targets = ({p.split("-")[i] for p in self.pairs} for i in (0, 1))
        untrained = pair not in self.pairs
        possible = src_lang in sources and tgt_lang in targets and src_lang != tgt_lang
        if untrained and not (zero_shot and possible):
            have = ", ".join(self.pairs) or f"only {self.src_lang}-{self.tgt_lang}"
            hint = " (untrained, zero-shot: --zero-shot)" if possible and not zero_shot else ""
            raise cfg.ConfigError(f"the model has no direction {pair}; it has {have}{hint}")
        piece = self.tokenizer.language_id(tgt_lang)
        if piece is None:
            raise cfg.ConfigError(f"the model's vocabulary has no piece >>{tgt_lang}<< to ask for {pair}")
        other = copy.copy(self)
        other.src_lang, other.tgt_lang, other.zero_shot = src_lang, tgt_lang, untrained
        other._configs = {}
        if self.language_token == "target":  # the decoder's first token
            other.defaults = dataclasses.replace(self.defaults, decoder_start=piece)
        else:
            other.source_prefix = (piece,)
        return other

    @property
    def start(self) -> int:
        """The decoder's first token: <s>, or a multilingual model's target language (`towards`)."""
        return self.defaults.decoder_start if self.defaults.decoder_start >= 0 else self.tokenizer.bos_id

    @property
    def compiled_steps(self) -> int:
        """How many compiled graphs this translator holds: decoder steps (one per kind of search and
        small row count, one for any count from 8 rows) and lone sentences' whole beam searches (one
        per beam size)."""
        from aiayn.decoding import compiled, whole

        if self.model is None:
            return 0
        return len(compiled.graphs(self.model)) + len(whole.graphs(self.model))

    def warm_up(self) -> None:
        """Translate once (compiled: a lone sentence, its whole beam search, `decoding.whole`), and
        with a compiled decoder step, a batch starting at each compiled step that batches of up to the
        batch size reach (`compiled.row_buckets`), of growing lengths so that its search shrinks
        through the smaller ones: each step is loaded, or compiled, now. The largest first: the steps
        its search shrinks through are compiled alongside (`cache.alongside`)."""
        from aiayn.decoding.compiled import row_buckets

        self.translate(["warm up"])
        if self.defaults.compile:
            most = self.defaults.batch_size
            for n in reversed(row_buckets(most)):
                self.translate([" ".join(["warm"] * (1 + i % 24)) for i in range(min(n, most))])

    def config(self, **options: Any) -> cfg.DecodeConfig:
        """The settings of a call: the defaults with `options` on top, checked. A server asks for them
        three times a request (its limits, the cutting, the search), mostly with the same few options:
        settings checked before (up to `CONFIGS` kinds of them) come back as they are."""
        if not options:
            return self.defaults
        key = (self.defaults, *sorted((name, type(v), v) for name, v in options.items()))  # True is not 1
        try:
            return self._configs[key]
        except TypeError:  # an option that cannot be a key (a list): checked each time
            key = None
        except KeyError:
            pass
        fields = {f.name: getattr(self.defaults, f.name) for f in dataclasses.fields(self.defaults)}
        config = cfg.build(cfg.DecodeConfig, {**fields, **options}, "translate options")
        if key is not None:
            if len(self._configs) >= CONFIGS:
                self._configs.clear()
            self._configs[key] = config
        return config

    def segment(self, texts: Sequence[str], *, html: Collection[int] = (), **options: Any) -> list[Segments]:
        """Each text as `translate` cuts it into sentences (options: split, max_source_len), with their
        source ids: a caller that needs them first (to check its limits, say) passes them back.
        `html`: texts read as HTML whatever the format (`translate`'s keep)."""
        config = self.config(**options)
        limit = (config.max_source_len or self.max_source_len) - len(self.source_prefix)
        layouts: list[Layout] = [
            markup.Document.parse(text, self.src_lang, config.split) if config.format == "html" or i in html
            else segment.split(text, self.src_lang, config.split) for i, text in enumerate(texts)]
        ids = iter(self.tokenizer.encode([sentence for p in layouts for sentence in p.sentences]))
        out = []
        for p in layouts:
            sentence_ids = [next(ids) for _ in p.sentences]
            if any(len(s) > limit for s in sentence_ids):
                p = p.fit(lambda sentence: len(self.tokenizer.encode([sentence])[0]) <= limit)
                sentence_ids = self.tokenizer.encode(p.sentences)
            out.append(Segments(p, sentence_ids))
        return out

    def translate(self, texts: Sequence[str], *, segments: Sequence[Segments] | None = None,
                  attention: bool = False, progress: bool = False, source: str | None = None,
                  target: str | None = None, constraints: Sequence[Sequence[str]] | None = None,
                  glossary: Glossary | Mapping[str, str] | None = None,
                  prefix: str | Sequence[str] | None = None, keep: str | re.Pattern | None = None,
                  **options: Any) -> list[Translation]:
        """The best translation of each text, in order (`attention`: with its attention weights).
        `segments`: the texts as `segment` cut them, when the caller has them already. `source`,
        `target`: another direction of a multilingual model (`towards`), for this call.
        `constraints`: for each text, phrases its translation must contain (a text of one sentence;
        beam search); `glossary`: terms that must be translated so wherever they occur (a Glossary,
        or a mapping of source term to target term), each a constraint of its sentence; `prefix`:
        what each text's translation begins with (one for all, or one per text; with alternatives=N,
        the N best ways to go on from it); `keep`: a pattern (regular expression) whose matches in
        plain text come back as they are, where their words land (text/kept.py)."""
        if isinstance(texts, str):
            raise TypeError("translate takes a list of texts; wrap one text in a list")
        direction = (source or self.src_lang, target or self.tgt_lang)
        if direction != (self.src_lang, self.tgt_lang):
            return self.towards(*direction, self.zero_shot).translate(
                texts, segments=segments, attention=attention, progress=progress, constraints=constraints,
                glossary=glossary, prefix=prefix, keep=keep, **options)
        if attention and self.model is None:
            raise cfg.ConfigError("attention weights come from the PyTorch model: use engine pytorch")
        marked: set[int] = set()
        if keep is not None and segments is None and self.config(**options).format == "text":
            pattern = re.compile(keep) if isinstance(keep, str) else keep
            marked = {i for i, text in enumerate(texts) if kept.marks(text, pattern)}
            texts = [kept.to_html(text, pattern) if i in marked else text for i, text in enumerate(texts)]
        segments = self.segment(texts, html=marked, **options) if segments is None else list(segments)
        if len(segments) != len(texts):
            raise ValueError(f"{len(segments)} segmented texts for {len(texts)} texts")
        steers = self.steers(segments, constraints, glossary, prefix)
        nbests = iter(self.search([ids for s in segments for ids in s.ids], progress=progress,
                                  steers=steers, **options))
        guards = iter(steers) if steers is not None else None
        done = [self.assemble(s, [next(nbests) for _ in s.ids], attention,
                              None if guards is None else [next(guards) for _ in s.ids]) for s in segments]
        return [_plain(t) if i in marked else t for i, t in enumerate(done)]

    def search(self, ids: Sequence[list[int]], *, progress: bool = False,
               steers: Sequence[Steer] | None = None, **options: Any) -> list[list[Translation]]:
        """The n-best list of each sentence, given as its source ids (without eos), best first. A
        sentence's list does not depend on the others searched with it (decoding/translator.py).
        `steers`: what each sentence's translation must hold (constraints, a prefix; target ids)."""
        prefix = list(self.source_prefix)
        ids = [prefix + s if s else s for s in ids] if prefix else list(ids)  # an empty sentence stays empty
        if steers is not None and not any(s.phrases or s.prefix for s in steers):
            steers = None
        return self._engine(ids, self.config(**options), progress, None if steers is None else list(steers))

    def steers(self, segments: Sequence[Segments], constraints: Sequence[Sequence[str]] | None = None,
               glossary: Glossary | Mapping[str, str] | None = None, prefix: str | Sequence[str] | None = None
               ) -> list[Steer] | None:
        """What each sentence of the texts `segments` (see `segment`) must hold in its translation,
        target ids: its text's own constraints and prefix (the text must be one sentence), then the
        glossary's terms found in the sentence; None for none at all (`search` takes them)."""
        if constraints is None and glossary is None and not prefix:
            return None
        prefixes = [prefix] * len(segments) if isinstance(prefix, str) or prefix is None else list(prefix)
        for name, given in (("constraints", constraints), ("prefixes", prefixes)):
            if given is not None and len(given) != len(segments):
                raise ValueError(f"{name} for {len(given)} texts, but {len(segments)} texts")
        terms = None if glossary is None else Glossary.of(glossary)
        phrases: list[list[str]] = []
        starts: list[str] = []
        for i, text in enumerate(segments):
            given = [] if constraints is None else [str(c) for c in constraints[i]]
            if (given or prefixes[i]) and len(text.ids) > 1:
                raise cfg.ConfigError(f"text {i + 1} has {len(text.ids)} sentences; constraints and prefixes "
                                      "apply to one sentence: give one sentence per text, or split=False "
                                      "(--no-split)")
            for j, sentence in enumerate(text.layout.sentences):
                phrases.append((given if j == 0 else []) + (terms.targets(sentence) if terms else []))
                starts.append((prefixes[i] or "") if j == 0 else "")
        flat = [p for sentence in phrases for p in sentence]
        encoded = iter(self.tokenizer.encode(flat, side="target"))
        ids = [tuple(tuple(next(encoded)) for _ in sentence) for sentence in phrases]
        for phrase, tokens in zip(flat, (p for sentence in ids for p in sentence), strict=True):
            if not tokens:
                raise cfg.ConfigError(f"the constraint {phrase!r} has no text to translate into")
        begins = self.tokenizer.encode(starts, side="target")
        return [Steer(p, tuple(b)) for p, b in zip(ids, begins, strict=True)]

    def assemble(self, segments: Segments, nbests: Sequence[list[Translation]], attention: bool = False,
                 steers: Sequence[Steer] | None = None) -> Translation:
        """A text's translation from the n-best list of each of its sentences (`search`), joined into
        its layout (see the class); `attention`: with each sentence's attention weights; `steers`: what
        each sentence was steered to hold (a kept span never replaces its terms: `blocks.Guarded`)."""
        if attention and self.model is None:
            raise cfg.ConfigError("attention weights come from the PyTorch model: use engine pytorch")
        if len(nbests) != len(segments.ids):
            raise ValueError(f"{len(nbests)} n-best lists for {len(segments.ids)} sentences")
        sentences = []
        for sentence, (best, *others) in zip(segments.layout.sentences, nbests, strict=True):
            best = dataclasses.replace(best, alternatives=others)
            if attention:
                best.attention = attention_view(self.model, self.tokenizer, sentence, best,
                                                self.source_prefix, self.start)
            sentences.append(best)
        terms = [[self.tokenizer.decode(list(p)) for p in s.phrases] for s in steers] if steers else None
        return whole_text(sentences, lambda hyps: self._join(segments.layout, hyps, terms))

    def _join(self, layout: Layout, translations: list[Translation],
              terms: Sequence[Sequence[str]] | None = None) -> str:
        """A translation of each sentence put into the text; `terms`: each sentence's target words that
        a kept span must not replace."""
        def project(i: int) -> blocks.Projector:
            projector = self._projector(layout.sentences[i], translations[i])
            protected = blocks.occurrences(terms[i], translations[i].text) if terms else ()
            return blocks.Guarded(projector, protected) if protected else projector

        return layout.join([t.text for t in translations], self.tgt_lang, project)

    def _projector(self, sentence: str, translation: Translation) -> blocks.Projector:
        """How a span of `sentence` (an HTML tag's words) is carried onto its translation: by the
        words aligned to it in the PyTorch model's cross-attention, else by its place in the sentence."""
        if self.model is not None and translation.tokens:
            view = translation.attention or attention_view(self.model, self.tokenizer, sentence, translation,
                                                           self.source_prefix, self.start)
            source = blocks.token_spans(view.source[view.prefix:-1], sentence)
            target = blocks.token_spans(view.target_out[:-1], translation.text)
            if source is not None and target is not None:
                return blocks.aligned(source, target, alignment(view), translation.text)
        return blocks.proportional(len(sentence), translation.text)

    def translate_file(self, data: bytes, name: str, *, progress: bool = False, **options: Any) -> bytes:
        """A file of a kind in `documents.KINDS` (from `name`) translated with its structure
        (text/documents.py); raises DocumentError for other kinds and broken files."""
        document = documents.read(data, name)
        options["format"] = document.format
        translations = self.translate(document.texts, progress=progress, **options)
        return document.write([t.text for t in translations])

    def translate_stream(self, lines: Iterable[str | tuple[str, Sequence[str]]], *, chunk: int = CHUNK,
                         progress: bool = False, glossary: Glossary | Mapping[str, str] | None = None,
                         prefix: str | None = None, keep: str | re.Pattern | None = None, **options: Any
                         ) -> Iterator[Translation]:
        """The translation of each line as it comes, holding `chunk` lines at a time (sorted by length
        into batches within a chunk), so a file or a pipe of any length translates in bounded memory.
        The first chunk is smaller (FIRST_CHUNK lines), so the first lines come out soon. A line may
        be a pair (text, constraints): phrases its translation must contain; `glossary`, `prefix`,
        `keep`: as `translate` takes them, for every line."""
        options = dataclasses.asdict(self.config(**options))  # checked before the first line is read
        terms = None if glossary is None else Glossary.of(glossary)
        iterator = iter(lines)
        size = min(chunk, FIRST_CHUNK)
        while batch := list(itertools.islice(iterator, size)):
            texts = [line if isinstance(line, str) else line[0] for line in batch]
            constraints = None if all(isinstance(line, str) for line in batch) else \
                [() if isinstance(line, str) else line[1] for line in batch]
            yield from self.translate(texts, progress=progress, constraints=constraints, glossary=terms,
                                      prefix=prefix, keep=keep, **options)
            size = chunk


def _plain(translation: Translation) -> Translation:
    """A translation of text with kept spans (text/kept.py) as plain text, its alternatives too."""
    return dataclasses.replace(translation, text=kept.from_html(translation.text),
                               alternatives=[_plain(t) for t in translation.alternatives])


def whole_text(sentences: list[Translation], join: Callable[[list[Translation]], str]) -> Translation:
    """A text's Translation from its sentences' (see `Translator`); `join` puts a translation of
    each sentence into the text."""
    if not sentences:
        return Translation(join([]), 0.0, 0.0, [])
    ranked = [[s, *s.alternatives] for s in sentences]

    def kth(k: int) -> Translation:
        hyps = [r[min(k, len(r) - 1)] for r in ranked]
        return Translation(join(hyps), sum(h.score for h in hyps), sum(h.log_prob for h in hyps),
                           [t for h in hyps for t in h.tokens], confidence=Translation.pooled(hyps))

    best = kth(0)
    best.alternatives = [kth(k) for k in range(1, max(len(r) for r in ranked))]
    if len(sentences) > 1:
        best.sentences = sentences
    else:
        best.attention = sentences[0].attention
    return best


@dataclass
class AttentionView:
    """One sentence's translation and the attention weights of every layer and head."""

    sentence: str  # the source sentence
    translation: str
    source: list[str]  # source pieces, then </s>
    target_in: list[str]  # <s>, then the translation's pieces: the decoder's positions
    target_out: list[str]  # what each decoder position predicts: the pieces, then </s>
    # Per layer: "encoder" (H, S, S), "decoder" (H, T, T), "cross" (H, T, S).
    maps: dict[str, list[torch.Tensor]]
    prefix: int = 0  # source pieces before the sentence's: a multilingual model's >>xx<<

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of one kind of attention."""
        return {"encoder": (self.source, self.source), "decoder": (self.target_in, self.target_in),
                "cross": (self.target_in, self.source)}[kind]


def alignment(view: AttentionView) -> list[int]:
    """For each target token, the sentence's source token (not </s>, nor a prefix; counted from the
    sentence's first) it attends to most: cross-attention averaged over layers and heads, at the
    decoder position that predicts the token."""
    cross = torch.stack(view.maps["cross"]).mean(dim=(0, 1))  # (T, S): T = <s> + tokens, S = pieces + </s>
    return cross[: len(view.target_out) - 1, view.prefix: len(view.source) - 1].argmax(dim=-1).tolist()


@torch.no_grad()
def attention_view(model: Transformer, tokenizer: Tokenizer, sentence: str, translation: Translation,
                   prefix: tuple[int, ...] = (), start: int | None = None) -> AttentionView:
    """Every layer's and head's attention weights for `translation` of `sentence`: the translation run
    once more through the model with teacher forcing (`Transformer.attention_maps`; the cached
    step-by-step decoder computes the same weights). `prefix`: the source's first ids, `start` the
    decoder's (default bos): a multilingual model's target language."""
    c = model.config
    src_ids = [*prefix, *tokenizer.encode([sentence])[0], c.eos_id]
    tgt_in = [c.bos_id if start is None else start] + translation.tokens
    device = next(model.parameters()).device
    src, tgt = torch.tensor([src_ids], device=device), torch.tensor([tgt_in], device=device)
    with gate.running():  # a server's other thread may be compiling a step
        _, maps = model.attention_maps(src, tgt)
    kinds = {"encoder": maps.encoder, "decoder": maps.decoder, "cross": maps.cross}
    return AttentionView(sentence, translation.text, tokenizer.pieces(src_ids, "source"),
                         tokenizer.pieces(tgt_in), tokenizer.pieces(translation.tokens + [c.eos_id]),
                         {kind: [w[0].float().cpu() for w in weights] for kind, weights in kinds.items()},
                         len(prefix))
