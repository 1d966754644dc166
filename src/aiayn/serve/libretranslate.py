"""LibreTranslate's API, so its clients need no change: `POST /translate`, `POST /translate_file`
(and `GET /download_file/NAME`), `POST /detect`, `GET /languages`, `GET /frontend/settings` and
`POST /suggest`, each taking a JSON or form body as LibreTranslate does. docs/libretranslate.md
compares them field by field.

Language codes as LibreTranslate gives them: a model's `zh` (simplified Chinese) is `zh-Hans` in
what the API answers, `zt` (traditional) `zh-Hant` and `pb` `pt-BR`; requests may use either form,
in any case, and one variant of Chinese (or Portuguese) stands in for the other when only it is served."""

from __future__ import annotations

import asyncio
import json
import mimetypes
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from aiayn.serve.errors import Problem, validation_message
from aiayn.serve.files import attachment
from aiayn.serve.service import Service, check_counts, confidence, glossary
from aiayn.text import documents
from aiayn.text.detect import LANGUAGE_NAMES

# A model's language code -> LibreTranslate's (libretranslate/language.py), and the variants that stand
# in for one another when only one is served (as LibreTranslate's get_language_with_fallback).
ALIASES = {"zh": "zh-Hans", "zt": "zh-Hant", "pb": "pt-BR"}
_MODEL_CODES = {v.lower(): k for k, v in ALIASES.items()}
VARIANTS = {"zh": "zt", "zt": "zh", "pt": "pb", "pb": "pt"}


def iso(code: str) -> str:
    """The code LibreTranslate's API gives a model's language (zh -> zh-Hans)."""
    return ALIASES.get(code, code)


def model_code(code: str, served: set[str]) -> str:
    """The served language a request's code names (zh-Hans, zh-hans, zh -> zh; zh-Hant -> zt, else zh
    when only that is served); a code not served is returned as the model code, for the error."""
    lang = code.lower()
    lang = _MODEL_CODES.get(lang, lang)
    if lang not in served and VARIANTS.get(lang) in served:
        return VARIANTS[lang]
    return lang


class LibreTranslateRequest(BaseModel):
    """`POST /translate`, as LibreTranslate takes it (JSON or a form)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    q: str | list[str]
    source: str  # a language code, or "auto": detected among the served source languages
    target: str
    format: str = "text"
    alternatives: int = 0  # how many alternatives to return besides the translation
    api_key: str | None = None
    glossary: dict[str, str] | None = None  # aiayn's extension: source term -> target term
    # aiayn's extensions against repetition loops (DecodeConfig; unset: the server's defaults)
    repetition_penalty: float | None = Field(None, gt=0)
    no_repeat_ngram_size: int | None = Field(None, ge=0)
    confidence: bool = False  # aiayn's extension: answer each translation's confidence too


def router(service: Service) -> APIRouter:
    api = APIRouter()
    _text_routes(api, service)
    _file_routes(api, service)
    _info_routes(api, service)
    return api


def _text_routes(api: APIRouter, service: Service) -> None:
    """`POST /translate` and `POST /detect`."""
    schema = {"schema": LibreTranslateRequest.model_json_schema()}

    @api.post("/translate", summary="LibreTranslate's translate: q (a text or a list), source, target",
              openapi_extra={"requestBody": {"required": True, "content": {
                  "application/json": schema, "application/x-www-form-urlencoded": schema}}})
    async def translate(request: Request) -> dict[str, Any]:
        data = await read_body(request, ("q", "source", "target"))
        data["alternatives"] = alternatives(data.get("alternatives", 0), service.config.max_beam_size - 1)
        for name, kind in (("repetition_penalty", float), ("no_repeat_ngram_size", int)):
            data[name] = number(data.get(name), name, kind)
        data["confidence"] = flag(data.get("confidence", False), "confidence")
        body = validated(data)
        service.admit(request, body.api_key)
        if body.format not in ("text", "html"):
            raise Problem(400, f"{body.format} format is not supported")
        texts = [body.q] if isinstance(body.q, str) else body.q
        check_counts(texts, service.config)
        source, target = codes(service, body.source, body.target)
        detected = (await service.detect(texts, target, body.format, limits=False))[0] \
            if source == "auto" else None
        pair = service.pair(detected[0] if detected else source, target)
        options: dict[str, Any] = {"format": body.format}
        options.update((k, v) for k in ("repetition_penalty", "no_repeat_ngram_size")
                       if (v := getattr(body, k)) is not None)
        if body.alternatives:
            nbest = body.alternatives + 1
            options.update(beam_size=service.beam_for(pair, nbest), nbest=nbest)
        results = await service.translate(request, texts, pair, options, glossary=glossary(body.glossary))
        answer: dict[str, Any] = {"translatedText": [t.text for t in results]}
        if detected:
            answer["detectedLanguage"] = [language_json(*detected)] * len(texts)
        if body.alternatives:
            answer["alternatives"] = [unique([a.text for a in t.alternatives], t.text) for t in results]
        if body.confidence:
            answer["confidence"] = [confidence(t) for t in results]
        if isinstance(body.q, str):
            answer = {k: v[0] for k, v in answer.items()}
        return answer

    @api.post("/detect", summary="LibreTranslate's detect: the languages of q, most likely first")
    async def detect(request: Request) -> list[dict[str, Any]]:
        data = await read_body(request, ("q",))
        texts = [data["q"]] if isinstance(data["q"], str) else data["q"]
        key = data.get("api_key")
        if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
            raise Problem(422, "q: must be a text or a list of texts")
        service.admit(request, key if isinstance(key, str) else None)
        return [language_json(code, confidence) for code, confidence in await service.detect(texts)]


def _file_routes(api: APIRouter, service: Service) -> None:
    """`POST /translate_file` and `GET /download_file/NAME`."""

    @api.post("/translate_file", summary="LibreTranslate's translate_file: a .txt, .html, .srt, .docx, "
                                         ".pptx, .odt, .odp, .epub or .pdf file (multipart: file, "
                                         "source, target); -> translatedFileUrl")
    async def translate_file(request: Request) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + service.config.file_timeout  # the whole file's
        form = await request.form()
        upload = uploaded(form)
        key = form.get("api_key")
        service.admit(request, key if isinstance(key, str) else None)
        if service.batcher.bulk_full:  # before reading the file
            raise Problem(503, f"the server is busy: {service.config.max_bulk} files or long requests are "
                               "being translated; retry later", {"Retry-After": "1"})
        name = upload.filename
        try:
            document = await service.prepare(documents.read, await upload.read(), name,
                                             service.config.max_file_bytes)
        except documents.DocumentError as e:
            known = "." + name.rsplit(".", 1)[-1].lower() in documents.KINDS
            raise Problem(400, str(e) if known else "Invalid request: file format not supported") from None
        source, target = codes(service, str(form["source"]), str(form["target"]))
        if source == "auto":
            detected = await service.detect(document.texts or [""], target, document.format, limits=False)
            source = detected[0][0]
        pair = service.pair(source, target)
        translations = await service.translate(request, document.texts, pair, {"format": document.format},
                                                file=name, deadline=deadline)
        data = await service.prepare(lambda: document.write([t.text for t in translations]))
        stored = service.files.add(name, data)
        return {"translatedFileUrl": str(request.url_for("download_file", filename=stored))}

    @api.get("/download_file/{filename}", summary="A file translated by /translate_file, for 10 minutes")
    async def download_file(filename: str) -> Response:
        found = service.files.get(filename)
        if found is None:
            raise Problem(404, f"{filename}: no such file (translated files are kept for "
                               f"{service.files.ttl / 60:g} minutes)")
        name, data = found
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(data, media_type=kind, headers={"Content-Disposition": attachment(name),
                                                        "X-Content-Type-Options": "nosniff"})


def _info_routes(api: APIRouter, service: Service) -> None:
    """`GET /languages`, `GET /frontend/settings` and `POST /suggest`."""

    @api.get("/languages", summary="LibreTranslate's languages: each source and its targets")
    async def languages() -> list[dict[str, Any]]:
        sources = sorted({s for s, _ in service.models})
        return [{"code": iso(s), "name": LANGUAGE_NAMES.get(s, s),
                 "targets": sorted(iso(t) for x, t in service.models if x == s)} for s in sources]

    @api.get("/frontend/settings", summary="LibreTranslate's settings for its web page and clients")
    async def frontend_settings() -> dict[str, Any]:
        source, target = next(iter(service.models))
        several = len({s for s, _ in service.models}) > 1
        return {"charLimit": service.config.max_chars, "frontendTimeout": 500, "apiKeys": bool(service.keys),
                "keyRequired": bool(service.keys), "suggestions": False, "filesTranslation": True,
                "supportedFilesFormat": list(documents.KINDS),
                "language": {"source": {"code": "auto", "name": "Auto Detect"} if several else
                             {"code": iso(source), "name": LANGUAGE_NAMES.get(source, source)},
                             "target": {"code": iso(target), "name": LANGUAGE_NAMES.get(target, target)}}}

    @api.post("/suggest", summary="LibreTranslate's suggestions: off on this server (403)")
    async def suggest() -> None:
        raise Problem(403, "Suggestions are disabled on this server.")


def uploaded(form: Any) -> Any:
    """The uploaded file of a /translate_file form, once its fields are there (400 as
    LibreTranslate words it)."""
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise Problem(400, "Invalid request: missing file parameter")
    for name in ("source", "target"):
        if not form.get(name):
            raise Problem(400, f"Invalid request: missing {name} parameter")
    if not upload.filename:
        raise Problem(400, "Invalid request: empty file")
    return upload


async def read_body(request: Request, required: tuple[str, ...]) -> dict[str, Any]:
    """LibreTranslate's parameters from a JSON or form body (q may repeat in a form: a list); 400 for
    a missing one, as LibreTranslate words it."""
    if request.headers.get("content-type", "").startswith("application/json"):
        data = parse_json(await request.body())
    else:
        form = await request.form()
        data = {k: form.get(k) for k in form if k != "q"}
        qs = form.getlist("q")
        if qs:
            data["q"] = qs[0] if len(qs) == 1 else qs
    for name in required:
        if data.get(name) in (None, "", []):
            raise Problem(400, f"Invalid request: missing {name} parameter")
    return data


def validated(data: dict[str, Any]) -> LibreTranslateRequest:
    try:
        return LibreTranslateRequest.model_validate(data)
    except ValidationError as e:
        raise Problem(422, validation_message(e.errors())) from None


def alternatives(value: Any, most: int) -> int:
    """LibreTranslate's `alternatives`: a number (of any JSON type or a form's text), below 0 taken as
    0, at most `most` (the server's largest beam, less the translation itself)."""
    try:
        n = max(0, int(value))
    except (TypeError, ValueError, OverflowError):
        raise Problem(400, "Invalid request: alternatives parameter is not a number") from None
    if n > most:
        raise Problem(400, f"Invalid request: alternatives parameter must be <= {most}")
    return n


def number(value: Any, name: str, kind: type) -> Any:
    """An extension's number from JSON, or from a form's text (None: not given), for validation."""
    if not isinstance(value, str):
        return float(value) if kind is float and type(value) is int else value
    try:
        return kind(value)
    except ValueError:
        raise Problem(400, f"Invalid request: {name} parameter is not a number") from None


def flag(value: Any, name: str) -> bool:
    """An extension's yes or no: a JSON boolean, or a form's text true/false, 1/0, yes/no."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "false", "0", "no", ""):
        return value.strip().lower() in ("true", "1", "yes")
    raise Problem(400, f"Invalid request: {name} parameter is not true or false")


def unique(texts: list[str], translation: str) -> list[str]:
    """The alternatives LibreTranslate returns: each different text once, not the translation."""
    return [t for i, t in enumerate(texts) if t != translation and t not in texts[:i]]


def language_json(code: str, confidence: float) -> dict[str, Any]:
    """LibreTranslate's language with its confidence (0 to 100)."""
    return {"confidence": round(100 * confidence, 1), "language": iso(code)}


def codes(service: Service, source: str, target: str) -> tuple[str, str]:
    """The served languages a request's source ("auto" kept) and target codes name."""
    sources, targets = {s for s, _ in service.models}, {t for _, t in service.models}
    return ("auto" if source == "auto" else model_code(source, sources)), model_code(target, targets)


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
