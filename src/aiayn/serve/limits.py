"""The server's ASGI middleware: limits on request bodies, and the metrics of every request."""

from __future__ import annotations

import time
from typing import Any

from aiayn.serve.batcher import Batcher
from aiayn.serve.errors import Problem
from aiayn.serve.metrics import Metrics

TRANSLATING = ("/v1/translate", "/translate", "/translate_file")  # they queue sentences for the batcher
ENDPOINTS = {*TRANSLATING, "/detect", "/languages", "/frontend/settings", "/suggest", "/v1/models", "/health",
             "/ready", "/metrics", "/"}


class Limits:
    """ASGI middleware: the body size limit (413) and UTF-8 check (400; not of a multipart form,
    which carries files) before any endpoint reads a body; the request metrics (count by status,
    latency, requests in progress) of every endpoint; and the count of translation requests on
    their way to the batcher, which it waits for (`Batcher.arriving`)."""

    def __init__(self, app: Any, max_body_bytes: int, metrics: Metrics, batcher: Batcher) -> None:
        self.app, self.max_body_bytes, self.metrics, self.batcher = app, max_body_bytes, metrics, batcher

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status = time.perf_counter(), {"code": 500}
        endpoint = scope["path"] if scope["path"] in ENDPOINTS else "other"
        state = scope.setdefault("state", {})
        if endpoint in TRANSLATING and scope["method"] == "POST":
            state["aiayn_arriving"] = True
            self.batcher.arriving += 1
        in_progress = self.metrics.in_progress.labels(endpoint)
        in_progress.inc()

        async def send_counting(message: dict) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            if scope["method"] in ("POST", "PUT", "PATCH"):
                body, problem = await self._read(scope, receive)
                if problem is not None:
                    return await problem.response()(scope, receive, send_counting)
                receive = replay(body, receive)
            await self.app(scope, receive, send_counting)
        finally:
            if state.pop("aiayn_arriving", False):  # it ended before reaching the batcher
                self.batcher.arriving -= 1
            in_progress.dec()
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
        if headers.get(b"content-type", b"").startswith(b"multipart/form-data"):
            return body, None
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            return body, Problem(400, f"the request body is not valid UTF-8 (byte {e.start:,}: "
                                      f"{body[e.start:e.start + 1]!r})")
        return body, None


def replay(body: bytes, receive: Any) -> Any:
    """A `receive` that gives the body already read, then what the client sends next (a disconnect)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
