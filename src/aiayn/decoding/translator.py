"""From lines of text to translations: tokenise, batch by length, search, detokenise.

Sentences are sorted by length and cut into batches (of sentences or of source tokens), so
little padding is computed; results come back in input order. An empty line translates to an
empty line without running the model. The search for each sentence does not depend on which
others share its batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm import tqdm

from aiayn.config import ConfigError, DecodeConfig
from aiayn.data.batching import pad
from aiayn.decoding import packages, whole
from aiayn.decoding.beam import beam_search
from aiayn.decoding.cache import verdict
from aiayn.decoding.cache.alongside import alongside
from aiayn.decoding.compiled import CompiledStep
from aiayn.decoding.constrained import Constraints, Steer
from aiayn.decoding.greedy import greedy_search
from aiayn.decoding.repetition import Repetition
from aiayn.decoding.steps import Hypothesis, Step, output_limits
from aiayn.decoding.tracing import gate
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer


@dataclass
class Translation:
    text: str
    score: float  # what the search ranked by (see Hypothesis)
    log_prob: float
    tokens: list[int]
    alternatives: list[Translation] = field(default_factory=list)  # the next best, with nbest > 1
    attention: Any = None  # its attention weights (translation.AttentionView), when asked for
    # A text of several sentences: each sentence's own translation (with its alternatives and
    # attention); the fields above are then the whole text's (translation.Translator.translate).
    sentences: list[Translation] = field(default_factory=list)
    # How sure the model is of it: its log-probability per token, the end of sentence included (0:
    # certain; a text of several sentences: over all their tokens). None: nothing was searched (an
    # empty text), or the engine does not say (CTranslate2).
    confidence: float | None = None

    @staticmethod
    def pooled(parts: Sequence[Translation]) -> float | None:
        """The confidence of `parts` taken together: their log-probabilities over their tokens."""
        known = [p for p in parts if p.confidence is not None]
        if not known or len(known) < len([p for p in parts if p.tokens]):
            return None
        return sum(p.log_prob for p in known) / sum(len(p.tokens) + 1 for p in known)


def found(tokenizer: Tokenizer, hyp: Hypothesis) -> Translation:
    """A search's hypothesis as a Translation."""
    return Translation(tokenizer.decode(hyp.tokens), hyp.score, hyp.log_prob, hyp.tokens,
                       confidence=hyp.log_prob / (len(hyp.tokens) + 1))



def whole_text(sentences: list[Translation], join: Callable[[list[Translation]], str]) -> Translation:
    """A text's Translation from its sentences' (see translation.Translator); `join` puts a
    translation of each sentence into the text."""
    if not sentences:
        return Translation(join([]), 0.0, 0.0, [])
    ranked = [[s, *s.alternatives] for s in sentences]

    def kth(k: int) -> Translation:
        hyps = [r[min(k, len(r) - 1)] for r in ranked]
        return Translation(join(hyps), sum(h.score for h in hyps), sum(h.log_prob for h in hyps),
                           [t for h in hyps for t in h.tokens], confidence=Translation.pooled(hyps))

    best = kth(0)
    best.alternatives = [kth(k) for k in range(1, max(len(r) for r in ranked))]
    if len(sentences) > 1:
        best.sentences = sentences
    else:
        best.attention = sentences[0].attention
    return best

def search(model: Transformer, src: torch.Tensor, config: DecodeConfig,
           generator: torch.Generator | None = None, steers: Sequence[Steer] | None = None
           ) -> list[list[Hypothesis]]:
    """The one place that picks the search: sampling, greedy (beam 1) or beam search; `steers`: what
    each sentence's translation must hold (phrases: a search, of beam 1 or more; a prefix: any).
    Compiled, a lone sentence's beam search is one graph (`whole`), other searches run on compiled
    steps; eagerly if a step is not compiled yet and this thread does not wait for it
    (`packages.wait_for_compiles`)."""
    limits = output_limits(model, src, config.max_output_extra, config.max_output_len)
    constraints = prefix = None
    if steers is not None and any(s.phrases or s.prefix for s in steers):
        if config.temperature == 0:  # beam search steers, with a beam of 1 too
            constraints = Constraints(steers, src.device)
        elif any(s.phrases for s in steers):
            raise ConfigError("constraints (a glossary) need a search: leave --temperature out")
        else:  # sampling goes on from each prefix
            prefix = pad([list(s.prefix) for s in steers], -1).to(src.device)  # (B, P)
        prefixes = torch.tensor([len(s.prefix) for s in steers], device=limits.device)
        limits = torch.maximum(limits, prefixes + 1)  # room for the prefix and a token after it
    if config.compile and not verdict.known_unloadable(src.device):
        drawn = generator.get_state() if generator is not None else None
        try:
            plain = constraints is None and config.temperature == 0 and config.repetition_penalty == 1
            if plain and whole.takes(model, src, config.beam_size, limits):
                found = whole.search(model, src, int(limits[0]), config.beam_size, config.nbest,
                                     config.length_penalty, config.penalty_form,
                                     config.start_token(model.config.bos_id), config.no_repeat_ngram_size)
                if found is not None:
                    return found
            return _search(model, src, limits, config, generator, CompiledStep(model), constraints, prefix)
        except (verdict.Unloadable, packages.NotCompiledYet):  # at a compiled step: this batch again, eagerly
            if drawn is not None:
                generator.set_state(drawn)
    with alongside.cores_left():  # eagerly, beside the processes compiling meanwhile, if any
        return _search(model, src, limits, config, generator, Step(model), constraints, prefix)


def _search(model: Transformer, src: torch.Tensor, limits: torch.Tensor, config: DecodeConfig,
            generator: torch.Generator | None, step: Step, constraints: Constraints | None,
            prefix: torch.Tensor | None) -> list[list[Hypothesis]]:
    start = config.start_token(model.config.bos_id)
    if config.temperature > 0 or (config.beam_size == 1 and constraints is None):
        hyps = greedy_search(model, src, limits, config.temperature, config.top_k, generator, step, start,
                             repetition(config), prefix)
        return [[h] for h in hyps]
    return beam_search(model, src, config.beam_size, config.nbest, config.length_penalty,
                       config.penalty_form, limits, step, start=start, constraints=constraints,
                       repetition=repetition(config))


def repetition(config: DecodeConfig) -> Repetition:
    """The rules against repetition loops that `config` asks for."""
    return Repetition(config.repetition_penalty, config.no_repeat_ngram_size)


def batches(lengths: list[int], config: DecodeConfig) -> list[list[int]]:
    """Indices of the non-empty sentences, shortest first, cut by sentences or padded source tokens."""
    order = sorted((i for i, n in enumerate(lengths) if n), key=lambda i: lengths[i])
    if config.batch_by == "sentences":
        return [order[i:i + config.batch_size] for i in range(0, len(order), config.batch_size)]
    cut: list[list[int]] = []
    for i in order:  # lengths grow along `order`, so the newest sentence is the batch's longest
        if cut and (len(cut[-1]) + 1) * (lengths[i] + 1) <= config.batch_size:
            cut[-1].append(i)
        else:
            cut.append([i])
    return cut


def translate(model: Transformer, tokenizer: Tokenizer, lines: list[str], config: DecodeConfig,
              progress: bool = True) -> list[list[Translation]]:
    """The n-best translations of every line, best first, in input order."""
    return translate_ids(model, tokenizer, tokenizer.encode(lines), config, progress)


@torch.no_grad()
def translate_ids(model: Transformer, tokenizer: Tokenizer, ids: list[list[int]], config: DecodeConfig,
                  progress: bool = True, steers: Sequence[Steer] | None = None) -> list[list[Translation]]:
    """The same, for sentences already tokenised (without eos); `steers`: what each sentence's
    translation must hold (constrained.py)."""
    if steers is not None and len(steers) != len(ids):
        raise ValueError(f"steers for {len(steers)} sentences, but {len(ids)} sentences")
    was_training = model.training
    if was_training:  # to eval and back walks all the modules twice: half a millisecond a call
        model.eval()
    try:
        return _translate_ids(model, tokenizer, ids, config, progress, steers)
    finally:
        if was_training:
            model.train()


def _translate_ids(model: Transformer, tokenizer: Tokenizer, ids: list[list[int]], config: DecodeConfig,
                   progress: bool, steers: Sequence[Steer] | None) -> list[list[Translation]]:
    if config.alternatives:
        return _alternatives(model, tokenizer, ids, config, progress, steers)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(config.seed)
    results: list[list[Translation]] = [[Translation("", 0.0, 0.0, [])] for _ in ids]
    with tqdm(total=sum(1 for s in ids if s), desc="translating", unit="sent", leave=False,
              disable=not progress or len(ids) < 100) as bar:
        for batch in batches([len(s) for s in ids], config):
            src = pad([ids[i] + [tokenizer.eos_id] for i in batch], tokenizer.pad_id).to(device)
            steered = None if steers is None else [steers[i] for i in batch]
            for i, hyps in zip(batch, search(model, src, config, generator, steered), strict=True):
                results[i] = [found(tokenizer, h) for h in hyps]
            bar.update(len(batch))
    return results


def _alternatives(model: Transformer, tokenizer: Tokenizer, ids: list[list[int]], config: DecodeConfig,
                  progress: bool, steers: Sequence[Steer] | None) -> list[list[Translation]]:
    """config.alternatives = N: for each sentence, the N most likely tokens after its prefix (none:
    at the first position), each the start of a translation that the search completes; the N
    translations, best first (as CTranslate2's `return_alternatives`)."""
    n, c, device = config.alternatives, model.config, next(model.parameters()).device
    steers = list(steers) if steers is not None else [Steer() for _ in ids]
    start = config.start_token(c.bos_id)
    firsts: list[list[int]] = [[] for _ in ids]
    for batch in batches([len(s) for s in ids], config):  # the prefixes teacher-forced, once
        src = pad([ids[i] + [tokenizer.eos_id] for i in batch], tokenizer.pad_id).to(device)
        tgt = pad([[start, *steers[i].prefix] for i in batch], tokenizer.pad_id).to(device)
        last = torch.tensor([len(steers[i].prefix) for i in batch], device=device)
        with gate.running():
            scores = model(src, tgt)[torch.arange(len(batch), device=device), last].float()  # (B, V)
        scores[:, [c.pad_id, c.bos_id, c.eos_id]] = float("-inf")
        for i, best in zip(batch, scores.topk(min(n, scores.size(1)), dim=1).indices.tolist(), strict=True):
            firsts[i] = best
    branches = [(i, token) for i, s in enumerate(ids) if s for token in firsts[i]]
    single = dataclasses.replace(config, alternatives=0, nbest=1)
    begun = [dataclasses.replace(steers[i], prefix=(*steers[i].prefix, t)) for i, t in branches]
    found = _translate_ids(model, tokenizer, [ids[i] for i, _ in branches], single, progress, begun)
    results: list[list[Translation]] = [[Translation("", 0.0, 0.0, [])] for _ in ids]
    for i in {i for i, _ in branches}:
        results[i] = []
    for (i, _), (translation,) in zip(branches, found, strict=True):
        results[i].append(translation)
    return [sorted(r, key=lambda t: t.score, reverse=True) for r in results]
