"""aiayn's own API: `POST /v1/translate` (n-best lists, scores, attention), `POST /v1/explain` (one
sentence's whole computation, for the page's Explain tab) and `GET /v1/models`."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from aiayn.serve.errors import Problem
from aiayn.serve.service import Service, at_most, check_counts, confidence, glossary
from aiayn.translation import AttentionView, Translation


class TranslateRequest(BaseModel):
    """`POST /v1/translate`. Unset search options take the server's defaults."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: str | list[str] = Field(description="a text, or a list of texts, each translated on its own")
    source: str | None = Field(None, description="source language; auto: detect it among the served ones; "
                                                 "may be left out when one model fits")
    target: str | None = Field(None, description="target language; may be left out when one model serves")
    beam_size: int | None = Field(None, ge=1, description="beam width; 1 is greedy search")
    nbest: int | None = Field(None, ge=1, description="hypotheses per text, best first (at most beam_size)")
    length_penalty: float | None = Field(None, ge=0, description="length penalty alpha")
    max_len: int | None = Field(None, ge=1, description="output at most this many tokens")
    repetition_penalty: float | None = Field(
        None, gt=0, description="divide the score of every token a translation already holds by this "
                                "(multiply where negative): above 1, repetitions are less likely; 1: off")
    no_repeat_ngram_size: int | None = Field(
        None, ge=0, description="no sequence of this many tokens twice in a translation; 0: off")
    attention: bool = Field(False, description="return the encoder-decoder attention of each translation")
    split: bool | None = Field(None, description="cut each text into its sentences and translate those (the "
                                                 "server's default: yes); false: each text is one sentence")
    format: Literal["text", "html"] = Field("text", description="html: only the text of each HTML text is "
                                                                "translated, its markup kept")
    glossary: dict[str, str] | None = Field(
        None, description="source term -> target term: wherever a term occurs in a sentence (whole words, "
                          "this case), its translation has the target term (constrained beam search)")


class ExplainRequest(BaseModel):
    """`POST /v1/explain`. Unset search options take the server's defaults."""

    model_config = ConfigDict(extra="forbid", strict=True)
    text: str = Field(description="one sentence (it is not split)")
    source: str | None = Field(None, description="source language; may be left out when one model fits")
    target: str | None = Field(None, description="target language; may be left out when one model serves")
    beam_size: int | None = Field(None, ge=1, description="beam width; 1 is greedy search")
    length_penalty: float | None = Field(None, ge=0, description="length penalty alpha")


def router(service: Service) -> APIRouter:
    api = APIRouter()

    @api.post("/v1/translate", summary="Translate texts; n-best lists and attention on request")
    async def translate(request: Request, body: TranslateRequest) -> Any:
        service.admit(request)
        texts = [body.text] if isinstance(body.text, str) else body.text
        check_counts(texts, service.config)
        source = body.source
        if source == "auto":
            source = (await service.detect(texts, body.target, body.format, limits=False))[0][0]
        pair = service.pair(source, body.target)
        options = _search_options(body, service, pair)
        if body.attention and service.models[pair].model is None:
            raise Problem(400, "attention weights come from PyTorch models; this one runs on CTranslate2")
        results = await service.translate(request, texts, pair, options, body.attention,
                                          glossary=glossary(body.glossary))

        def answer() -> dict[str, Any]:
            return {"source": pair[0], "target": pair[1],
                    "translations": [translation_json(t, body.attention) for t in results]}

        return await service.json_answer(answer) if body.attention else answer()

    @api.post("/v1/explain", summary="One sentence's translation, step by step: the explain page's data")
    async def explain(request: Request, body: ExplainRequest) -> Any:
        service.admit(request)
        pair = service.pair(body.source, body.target)
        options = {k: v for k, v in (("beam_size", body.beam_size), ("length_penalty", body.length_penalty))
                   if v is not None}
        if "beam_size" in options:
            at_most("beam_size", options["beam_size"], service.config.max_beam_size)
        return await service.explain(request, body.text, pair, options)

    @api.get("/v1/models", summary="The models served: language pair, search defaults, how they compute")
    async def models() -> dict[str, Any]:
        return {"api_key_required": bool(service.keys), "max_beam_size": service.config.max_beam_size,
                "models": [{"source": s, "target": t, "description": m.description,
                            "beam_size": m.defaults.beam_size, "length_penalty": m.defaults.length_penalty}
                           for (s, t), m in service.models.items()]}

    return api


def _search_options(body: TranslateRequest, service: Service, pair: tuple[str, str]) -> dict[str, Any]:
    """The search settings a request asks for, within the server's limits (a 422 naming the field
    beyond them); an n-best list without a beam size gets a beam wide enough for it."""
    asked = (("beam_size", body.beam_size), ("nbest", body.nbest),
             ("length_penalty", body.length_penalty), ("max_output_len", body.max_len),
             ("repetition_penalty", body.repetition_penalty),
             ("no_repeat_ngram_size", body.no_repeat_ngram_size),
             ("split", body.split), ("format", body.format))
    options = {k: v for k, v in asked if v is not None}
    for field in ("beam_size", "nbest"):
        if field in options:
            at_most(field, options[field], service.config.max_beam_size)
    if body.max_len is not None:
        at_most("max_len", body.max_len, service.config.max_output_tokens)
    if body.nbest is not None and body.beam_size is None:
        options["beam_size"] = service.beam_for(pair, body.nbest)
    return options


def translation_json(t: Translation, attention: bool = False) -> dict[str, Any]:
    """A text's translation: text, score, log-probability, confidence (log-probability per token; null
    where the engine does not say) and alternatives; with `attention`, its
    attention (None for a text without words); a text of several sentences also lists each one's
    (with its own attention: the text's is then None)."""
    def one(t: Translation) -> dict[str, Any]:
        return {"text": t.text, "score": t.score, "log_prob": t.log_prob,
                "confidence": confidence(t)}

    item = {**one(t), "alternatives": [one(a) for a in t.alternatives]}
    if attention:
        item["attention"] = attention_json(t.attention) if t.attention is not None else None
    if t.sentences:
        item["sentences"] = [translation_json(s, attention) for s in t.sentences]
    return item


def attention_json(view: AttentionView) -> dict[str, Any]:
    """The encoder-decoder attention of a translation (computed in its search, as `aiayn attention`
    computes it): per layer, per head, (target, source) weights."""
    return {"source": view.source, "target": view.target_out,
            "cross": [[[[round(x, 4) for x in row] for row in head] for head in layer.tolist()]
                      for layer in view.maps["cross"]]}
