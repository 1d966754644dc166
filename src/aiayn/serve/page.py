"""The web page at `/` and its files under `/static/`: everything from this server, no CDN."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = resources.files("aiayn.serve") / "static"


def router() -> APIRouter:
    api = APIRouter()

    @api.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"))

    api.mount("/static", StaticFiles(directory=str(STATIC)), name="static")
    return api
