"""The web page at `/` and its files under `/static/` (the Explain tab's under `/static/explain/`, the
files of `aiayn explain`'s page): everything from this server, no CDN."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from aiayn.explain.page import STATIC as EXPLAIN_STATIC

STATIC = resources.files("aiayn.serve") / "static"


def router() -> APIRouter:
    api = APIRouter()

    @api.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    api.mount("/static/explain", StaticFiles(directory=str(EXPLAIN_STATIC)), name="explain")  # before /static
    api.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return api
