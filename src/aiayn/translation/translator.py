"""The Translator: a loaded model, ready to translate texts (cut into sentences, searched in
batches, joined back into their layout), files and streams of lines of any length. Search options
are the fields of `DecodeConfig`. Made by `load_translator` (translation/loading.py).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiayn import config as cfg
from aiayn.decoding.constrained import Steer
from aiayn.decoding.translator import Translation, whole_text
from aiayn.model import Transformer
from aiayn.text import blocks, documents, kept, markup, segment
from aiayn.text.glossary import Glossary
from aiayn.tokenizer import Tokenizer
from aiayn.translation.attention import AttentionView, alignment, attention_view, attention_views

CHUNK = 2048  # lines that translate_stream sorts by length into batches and translates together: the
# more, the closer the lengths within a batch, and the shorter the tail of its longest sentences stepping
# alone (measured in benchmarks/detail/decode_speed.md, "A real file end to end")
FIRST_CHUNK = 128  # lines of its first chunk, then whole chunks: the first lines come out soon. A first
# chunk of one whole batch makes fewer decoder steps than a smaller one, for a first line a little later
# (benchmarks/detail/decode_speed.md)
CONFIGS = 64  # kinds of settings `Translator.config` keeps, checked


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
                 language_token: str = cfg.DataConfig().language_token,
                 by_direction: Mapping[str, cfg.DecodeConfig] | None = None) -> None:
        self._engine, self.defaults, self.model, self.tokenizer = engine, defaults, model, tokenizer
        # the model's search defaults, and a multilingual model's directions' own (`towards`)
        self._model_defaults, self._by_direction = defaults, dict(by_direction or {})
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
        the translator says so). Its search defaults: the direction's own where the model keeps them
        (`aiayn evaluate --sweep --src-lang S --tgt-lang T`), options given at loading still winning."""
        pair = f"{src_lang}-{tgt_lang}"
        sources, targets = ({p.split("-")[i] for p in self.pairs} for i in (0, 1))
        untrained = pair not in self.pairs
        possible = src_lang in sources and tgt_lang in targets and src_lang != tgt_lang
        if untrained and not (zero_shot and possible):
            have = ", ".join(self.pairs) or f"only {self.src_lang}-{self.tgt_lang}"
            hint = " (untrained: zero-shot with load_translator(..., zero_shot=True) or --zero-shot)" \
                if possible and not zero_shot else ""
            raise cfg.ConfigError(f"the model has no direction {pair}; it has {have}{hint}")
        piece = self.tokenizer.language_id(tgt_lang)
        if piece is None:
            raise cfg.ConfigError(f"the model's vocabulary has no piece >>{tgt_lang}<< to ask for {pair}")
        other = copy.copy(self)
        other.src_lang, other.tgt_lang, other.zero_shot = src_lang, tgt_lang, untrained
        other._configs = {}
        own, mine = self._by_direction, f"{self.src_lang}-{self.tgt_lang}"  # settings kept per direction
        other.defaults = own[pair] if pair in own else self._model_defaults if mine in own else self.defaults
        if self.language_token == "target":  # the decoder's first token
            other.defaults = dataclasses.replace(other.defaults, decoder_start=piece)
        else:
            other.source_prefix = (piece,)
        return other

    @property
    def start(self) -> int:
        """The decoder's first token: <s>, or a multilingual model's target language (`towards`)."""
        return self.defaults.start_token(self.tokenizer.bos_id)

    @property
    def compiled_steps(self) -> int:
        """How many compiled graphs this translator holds: decoder steps (one per kind of search and
        small row count, one for any count from 8 rows) and lone sentences' whole beam searches (one
        per beam size)."""
        from aiayn.decoding import step_graph, whole

        if self.model is None:
            return 0
        return len(step_graph.graphs(self.model)) + len(whole.graphs(self.model))

    def warm_up(self) -> None:
        """Translate once (compiled: a lone sentence, its whole beam search, `decoding.whole`), and
        with a compiled decoder step, a batch starting at each compiled step that batches of up to the
        batch size reach (`step_graph.row_buckets`), of growing lengths so that its search shrinks
        through the smaller ones: each step is loaded, or compiled, now. The largest first: the steps
        its search shrinks through are compiled alongside (`cache.alongside`)."""
        from aiayn.decoding.step_graph import row_buckets

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
        lists = [[next(nbests) for _ in s.ids] for s in segments]
        views = self._views(segments, lists, attention)
        done = [self.assemble(s, found, attention, None if guards is None else [next(guards) for _ in s.ids],
                              views) for s, found in zip(segments, lists, strict=True)]
        return [_plain(t) if i in marked else t for i, t in enumerate(done)]

    def _views(self, segments: Sequence[Segments], lists: Sequence[Sequence[list[Translation]]],
               attention: bool) -> dict[tuple[str, tuple[int, ...]], AttentionView]:
        """The attention views that assembling these texts will read, computed in batches (one model
        call per `attention_views` batch, not one per sentence): every best translation's with
        `attention`, else those of the sentences whose inline tags (or kept spans) must be carried
        over (found by joining each text once with stand-in projectors). Keyed by (sentence, tokens)."""
        if self.model is None:
            return {}
        pairs = []
        for s, found in zip(segments, lists, strict=True):
            best = [n[0] for n in found]
            asked: set[int] = set()

            def record(i: int, s: Segments = s, best: list[Translation] = best, asked: set[int] = asked
                       ) -> blocks.Projector:
                asked.add(i)
                return blocks.proportional(len(s.layout.sentences[i]), best[i].text)

            if not attention and isinstance(s.layout, markup.Document):  # plain text carries no spans
                s.layout.join([t.text for t in best], self.tgt_lang, record)
            chosen = range(len(best)) if attention else sorted(asked)
            pairs += [(s.layout.sentences[i], best[i]) for i in chosen if best[i].tokens]
        if not pairs:
            return {}
        views = attention_views(self.model, self.tokenizer, pairs, self.source_prefix, self.start,
                                encoder=attention)
        return {(sentence, tuple(t.tokens)): view for (sentence, t), view in zip(pairs, views, strict=True)}

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
                 steers: Sequence[Steer] | None = None,
                 views: Mapping[tuple[str, tuple[int, ...]], AttentionView] | None = None) -> Translation:
        """A text's translation from the n-best list of each of its sentences (`search`), joined into
        its layout (see the class); `attention`: with each sentence's attention weights; `steers`: what
        each sentence was steered to hold (a kept span never replaces its terms: `blocks.Guarded`);
        `views`: attention views computed already (`_views`), by (sentence, tokens)."""
        views = views or {}
        if attention and self.model is None:
            raise cfg.ConfigError("attention weights come from the PyTorch model: use engine pytorch")
        if len(nbests) != len(segments.ids):
            raise ValueError(f"{len(nbests)} n-best lists for {len(segments.ids)} sentences")
        sentences = []
        for sentence, (best, *others) in zip(segments.layout.sentences, nbests, strict=True):
            best = dataclasses.replace(best, alternatives=others)
            if attention:
                best.attention = views.get((sentence, tuple(best.tokens))) or attention_view(
                    self.model, self.tokenizer, sentence, best, self.source_prefix, self.start)
            sentences.append(best)
        terms = [[self.tokenizer.decode(list(p)) for p in s.phrases] for s in steers] if steers else None
        return whole_text(sentences, lambda hyps: self._join(segments.layout, hyps, terms, views))

    def _join(self, layout: Layout, translations: list[Translation],
              terms: Sequence[Sequence[str]] | None = None,
              views: Mapping[tuple[str, tuple[int, ...]], AttentionView] | None = None) -> str:
        """A translation of each sentence put into the text; `terms`: each sentence's target words that
        a kept span must not replace; `views`: attention views computed already."""
        def project(i: int) -> blocks.Projector:
            view = (views or {}).get((layout.sentences[i], tuple(translations[i].tokens)))
            projector = self._projector(layout.sentences[i], translations[i], view)
            protected = blocks.occurrences(terms[i], translations[i].text) if terms else ()
            return blocks.Guarded(projector, protected) if protected else projector

        return layout.join([t.text for t in translations], self.tgt_lang, project)

    def _projector(self, sentence: str, translation: Translation, view: AttentionView | None = None
                   ) -> blocks.Projector:
        """How a span of `sentence` (an HTML tag's words) is carried onto its translation: by the
        words aligned to it in the PyTorch model's cross-attention (`view`, if computed already), else
        by its place in the sentence."""
        if self.model is not None and translation.tokens:
            view = view or translation.attention or attention_view(
                self.model, self.tokenizer, sentence, translation, self.source_prefix, self.start)
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
