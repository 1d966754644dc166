"""From lines of text to translations: tokenise, batch by length, search, detokenise.

Sentences are sorted by length and cut into batches (of sentences or of source tokens), so
little padding is computed; results come back in input order. An empty line translates to an
empty line without running the model. The search for each sentence does not depend on which
others share its batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from tqdm import tqdm

from aiayn.config import DecodeConfig
from aiayn.data.batching import pad
from aiayn.decoding import packages
from aiayn.decoding.beam import beam_search
from aiayn.decoding.compiled import CompiledStep
from aiayn.decoding.greedy import greedy_search
from aiayn.decoding.steps import Hypothesis, Step, output_limits
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


def search(model: Transformer, src: torch.Tensor, config: DecodeConfig,
           generator: torch.Generator | None = None) -> list[list[Hypothesis]]:
    """The one place that picks the search: sampling, greedy (beam 1) or beam search."""
    limits = output_limits(model, src, config.max_output_extra, config.max_output_len)
    if config.compile and not packages.known_unloadable(src.device):
        drawn = generator.get_state() if generator is not None else None
        try:
            return _search(model, src, limits, config, generator, CompiledStep(model))
        except packages.Unloadable:  # found out at its first compiled step: this batch again, eagerly
            if drawn is not None:
                generator.set_state(drawn)
    return _search(model, src, limits, config, generator, Step(model))


def _search(model: Transformer, src: torch.Tensor, limits: torch.Tensor, config: DecodeConfig,
            generator: torch.Generator | None, step: Step) -> list[list[Hypothesis]]:
    if config.temperature > 0 or config.beam_size == 1:
        hyps = greedy_search(model, src, limits, config.temperature, config.top_k, generator, step)
        return [[h] for h in hyps]
    return beam_search(model, src, config.beam_size, config.nbest, config.length_penalty,
                       config.penalty_form, limits, step)


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
                  progress: bool = True) -> list[list[Translation]]:
    """The same, for sentences already tokenised (without eos)."""
    was_training = model.training
    if was_training:  # to eval and back walks all the modules twice: half a millisecond a call
        model.eval()
    try:
        return _translate_ids(model, tokenizer, ids, config, progress)
    finally:
        if was_training:
            model.train()


def _translate_ids(model: Transformer, tokenizer: Tokenizer, ids: list[list[int]], config: DecodeConfig,
                   progress: bool) -> list[list[Translation]]:
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(config.seed)
    results: list[list[Translation]] = [[Translation("", 0.0, 0.0, [])] for _ in ids]
    with tqdm(total=sum(1 for s in ids if s), desc="translating", unit="sent", leave=False,
              disable=not progress or len(ids) < 100) as bar:
        for batch in batches([len(s) for s in ids], config):
            src = pad([ids[i] + [tokenizer.eos_id] for i in batch], tokenizer.pad_id).to(device)
            for i, hyps in zip(batch, search(model, src, config, generator), strict=True):
                results[i] = [Translation(tokenizer.decode(h.tokens), h.score, h.log_prob, h.tokens)
                              for h in hyps]
            bar.update(len(batch))
    return results


