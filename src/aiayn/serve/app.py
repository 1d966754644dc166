"""The HTTP service: aiayn's JSON API, LibreTranslate's, health, readiness, metrics and a web page.

`create_app` puts the parts together, one module each: `v1` (aiayn's API), `libretranslate`
(LibreTranslate's), `operations` (health, readiness, metrics) and `page` (the web page), sharing
one `service.Service` (models, limits, batcher), behind the `limits.Limits` middleware.

Every error answers JSON `{"error": MESSAGE}` with its status code, and the server goes on:
400 for input it cannot translate (invalid UTF-8, a text too long, too many texts, an unknown
language pair), 401/403 for a missing/wrong API key, 413 for a body too large, 422 for invalid
JSON or wrong types, 503 with Retry-After while warming up or when the queue is full, 504 when a
request runs past its timeout (its sentences still waiting leave the queue). A client that goes
away has its waiting sentences withdrawn too.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from aiayn import __version__
from aiayn.config import ServeConfig
from aiayn.serve import libretranslate, operations, page, v1
from aiayn.serve.errors import install_handlers
from aiayn.serve.limits import Limits
from aiayn.serve.service import Service
from aiayn.translation import Translator


def create_app(translators: Iterable[Translator], config: ServeConfig | None = None,
               api_keys: Iterable[str] = (), searcher: ThreadPoolExecutor | None = None) -> FastAPI:
    """The service for `translators` (one per language pair). Started (its lifespan), it warms each
    model up in its search thread (`searcher`: the one they were loaded on, `service.search_thread`);
    `/ready` answers 200 once they all are."""
    service = Service(translators, config or ServeConfig(), api_keys, searcher)
    app = FastAPI(title="aiayn", version=__version__, lifespan=lambda app: service.running(),
                  description="Neural machine translation with the Transformer of 'Attention Is All "
                              "You Need': aiayn's own API (/v1/translate) and LibreTranslate's (/translate).")
    app.add_middleware(Limits, max_body_bytes=service.config.max_body_bytes, metrics=service.metrics,
                       batcher=service.batcher)
    # Pages of other origins may call the API, as LibreTranslate allows (its web clients need it).
    app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["GET", "POST"],
                       allow_headers=["Authorization", "Content-Type", "X-API-Key"])
    install_handlers(app)
    for api in (v1.router(service), libretranslate.router(service), operations.router(service),
                page.router()):
        app.include_router(api)
    return app
