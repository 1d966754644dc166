"""For operators: `GET /health` (alive), `/ready` (warmed up) and `/metrics` (Prometheus)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from aiayn.serve.service import Service


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.get("/health", summary="Alive")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @api.get("/ready", summary="200 once every model is loaded and warmed up, else 503")
    async def ready() -> JSONResponse:
        if not service.ready:
            return JSONResponse({"status": "warming up"}, 503, headers={"Retry-After": "1"})
        return JSONResponse({"status": "ready", "models": [f"{s}->{t}" for s, t in service.models]})

    @api.get("/metrics", summary="Prometheus metrics")
    async def metrics() -> Response:
        return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return api
