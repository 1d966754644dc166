"""`aiayn serve`: serve models over HTTP, batching sentences across requests."""

from __future__ import annotations

import argparse
import os
from concurrent.futures import ThreadPoolExecutor

import torch

from aiayn import config as cfg
from aiayn.cli.options import add_config_options, add_inference_options, given

API_KEYS_VARIABLE = "AIAYN_API_KEYS"


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="serve models over HTTP",
        description="Serve one or more models over HTTP (each known by its language pair): "
                    "POST /v1/translate (aiayn's API: n-best lists, attention), POST /translate and "
                    "GET /languages (LibreTranslate's API), GET /health, /ready, /metrics (Prometheus), "
                    "/docs (OpenAPI) and a web page at /. Sentences of concurrent requests are searched "
                    "together. SIGTERM or Ctrl-C finishes the requests in flight, then exits. Needs the "
                    "serve extra: pip install -e \".[serve]\"")
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="checkpoint, run directory, Marian directory or CTranslate2 export; one per "
                        "language pair")
    p.add_argument("--api-key", action="append", default=[], metavar="KEY",
                   help=f"accept requests with this key only (repeatable; also the environment variable "
                        f"{API_KEYS_VARIABLE}, keys separated by commas); default: no key needed")
    add_config_options(p, cfg.ServeConfig, "service")
    add_inference_options(p, exclude=("batch_size", "batch_by", "seed", "temperature", "top_k",
                                       "alternatives"))


def run(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from aiayn.serve.app import create_app
    except ImportError as e:
        raise ImportError(f"aiayn serve needs the serve extra ({e.name} is missing): "
                          "pip install -e \".[serve]\"") from None
    from aiayn.devices import resolve_device
    from aiayn.serve.searching import searchers, workers_for
    from aiayn.translation import load_translator

    config = cfg.build(cfg.ServeConfig, given(args, cfg.ServeConfig), "command line")
    keys = list(args.api_key) + [k for k in os.environ.get(API_KEYS_VARIABLE, "").split(",") if k.strip()]
    options = given(args, cfg.DecodeConfig)
    compile_ = options.pop("compile", None)
    threads = args.threads or torch.get_num_threads()
    device = resolve_device(args.device).type

    def load(workers: int) -> tuple[ThreadPoolExecutor, list]:
        """The models, loaded on the threads that will search with them (`searchers`)."""
        searcher = searchers(workers, max(1, threads // workers))
        return searcher, [searcher.submit(
            load_translator, path, engine=args.engine, device=args.device, dtype=args.dtype, int8=args.int8,
            ema=args.ema,
            compile=compile_, compute_type=args.compute_type, **options).result() for path in args.models]

    workers = workers_for(config, device, threads, compiled=bool(compile_))
    searcher, translators = load(workers)
    if workers > 1 and any(t.defaults.compile for t in translators) and not config.workers:
        searcher.shutdown()  # compiled before (the cache said so): one search on every thread instead
        workers = workers_for(config, device, threads, compiled=True)
        searcher, translators = load(workers)
    for path, t in zip(args.models, translators, strict=True):
        pairs = ", ".join(t.pairs) if t.pairs else f"{t.src_lang}->{t.tgt_lang}"
        print(f"loaded {path}: {pairs}, {t.description}", flush=True)
    try:
        app = create_app(translators, config, [k.strip() for k in keys], searcher)
    except ValueError as e:
        raise cfg.ConfigError(str(e)) from None
    print(f"serving on http://{config.host}:{config.port} (page /, API docs /docs), {workers} search"
          f"{'es' if workers > 1 else ''} at once on {max(1, threads // workers)} of {threads} CPU threads "
          "each; /ready answers once the models are warmed up", flush=True)
    uvicorn.run(app, host=config.host, port=config.port, timeout_graceful_shutdown=config.drain_timeout,
                log_level="warning")
    return 0
