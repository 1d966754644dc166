"""Beam search as a tree: one sentence searched, every candidate of every step with what became of
it (kept as a live hypothesis, finished, or pruned), and how the length penalty picks the final
translation. Greedy search is the one-beam case (`beam_search` with K = 1 makes the choices
greedy search makes).

The search is the translator's own (`decoding.beam.beam_search`); this module watches its steps
(`BeamStep`) and names each hypothesis as a node: a parent and one more token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from aiayn.decoding.beam import BeamStep, beam_search
from aiayn.decoding.repetition import OFF, Repetition
from aiayn.decoding.steps import output_limits
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer


@dataclass
class Node:
    """A hypothesis: its parent's tokens and one more."""

    id: int
    parent: int  # -1 for the root (bos)
    step: int  # tokens made (the root: 0)
    token: int
    piece: str
    log_prob: float  # of the whole hypothesis: the sum of its tokens' log-probabilities
    state: str  # "root", "live" (kept), "finished" (ended in eos among the best K), "pruned"
    score: float | None = None  # finished: log_prob / length penalty, what the final choice ranks by
    penalty: float | None = None  # finished: the length penalty it was divided by


@dataclass
class SearchTree:
    beam_size: int
    alpha: float
    penalty_form: str
    nodes: list[Node]
    steps: list[list[int]]  # per step, the candidates it made (node ids), best first
    best: int  # the finished node the search returns: the highest score
    tokens: list[int]  # its tokens, without bos and eos

    def json(self) -> dict:
        return asdict(self)


@torch.no_grad()
def search_tree(model: Transformer, tokenizer: Tokenizer, src: list[int], beam_size: int, alpha: float,
                penalty_form: str, max_output_extra: int = 50, max_output_len: int = 0,
                start: int | None = None, repetition: Repetition = OFF) -> SearchTree:
    """Search source ids `src` (eos included) as `aiayn translate` does with these options, keeping
    the tree; `start`: the decoder's first token (default bos; a multilingual model's target language);
    `repetition`: the rules against repetition loops (decoding/repetition.py)."""
    c = model.config
    src_ = torch.tensor([src], device=next(model.parameters()).device)
    limits = output_limits(model, src_, max_output_extra, max_output_len)  # as translate's search
    first = c.bos_id if start is None else start
    nodes = [Node(0, -1, 0, first, tokenizer.pieces([first])[0], 0.0, "root")]
    live = [0] * beam_size  # the node each beam holds
    steps: list[list[int]] = []

    def watch(step: BeamStep) -> None:
        kept, made = step.kept[0].tolist(), {}  # made: candidate rank -> its node
        for rank, (score, beam, token) in enumerate(zip(step.scores[0].tolist(), step.beams[0].tolist(),
                                                        step.tokens[0].tolist(), strict=True)):
            if score == float("-inf"):  # not a candidate (a beam not yet expanded, or only eos allowed)
                continue
            finished = rank < beam_size and bool(step.finished[0, rank])
            state = "finished" if finished else "live" if rank in kept else "pruned"
            node = Node(len(nodes), live[beam], step.position + 1, token, tokenizer.pieces([token])[0],
                        score, state)
            if finished:
                node.score, node.penalty = score / step.penalty, step.penalty
            nodes.append(node)
            made[rank] = node.id
        live[:] = [made.get(rank, -1) for rank in kept]
        steps.append(list(made.values()))

    best = beam_search(model, src_, beam_size, 1, alpha, penalty_form, limits, watch=watch, start=start,
                       repetition=repetition)[0][0]
    chosen = max((n for n in nodes if n.state == "finished" and _tokens(nodes, n) == best.tokens),
                 key=lambda n: n.score)
    return SearchTree(beam_size, alpha, penalty_form, nodes, steps, chosen.id, best.tokens)


def _tokens(nodes: list[Node], node: Node) -> list[int]:
    """A finished node's output tokens: its ancestors' after the root, without its eos."""
    tokens = []
    while (node := nodes[node.parent]).parent >= 0:
        tokens.append(node.token)
    return tokens[::-1]
