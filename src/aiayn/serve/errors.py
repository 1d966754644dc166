"""Error answers: every error the server gives is JSON `{"error": MESSAGE}` with its status code."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException


class Problem(Exception):
    """An answer with an error status: `{"error": message}`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers

    def response(self) -> JSONResponse:
        return JSONResponse({"error": self.message}, self.status, headers=self.headers)


def install_handlers(app: FastAPI) -> None:
    """Answer our own problems, FastAPI's validation errors, Starlette's HTTP errors (404, 405) and
    anything unexpected (500) as JSON."""

    @app.exception_handler(Problem)
    async def problem(request: Request, e: Problem) -> JSONResponse:
        return e.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": validation_message(e.errors())}, 422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return JSONResponse({"error": str(e.detail)}, e.status_code, headers=e.headers)

    @app.exception_handler(Exception)
    async def bug(request: Request, e: Exception) -> JSONResponse:
        return JSONResponse({"error": f"internal error ({type(e).__name__}): the server's log has the "
                                      "traceback"}, 500)


def validation_message(errors: Iterable[dict[str, Any]]) -> str:
    """Pydantic's errors as one line: `field: message; field: message`."""
    parts = []
    for e in errors:
        if e.get("type") == "json_invalid":
            return f"invalid JSON at character {e['loc'][-1]}: {e.get('ctx', {}).get('error', e.get('msg'))}"
        where = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{where}: {e.get('msg')}" if where else str(e.get("msg")))
    return "; ".join(parts) or "invalid request"
