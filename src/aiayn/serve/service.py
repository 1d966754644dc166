"""What every API of the server shares: the models by language pair, the limits, API keys, the
batcher and its search threads, the threads that prepare texts and files, the metrics, and
readiness; and the way one request's texts are checked, queued and awaited (`Service.translate`).

The event loop only routes, batches and answers: cutting texts into sentences, tokenising,
detecting languages, reading and writing files and building large answers run on the preparing
threads (`Service.prepare`), searching on the search threads."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import hmac
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import Request, Response

from aiayn.config import ConfigError, ServeConfig
from aiayn.serve import batcher
from aiayn.serve.batcher import Batcher, QueueFull, Search
from aiayn.serve.errors import Problem
from aiayn.serve.files import TranslatedFiles
from aiayn.serve.metrics import Metrics
from aiayn.serve.ratelimit import RateLimits
from aiayn.serve.searching import searchers, take_over, warm_up
from aiayn.text import markup
from aiayn.text.detect import LanguageDetector
from aiayn.text.glossary import Glossary, GlossaryError
from aiayn.translation import Segments, Translation, Translator


class Service:
    """The server's state; `running()` is its lifespan (the batcher's task, the warm-up)."""

    def __init__(self, translators: Iterable[Translator], config: ServeConfig,
                 api_keys: Iterable[str], searcher: ThreadPoolExecutor | None = None) -> None:
        self.models = by_pair(translators, config.zero_shot)
        self.config, self.keys = config, frozenset(api_keys)
        self.metrics = Metrics()
        self.executor = searcher or searchers()
        self.batcher = Batcher(self.models, config, self.executor, self.metrics.batch,
                               self.executor._max_workers)
        self.metrics.queue_depth.set_function(lambda: self.batcher.queued)
        self.limits = RateLimits(config.req_limit, config.key_req_limit)
        self.files = TranslatedFiles()
        self._detectors: dict[tuple[str, ...], LanguageDetector] = {}
        self._detecting = threading.Lock()
        self.preparers = ThreadPoolExecutor(config.prep_threads, thread_name_prefix="aiayn-prep")
        self.ready = False

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Search batches while the server runs; warm each model up in the worker thread first
        (`ready` turns True once that is done): searches that need a compiled step not in the cache
        yet run eagerly while other processes compile it (`searching.warm_up`), and
        `take_over` says when the compiled steps are in use. Once warm, what the process holds (the
        models, the libraries) is left out of Python's full garbage collections (`gc.freeze`): they
        hold every thread for as long as they take, and over a loaded model they were the event
        loop's longest waits while a large file was read (benchmarks/detail/serve_busy.md)."""
        loop = asyncio.get_running_loop()
        searching = asyncio.create_task(self.batcher.run())
        warming = loop.run_in_executor(self.executor, warm_up, self.models.values())
        taking_over: list[asyncio.Task] = []

        def warmed(f: asyncio.Future) -> None:
            self.ready = f.exception() is None
            gc.freeze()
            if self.ready and f.result():
                taking_over.append(asyncio.create_task(take_over(self.executor, self.models.values())))

        warming.add_done_callback(warmed)
        try:
            yield
        finally:
            gc.unfreeze()
            for task in [searching, *taking_over]:
                task.cancel()
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.preparers.shutdown(wait=False, cancel_futures=True)

    async def prepare(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`work(*args, **kwargs)` on the preparing threads: CPU work kept off the event loop."""
        call = functools.partial(work, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self.preparers, call)

    async def json_answer(self, make: Callable[[], Any]) -> Response:
        """A JSON answer built and written on the preparing threads (attention weights, the explain
        page's data: hundreds of thousands of numbers)."""
        body = await self.prepare(lambda: json.dumps(make()).encode())
        return Response(body, media_type="application/json")

    def admit(self, request: Request, given_key: str | None = None) -> None:
        """A request to a translating endpoint: its API key is checked (`given_key`: from its body),
        then the requests per minute of its address and key."""
        key = self.check_key(request, given_key)
        self.limits.check(request.client.host if request.client else "", key)

    def check_key(self, request: Request, given: str | None = None) -> str | None:
        """The request's API key; 401 without one, 403 with a wrong one, when the server has keys."""
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        key = given or request.headers.get("x-api-key") or bearer
        if not self.keys:
            return key
        if not key:
            raise Problem(401, "an API key is required: send it as 'Authorization: Bearer KEY', "
                               "'X-API-Key: KEY' or the api_key field")
        if not any([hmac.compare_digest(key.encode(), k.encode()) for k in self.keys]):  # each compared
            raise Problem(403, "the API key is not valid")
        return key

    async def detect(self, texts: Sequence[str], target: str | None = None, format: str = "text",
                     limits: bool = True) -> list[tuple[str, float]]:
        """The languages of `texts` taken together (of their text, for HTML; at most `max_chars`
        characters of it are read), most likely first, with confidences from 0 to 1, among the
        source languages of the models (that translate into `target`, if given). `limits`: check
        the number and length of the texts first (400)."""
        if limits:
            check_counts(texts, self.config)
        sources = tuple(sorted({s for s, t in self.models if target in (None, t)}))
        if not sources:
            served = ", ".join(f"{s}->{t}" for s, t in self.models)
            raise Problem(400, f"no model translates into {target}; this server has {served}")
        return await self.prepare(self._detect, sources, list(texts), format)

    def _detect(self, sources: tuple[str, ...], texts: list[str], format: str) -> list[tuple[str, float]]:
        with self._detecting:  # built once, by one preparing thread
            if sources not in self._detectors:
                try:
                    self._detectors[sources] = LanguageDetector(sources)
                except ImportError as e:
                    raise Problem(501, f"source auto: {e}; or give the source language") from None
                except ValueError as e:
                    raise Problem(400, f"source auto: {e}") from None
            detector = self._detectors[sources]
        most = self.config.max_chars
        if format == "html":  # its text, from the start of the page (markup and all: 16x the text read)
            texts = [" ".join(markup.Document.parse(t, "").sentences) for t in clipped(texts, 16 * most)]
        return detector.detect(clipped(texts, most))

    def pair(self, source: str | None, target: str | None) -> tuple[str, str]:
        """The language pair a request asks for; a language left out: the one model that fits."""
        fits = [p for p in self.models if source in (None, p[0]) and target in (None, p[1])]
        if len(fits) == 1:
            return fits[0]
        served = ", ".join(f"{s}->{t}" for s, t in self.models)
        if not fits:
            raise Problem(400, f"no model translates {source or '?'}->{target or '?'}; "
                               f"this server has {served}")
        raise Problem(400, f"several models fit ({served}): give source and target")

    def beam_for(self, pair: tuple[str, str], nbest: int) -> int:
        """The beam of a request that asks for `nbest` hypotheses and no beam: the default, or wider."""
        return max(self.models[pair].defaults.beam_size, nbest)

    async def translate(self, request: Request, texts: list[str], pair: tuple[str, str],
                        options: dict[str, Any], attention: bool = False, file: str | None = None,
                        deadline: float | None = None, glossary: Glossary | None = None
                        ) -> list[Translation]:
        """Check the texts' tokens and the search against the limits (their number and characters
        the handlers check, with `check_counts`, before anything reads them), cut them into sentences
        (on the preparing threads), queue them for the batcher, and await their translations
        (withdrawn past the `deadline`, an event-loop time, by default `timeout` from now, or when
        the client goes away). `file`: the texts are that file's (its limit is `max_file_tokens`, its
        sentences bulk). `glossary`: terms to translate as it says, wherever they occur (constrained
        search)."""
        if not self.ready:
            raise Problem(503, "the server is warming up its models", {"Retry-After": "1"})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.timeout if deadline is None else deadline
        translator = self.models[pair]
        try:
            search = translator.config(**options)
        except ValueError as e:
            raise Problem(422, str(e)) from None
        at_most("beam_size", search.beam_size, self.config.max_beam_size)
        if glossary:
            if translator.model is None:
                raise Problem(400, "a glossary needs constrained search, which CTranslate2 models lack")
            if search.beam_size < 2 or search.temperature > 0:
                raise Problem(400, "a glossary needs beam search: a beam_size of 2 or more")
            at_most("glossary entries", len(glossary), MAX_GLOSSARY)
        searched = {k: v for k, v in options.items() if k not in CUTTING}  # done when cut into sentences
        wanted = Search(pair, tuple(sorted(searched.items())), attention, steered=bool(glossary))
        queued = await self.prepare(self._request, texts, translator, options, wanted, file, glossary)
        timeout = self.config.file_timeout if file is not None else self.config.timeout
        return await self._queue(request, queued, deadline, f"this server's {'file ' if file else ''}timeout "
                                                            f"({timeout:g} s)")

    def _request(self, texts: list[str], translator: Translator, options: dict[str, Any], search: Search,
                 file: str | None, glossary: Glossary | None = None) -> batcher.Request:
        """On a preparing thread: the texts cut into sentences and checked (`check_tokens`), as the
        batcher's Request, with each sentence's glossary terms; bulk if it is a file, or more than one
        search's tokens, or more sentences than the queue holds."""
        segments = check_tokens(texts, translator, self.config, options, file)
        bulk = file is not None or sum(s.tokens for s in segments) > self.config.max_batch_tokens or \
            sum(len(s.ids) for s in segments) > self.config.max_queue
        steers = translator.steers(segments, glossary=glossary) if glossary else None
        return self.batcher.request(texts, segments, search, bulk, steers)

    async def _queue(self, request: Request, queued: batcher.Request, deadline: float, limit: str) -> Any:
        """Submit to the batcher and await the answers (see `results`)."""
        arrived(request, self.batcher)
        try:
            future = self.batcher.submit(queued)
        except QueueFull as e:
            raise Problem(503, f"the server is busy: {e}; retry later", {"Retry-After": "1"}) from None
        return await results(request, future, deadline, limit)

    async def explain(self, request: Request, text: str, pair: tuple[str, str], options: dict[str, Any]
                      ) -> Response:
        """The explain page's data for one sentence (`aiayn.explain`): queued and searched like any
        sentence (alone), within the timeout."""
        if not self.ready:
            raise Problem(503, "the server is warming up its models", {"Retry-After": "1"})
        deadline = asyncio.get_running_loop().time() + self.config.timeout
        check_counts([text], self.config)
        if not text.strip():  # no sentence to queue
            raise Problem(400, "the sentence is empty: give a sentence to explain")
        wanted = Search(pair, tuple(sorted(options.items())), explain=True)
        segments = await self.prepare(self.models[pair].segment, [text], split=False)
        try:
            data, = await self._queue(request, self.batcher.request([text], segments, wanted), deadline,
                                      f"this server's timeout ({self.config.timeout:g} s)")
        except ConfigError as e:
            raise Problem(400, str(e)) from None
        return await self.json_answer(lambda: data)


# Options that say how texts are cut into sentences; the search of those sentences is the same.
CUTTING = ("split", "format", "max_source_len")
MAX_GLOSSARY = 1000  # entries of a request's glossary


def glossary(entries: dict[str, str] | None) -> Glossary | None:
    """A request's glossary (source term -> target term); 422 for an entry without text."""
    if not entries:
        return None
    try:
        return Glossary.of(entries)
    except GlossaryError as e:
        raise Problem(422, str(e)) from None


def confidence(t: Translation) -> float | None:
    """A translation's confidence as answered: its log-probability per token, to 4 places (None:
    the engine does not say)."""
    return None if t.confidence is None else round(t.confidence, 4)


def at_most(field: str, value: int, most: int) -> None:
    """A request's `field` may not ask for more than the server allows: 422 naming the field."""
    if value > most:
        raise Problem(422, f"{field}={value} is more than this server allows ({most})")


def by_pair(translators: Iterable[Translator], zero_shot: bool = False) -> dict[tuple[str, str], Translator]:
    """The translator of each language pair; a multilingual model answers each of its directions
    (`Translator.directions`: one model in memory), and with `zero_shot` those it was not trained on."""
    models: dict[tuple[str, str], Translator] = {}
    for t in (d for translator in translators for d in translator.directions(zero_shot)):
        pair = (t.src_lang, t.tgt_lang)
        if not all(pair):
            raise ValueError(f"a model without its languages ({t.description}): serve models that name "
                             "their source and target language")
        if pair in models:
            raise ValueError(f"two models translate {pair[0]}->{pair[1]}: serve one per language pair")
        models[pair] = t
    if not models:
        raise ValueError("no model to serve")
    return models


def check_counts(texts: Sequence[str], config: ServeConfig) -> None:
    """A request's number of texts and their characters, checked before any work on them (400)."""
    if len(texts) > config.max_texts:
        raise Problem(400, f"{len(texts)} texts in one request; at most {config.max_texts}")
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            raise Problem(400, f"text {i}: {len(text):,} characters; at most {config.max_chars:,}")


def check_tokens(texts: list[str], translator: Translator, config: ServeConfig, options: dict[str, Any],
                 file: str | None = None) -> list[Segments]:
    """Each text cut into sentences with their source ids (the translator takes them as they are:
    each text is cut and tokenised once), once its tokens are checked against `max_tokens` (400), or
    those of a whole `file` against `max_file_tokens`."""
    segments = translator.segment(texts, **options)
    if file is not None:
        tokens = sum(s.tokens for s in segments)
        if tokens > config.max_file_tokens:
            raise Problem(400, f"{file}: {tokens:,} tokens; a file may have at most "
                               f"{config.max_file_tokens:,}")
        return segments
    for i, s in enumerate(segments):
        if s.tokens > config.max_tokens:
            raise Problem(400, f"text {i}: {s.tokens:,} tokens; at most {config.max_tokens:,}")
    return segments


def clipped(texts: Sequence[str], chars: int) -> list[str]:
    """The first `chars` characters of `texts`, as texts."""
    out = []
    for text in texts:
        if chars <= 0:
            break
        out.append(text[:chars])
        chars -= len(text)
    return out


async def results(request: Request, future: asyncio.Future, deadline: float, limit: str) -> Any:
    """A request's answers (its batcher future's result, or its error); past the `deadline` (an
    event-loop time; `limit` says which, for the 504), when the client goes away, or when this
    handler is cancelled, the sentences still waiting are withdrawn (the future cancelled)."""
    gone = asyncio.ensure_future(client_gone(request))
    try:
        timeout = max(0.0, deadline - asyncio.get_running_loop().time())
        await asyncio.wait({future, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        future.cancel()  # nothing when it has its answers already
    if not future.cancelled():
        return future.result()
    if gone.done() and not gone.cancelled() and gone.exception() is None:
        raise Problem(499, "the client closed the connection")
    raise Problem(504, f"the translation took longer than {limit}")


async def client_gone(request: Request) -> None:
    """Returns when the client closes the connection: once the body is read, the next message the
    server gets for the request is that one (no polling)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def arrived(request: Request, batcher: Batcher) -> None:
    """The request is no longer on its way to the batcher (see `limits.Limits`)."""
    if request.scope.get("state", {}).pop("aiayn_arriving", False):
        batcher.arriving -= 1
