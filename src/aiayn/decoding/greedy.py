"""Greedy decoding, and sampling, over a whole batch: one cached decoder step per output token.

Shapes: B sentences, S source length, V vocabulary, L output length.
"""

from __future__ import annotations

import torch
from torch import Tensor

from aiayn.decoding.repetition import OFF, Repetition
from aiayn.decoding.steps import Hypothesis, Step, max_output_lengths, output_tokens
from aiayn.model import Transformer


@torch.inference_mode()
def greedy_search(model: Transformer, src: Tensor, max_lengths: Tensor | None = None,
                  temperature: float = 0.0, top_k: int = 0, generator: torch.Generator | None = None,
                  step: Step | None = None, start: int | None = None,
                  repetition: Repetition = OFF, prefix: Tensor | None = None) -> list[Hypothesis]:
    """The most probable next token at each step for (B, S) source ids -> one hypothesis each.

    With `temperature` > 0 the next token is sampled instead, from softmax(logits / temperature),
    restricted to the `top_k` most probable tokens when `top_k` > 0.
    A sentence stops at eos or after its maximum length; the loop stops when all have stopped.
    `step`: how the decoder steps run (default: the model's own; `compiled.CompiledStep`).
    `start`: the decoder's first token (default: bos; a multilingual model's target language).
    `repetition`: the rules against repetition loops (repetition.py), applied before choosing.
    `prefix` (B, P): the tokens each output begins with, -1 after a sentence's own (their
    log-probabilities count); the search (or sampling) goes on from there.
    """
    c, step = model.config, step or Step(model)
    max_lengths = max_output_lengths(src, c.pad_id) if max_lengths is None else max_lengths
    n, steps = src.size(0), int(max_lengths.max())
    src, max_lengths, cache = step.start(src, max_lengths, capacity=steps + 1)
    b = src.size(0)
    if prefix is not None and b > n:  # the rows a compiled step topped the batch up with: no prefix
        prefix = torch.cat([prefix, prefix.new_full((b - n, prefix.size(1)), -1)])
    outputs = torch.full((b, steps), c.pad_id, dtype=torch.long, device=src.device)  # (B, L)
    total = torch.zeros(b, device=src.device)  # log-probability of each output so far
    active = torch.arange(b, device=src.device)  # the B' rows still decoding
    first = c.bos_id if start is None else start
    tokens = torch.full((b,), first, dtype=torch.long, device=src.device)  # last token per row, (B',)
    done = max_lengths <= 0  # (B',)
    for position in range(steps):
        logits, normaliser = step.logits(tokens, src, cache)  # (B', V), (B', 1)
        forced = prefix[active, position] if prefix is not None and position < prefix.size(1) else None
        tokens, log_probs = _choose(logits, normaliser, outputs[active, :position], done, forced, repetition,
                                    temperature, top_k, generator, c.pad_id)  # (B',) each
        total[active] += torch.where(done, 0.0, log_probs)
        tokens[done] = c.pad_id
        outputs[active, position] = tokens
        done |= (tokens == c.eos_id) | (position + 1 >= max_lengths[active])
        if done.all():
            break
        keep = step.rows_to_keep(done)  # (B'',) or None
        if keep is not None:
            active, tokens, done = active[keep], tokens[keep], done[keep]
            src = src.index_select(0, keep)
            cache.select(keep)
    return [Hypothesis(output_tokens(row, c.eos_id, c.pad_id), log_prob, log_prob)
            for row, log_prob in zip(outputs[:n].tolist(), total[:n].tolist(), strict=True)]


def _choose(logits: Tensor, normaliser: Tensor, produced: Tensor, done: Tensor, forced: Tensor | None,
            repetition: Repetition, temperature: float, top_k: int, generator: torch.Generator | None,
            pad_id: int) -> tuple[Tensor, Tensor]:
    """One step's tokens and their log-probabilities (B',) each, from its logits (B', V) and their
    log-normaliser (B', 1): under the rules against repetition, given the tokens each row `produced`
    (B', L); the most likely, or drawn where `temperature` > 0 (by the rows not `done` only, in
    order: a row's sample depends neither on finished rows beside it nor on the copies that top a
    compiled step's batch up); where `forced` (B',) names a prefix's token (-1: none), that token,
    its log-probability the model's, without the rules."""
    model_logits, model_normaliser = logits, normaliser  # a forced token's
    if repetition.penalty != 1.0:
        logits = repetition.penalise(logits, produced, pad_id)
        normaliser = logits.logsumexp(dim=-1, keepdim=True)
    logits = repetition.ban(logits, produced)  # the tokens left keep their log-probabilities
    if temperature > 0:
        tokens, decoding = torch.full_like(done, pad_id, dtype=torch.long), ~done  # (B',) each
        tokens[decoding] = sample(logits[decoding], temperature, top_k, generator)
    else:
        tokens = logits.max(dim=-1).indices  # (B',)
    if forced is None:
        return tokens, (logits.gather(1, tokens[:, None]) - normaliser).squeeze(1)
    tokens = torch.where(forced >= 0, forced, tokens)
    log_probs = torch.where(forced[:, None] >= 0, model_logits.gather(1, tokens[:, None]) - model_normaliser,
                            logits.gather(1, tokens[:, None]) - normaliser)  # (B', 1)
    return tokens, log_probs.squeeze(1)


def sample(logits: Tensor, temperature: float, top_k: int = 0,
           generator: torch.Generator | None = None) -> Tensor:
    """One token per row from softmax(logits / temperature), over the top_k best if top_k > 0."""
    scaled = logits / temperature  # (B, V)
    if top_k > 0:
        kth_best = scaled.topk(min(top_k, scaled.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
        scaled = scaled.masked_fill(scaled < kth_best, float("-inf"))
    return torch.multinomial(scaled.softmax(dim=-1), 1, generator=generator).squeeze(1)

