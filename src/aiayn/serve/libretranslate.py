"""LibreTranslate's API, so its clients need no change: `POST /translate` (a JSON or form body)
and `GET /languages`."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aiayn.serve.errors import Problem, validation_message
from aiayn.serve.service import Service, at_most

LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "es": "Spanish",
                  "it": "Italian", "nl": "Dutch", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian",
                  "zh": "Chinese", "ja": "Japanese", "ko": "Korean", "ar": "Arabic", "tr": "Turkish"}


class LibreTranslateRequest(BaseModel):
    """`POST /translate`, as LibreTranslate takes it (JSON or a form)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    q: str | list[str]
    source: str
    target: str
    format: str = "text"
    alternatives: int = Field(0, ge=0)
    api_key: str | None = None


def router(service: Service) -> APIRouter:
    api = APIRouter()
    schema = {"schema": LibreTranslateRequest.model_json_schema()}

    @api.post("/translate", summary="LibreTranslate's translate: q (a text or a list), source, target",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": schema, "application/x-www-form-urlencoded": schema}}})
    async def translate(request: Request) -> dict[str, Any]:
        body = await read_body(request)
        service.check_key(request, body.api_key)
        if body.format != "text":
            raise Problem(400, f"{body.format} format is not supported (only text)")
        pair = service.pair(body.source, body.target)
        texts = [body.q] if isinstance(body.q, str) else body.q
        options: dict[str, Any] = {}
        if body.alternatives:
            at_most("alternatives", body.alternatives, service.config.max_beam_size - 1)
            nbest = body.alternatives + 1
            options = {"beam_size": service.beam_for(pair, nbest), "nbest": nbest}
        results = await service.translate(request, texts, pair, options)
        answer: dict[str, Any] = {"translatedText": [t.text for t in results]}
        if body.alternatives:
            answer["alternatives"] = [[a.text for a in t.alternatives] for t in results]
        if isinstance(body.q, str):
            answer = {k: v[0] for k, v in answer.items()}
        return answer

    @api.get("/languages", summary="LibreTranslate's languages: each source and its targets")
    async def languages() -> list[dict[str, Any]]:
        sources = sorted({s for s, _ in service.models})
        return [{"code": s, "name": LANGUAGE_NAMES.get(s, s),
                 "targets": sorted(t for x, t in service.models if x == s)} for s in sources]

    return api


async def read_body(request: Request) -> LibreTranslateRequest:
    """LibreTranslate's parameters from a JSON or form body (q may repeat in a form: a list)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        data = parse_json(await request.body())
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
        raise Problem(422, validation_message(e.errors())) from None


def parse_json(body: bytes) -> dict[str, Any]:
    """A JSON object, or a 422 that says what is wrong with it."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError as e:
        raise Problem(422, f"invalid JSON: {e}") from None
    except RecursionError:
        raise Problem(422, "invalid JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise Problem(422, "the body must be a JSON object")
    return data
