"""The HTTP service: aiayn's JSON API, LibreTranslate's, health, readiness, metrics and a web page.

Every error answers JSON `{"error": MESSAGE}` with its status code, and the server goes on:
400 for input it cannot translate (invalid UTF-8, a text too long, too many texts, an unknown
language pair), 401/403 for a missing/wrong API key, 413 for a body too large, 422 for invalid
JSON or wrong types, 503 with Retry-After while warming up or when the queue is full, 504 when a
request runs past its timeout (its sentences still waiting leave the queue). A client that goes
away has its waiting sentences withdrawn too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException

from aiayn import __version__
from aiayn.config import ServeConfig
from aiayn.serve.batcher import Batcher, QueueFull, Search
from aiayn.serve.metrics import Metrics
from aiayn.translation import AttentionView, Translation, Translator

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
                  "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic", "tr": "Turkish"}


class TranslateRequest(BaseModel):
    """`POST /v1/translate`. Unset search options take the server's defaults."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: str | list[str] = Field(description="a text, or a list of texts, each translated on its own")
    source: str | None = Field(None, description="source language; may be left out when one model serves")
    target: str | None = Field(None, description="target language; may be left out when one model serves")
    beam_size: int | None = Field(None, ge=1, description="beam width; 1 is greedy search")
    nbest: int | None = Field(None, ge=1, description="hypotheses per text, best first (at most beam_size)")
    length_penalty: float | None = Field(None, ge=0, description="length penalty alpha")
    max_len: int | None = Field(None, ge=1, description="output at most this many tokens")
    attention: bool = Field(False, description="return the encoder-decoder attention of each translation")


class LibreTranslateRequest(BaseModel):
    """`POST /translate`, as LibreTranslate takes it (JSON or a form)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    q: str | list[str]
    source: str
    target: str
    format: str = "text"
    alternatives: int = Field(0, ge=0)
    api_key: str | None = None


class Problem(Exception):
    """An answer with an error status: `{"error": message}`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def create_app(translators: Iterable[Translator], config: ServeConfig | None = None,
               api_keys: Iterable[str] = ()) -> FastAPI:
    """The service for `translators` (one per language pair). Started (its lifespan), it warms each
    model up in a worker thread; `/ready` answers 200 once they all are."""
    models = _by_pair(translators)
    config = config or ServeConfig()
    keys = frozenset(api_keys)
    metrics = Metrics()
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aiayn-search")
    batcher = Batcher(models, config, executor, metrics.batch)
    metrics.queue_depth.set_function(lambda: batcher.queued)
    state = {"ready": False}

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        searching = asyncio.create_task(batcher.run())
        warming = loop.run_in_executor(executor, _warm_up, models.values(), config)
        warming.add_done_callback(lambda f: state.update(ready=f.exception() is None))
        try:
            yield
        finally:
            searching.cancel()
            executor.shutdown(wait=False, cancel_futures=True)

    app = FastAPI(title="aiayn", version=__version__, lifespan=lifespan,
                  description="Neural machine translation with the Transformer of 'Attention Is All "
                              "You Need': aiayn's own API (/v1/translate) and LibreTranslate's (/translate).")
    app.add_middleware(_Limits, max_body_bytes=config.max_body_bytes, metrics=metrics, batcher=batcher)

    @app.exception_handler(Problem)
    async def problem(request: Request, e: Problem) -> JSONResponse:
        return JSONResponse({"error": e.message}, e.status, headers=e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_message(e.errors())}, 422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(e.detail)}, e.status_code, headers=e.headers)

    def check_key(request: Request, given: str | None = None) -> None:
        if not keys:
            return
        auth = request.headers.get("authorization", "")
        bearer = auth[7:] if auth.lower().startswith("bearer ") else None
        key = given or request.headers.get("x-api-key") or bearer
        if not key:
            raise Problem(401, "an API key is required: send it as 'Authorization: Bearer KEY', "
                               "'X-API-Key: KEY' or the api_key field")
        if key not in keys:
            raise Problem(403, "the API key is not valid")

    async def translate(request: Request, texts: list[str], pair: tuple[str, str], options: dict[str, Any],
                        attention: bool = False) -> list[Translation]:
        if not state["ready"]:
            raise Problem(503, "the server is warming up its models", {"Retry-After": "1"})
        translator = models[pair]
        try:
            search = translator.config(**options)
        except ValueError as e:
            raise Problem(422, str(e)) from None
        if search.beam_size > config.max_beam_size:
            raise Problem(422, f"beam_size={search.beam_size} is more than this server allows "
                               f"({config.max_beam_size})")
        tokens = _check_texts(texts, translator, config)
        _arrived(request, batcher)
        try:
            futures = batcher.submit(texts, tokens, Search(pair, tuple(sorted(options.items())), attention))
        except QueueFull as e:
            raise Problem(503, f"the server is busy: {e}; retry later", {"Retry-After": "1"}) from None
        return await _results(request, futures, config.timeout)

    @app.post("/v1/translate", summary="Translate texts; n-best lists and attention on request")
    async def v1_translate(request: Request, body: TranslateRequest) -> dict[str, Any]:
        check_key(request)
        pair = _pair(models, body.source, body.target)
        texts = [body.text] if isinstance(body.text, str) else body.text
        asked = (("beam_size", body.beam_size), ("nbest", body.nbest),
                 ("length_penalty", body.length_penalty), ("max_output_len", body.max_len))
        options = {k: v for k, v in asked if v is not None}
        if body.nbest is not None and body.beam_size is None:
            options["beam_size"] = _beam_for(models[pair], body.nbest)
        if body.attention and models[pair].model is None:
            raise Problem(400, "attention weights come from PyTorch models; this one runs on CTranslate2")
        results = await translate(request, texts, pair, options, body.attention)
        out = []
        for text, t in zip(texts, results, strict=True):
            item = _translation_json(t)
            if body.attention:
                item["attention"] = _attention_json(t.attention) if text.strip() else None
            out.append(item)
        return {"source": pair[0], "target": pair[1], "translations": out}

    lt_schema = {"schema": LibreTranslateRequest.model_json_schema()}

    @app.post("/translate", summary="LibreTranslate's translate: q (a text or a list), source, target",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": lt_schema, "application/x-www-form-urlencoded": lt_schema}}})
    async def libretranslate(request: Request) -> dict[str, Any]:
        body = await _libretranslate_body(request)
        check_key(request, body.api_key)
        if body.format != "text":
            raise Problem(400, f"{body.format} format is not supported (only text)")
        pair = _pair(models, body.source, body.target)
        texts = [body.q] if isinstance(body.q, str) else body.q
        options: dict[str, Any] = {}
        if body.alternatives:
            nbest = body.alternatives + 1
            options = {"beam_size": _beam_for(models[pair], nbest), "nbest": nbest}
        results = await translate(request, texts, pair, options)
        answer: dict[str, Any] = {"translatedText": [t.text for t in results]}
        if body.alternatives:
            answer["alternatives"] = [[a.text for a in t.alternatives] for t in results]
        if isinstance(body.q, str):
            answer = {k: v[0] for k, v in answer.items()}
        return answer

    @app.get("/languages", summary="LibreTranslate's languages: each source and its targets")
    async def languages() -> list[dict[str, Any]]:
        sources = sorted({s for s, _ in models})
        return [{"code": s, "name": LANGUAGE_NAMES.get(s, s),
                 "targets": sorted(t for x, t in models if x == s)} for s in sources]

    @app.get("/v1/models", summary="The models served: language pair, search defaults, how they compute")
    async def list_models() -> dict[str, Any]:
        return {"api_key_required": bool(keys), "max_beam_size": config.max_beam_size, "models": [
            {"source": s, "target": t, "description": m.description, "beam_size": m.defaults.beam_size,
             "length_penalty": m.defaults.length_penalty} for (s, t), m in models.items()]}

    @app.get("/health", summary="Alive")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/ready", summary="200 once every model is loaded and warmed up, else 503")
    async def ready() -> JSONResponse:
        if not state["ready"]:
            return JSONResponse({"status": "warming up"}, 503, headers={"Retry-After": "1"})
        return JSONResponse({"status": "ready", "models": [f"{s}->{t}" for s, t in models]})

    @app.get("/metrics", summary="Prometheus metrics")
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    static = resources.files("aiayn.serve") / "static"

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(static / "index.html"))

    app.mount("/static", StaticFiles(directory=str(static)), name="static")
    return app


def _by_pair(translators: Iterable[Translator]) -> dict[tuple[str, str], Translator]:
    models: dict[tuple[str, str], Translator] = {}
    for t in translators:
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


def _pair(models: dict[tuple[str, str], Translator], source: str | None, target: str | None
          ) -> tuple[str, str]:
    """The language pair a request asks for; left out (or source "auto"), the one model that fits."""
    fits = [p for p in models if source in (None, "auto", p[0]) and target in (None, p[1])]
    if len(fits) == 1:
        return fits[0]
    served = ", ".join(f"{s}->{t}" for s, t in models)
    if not fits:
        raise Problem(400, f"no model translates {source or '?'}->{target or '?'}; this server has {served}")
    raise Problem(400, f"several models fit ({served}): give source and target")


def _beam_for(translator: Translator, nbest: int) -> int:
    """The beam of a request that asks for `nbest` hypotheses and no beam: the default, or wider."""
    return max(translator.defaults.beam_size, nbest)


def _check_texts(texts: list[str], translator: Translator, config: ServeConfig) -> list[int]:
    """Each text's count of source tokens, once the request's limits are checked."""
    if len(texts) > config.max_texts:
        raise Problem(400, f"{len(texts)} texts in one request; at most {config.max_texts}")
    tokens = []
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            raise Problem(400, f"text {i}: {len(text):,} characters; at most {config.max_chars:,}")
        n = len(translator.tokenizer.encode([text])[0]) if text.strip() else 0
        if n > config.max_tokens:
            raise Problem(400, f"text {i}: {n:,} tokens; at most {config.max_tokens:,}")
        tokens.append(n)
    return tokens


async def _results(request: Request, futures: list[asyncio.Future], timeout: float) -> list[Translation]:
    """The futures' results; on a timeout or when the client goes away, the sentences still waiting
    are withdrawn (cancelled)."""
    everything = asyncio.gather(*futures)
    gone = asyncio.create_task(_client_gone(request))
    try:
        done, _ = await asyncio.wait({everything, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if everything in done:
        return everything.result()
    everything.cancel()
    if gone in done:
        raise Problem(499, "the client closed the connection")
    raise Problem(504, f"the translation took longer than this server's timeout ({timeout:g} s)")


async def _client_gone(request: Request) -> None:
    """Returns when the client closes the connection: once the body is read, the next message the
    server gets for the request is that one (no polling)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _libretranslate_body(request: Request) -> LibreTranslateRequest:
    """LibreTranslate's parameters from a JSON or form body (q may repeat in a form: a list)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        try:
            data = json.loads(await request.body())
        except json.JSONDecodeError as e:
            raise Problem(422, f"invalid JSON: {e}") from None
        if not isinstance(data, dict):
            raise Problem(422, "the body must be a JSON object")
    else:
        form = await request.form()
        data = {k: form.get(k) for k in form if k != "q"}
        qs = form.getlist("q")
        if qs:
            data["q"] = qs[0] if len(qs) == 1 else qs
        if "alternatives" in data:
            try:
                data["alternatives"] = int(data["alternatives"])
            except ValueError:
                raise Problem(422, "alternatives: must be an integer") from None
    for name in ("q", "source", "target"):
        if data.get(name) is None:
            raise Problem(400, f"Invalid request: missing {name} parameter")
    try:
        return LibreTranslateRequest.model_validate(data)
    except ValidationError as e:
        raise Problem(422, _validation_message(e.errors())) from None


def _validation_message(errors: Iterable[dict[str, Any]]) -> str:
    parts = []
    for e in errors:
        if e.get("type") == "json_invalid":
            return f"invalid JSON at character {e['loc'][-1]}: {e.get('ctx', {}).get('error', e.get('msg'))}"
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
    return "; ".join(parts) or "invalid request"


def _translation_json(t: Translation) -> dict[str, Any]:
    def one(t: Translation) -> dict[str, Any]:
        return {"text": t.text, "score": t.score, "log_prob": t.log_prob}

    return {**one(t), "alternatives": [one(a) for a in t.alternatives]}


def _attention_json(view: AttentionView) -> dict[str, Any]:
    """The encoder-decoder attention of a translation (computed in its search, as `aiayn attention`
    computes it): per layer, per head, (target, source) weights."""
    return {"source": view.source, "target": view.target_out,
            "cross": [[[[round(x, 4) for x in row] for row in head] for head in layer.tolist()]
                      for layer in view.maps["cross"]]}


def _warm_up(translators: Iterable[Translator], config: ServeConfig) -> None:
    """Run each model once, and with a compiled decoder step, compile it for every row count that
    the server's batches (up to the search's batch size) can reach, so no request pays for it."""
    for translator in translators:
        translator.translate(["warm up"])
        if translator.defaults.compile:
            most = translator.defaults.batch_size
            n = 1
            while n <= most:  # sentences of growing lengths, so searches shrink through each row count
                translator.translate([" ".join(["warm"] * (1 + i % 24)) for i in range(n)])
                n *= 2


def _arrived(request: Request, batcher: Batcher) -> None:
    """The request is no longer on its way to the batcher (see `_Limits`)."""
    if request.scope.get("state", {}).pop("aiayn_arriving", False):
        batcher.arriving -= 1


class _Limits:
    """ASGI middleware: the body size limit (413) and UTF-8 check (400) before any endpoint reads a
    body; the request metrics (count by status, latency) of every endpoint; and the count of
    translation requests on their way to the batcher, which it waits for (`Batcher.arriving`)."""

    def __init__(self, app: Any, max_body_bytes: int, metrics: Metrics, batcher: Batcher) -> None:
        self.app, self.max_body_bytes, self.metrics, self.batcher = app, max_body_bytes, metrics, batcher

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), {"code": 500}
        endpoint = scope["path"] if scope["path"] in _ENDPOINTS else "other"
        state = scope.setdefault("state", {})
        if endpoint in ("/v1/translate", "/translate") and scope["method"] == "POST":
            state["aiayn_arriving"] = True
            self.batcher.arriving += 1

        async def send_counting(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            if scope["method"] in ("POST", "PUT", "PATCH"):
                body, problem = await self._read(scope, receive)
                if problem is not None:
                    response = JSONResponse({"error": problem.message}, problem.status)
                    return await response(scope, receive, send_counting)
                receive = _replay(body, receive)
            await self.app(scope, receive, send_counting)
        finally:
            if state.pop("aiayn_arriving", False):  # it ended before reaching the batcher
                self.batcher.arriving -= 1
            self.metrics.requests.labels(endpoint, str(status["code"])).inc()
            self.metrics.latency.labels(endpoint).observe(time.perf_counter() - started)

    async def _read(self, scope: dict, receive: Any) -> tuple[bytes, Problem | None]:
        headers = dict(scope["headers"])
        too_large = Problem(413, f"the request body is larger than this server accepts "
                                 f"({self.max_body_bytes:,} bytes)")
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            return b"", too_large
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                return b"", too_large
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            return body, Problem(400, f"the request body is not valid UTF-8 (byte {e.start:,}: "
                                      f"{body[e.start:e.start + 1]!r})")
        return body, None


_ENDPOINTS = {"/v1/translate", "/translate", "/languages", "/v1/models", "/health", "/ready", "/metrics", "/"}


def _replay(body: bytes, receive: Any) -> Any:
    """A `receive` that gives the body already read, then what the client sends next (a disconnect)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
