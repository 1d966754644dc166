"""A translation's attention weights, every layer's and head's, and the alignment read from them
(which source word each target word attends to most): for the explain page, the pictures, and
carrying inline markup onto the words of a translation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from aiayn.decoding.tracing import gate
from aiayn.decoding.translator import Translation
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer


@dataclass
class AttentionView:
    """One sentence's translation and the attention weights of every layer and head."""

    sentence: str  # the source sentence
    translation: str
    source: list[str]  # source pieces, then </s>
    target_in: list[str]  # <s>, then the translation's pieces: the decoder's positions
    target_out: list[str]  # what each decoder position predicts: the pieces, then </s>
    # Per layer: "encoder" (H, S, S), "decoder" (H, T, T), "cross" (H, T, S).
    maps: dict[str, list[torch.Tensor]]
    prefix: int = 0  # source pieces before the sentence's: a multilingual model's >>xx<<

    def labels(self, kind: str) -> tuple[list[str], list[str]]:
        """(query labels, key labels) of one kind of attention."""
        return {"encoder": (self.source, self.source), "decoder": (self.target_in, self.target_in),
                "cross": (self.target_in, self.source)}[kind]


def alignment(view: AttentionView) -> list[int]:
    """For each target token, the sentence's source token (not </s>, nor a prefix; counted from the
    sentence's first) it attends to most: cross-attention averaged over layers and heads, at the
    decoder position that predicts the token."""
    cross = torch.stack(view.maps["cross"]).mean(dim=(0, 1))  # (T, S): T = <s> + tokens, S = pieces + </s>
    return cross[: len(view.target_out) - 1, view.prefix: len(view.source) - 1].argmax(dim=-1).tolist()


@torch.no_grad()
def attention_view(model: Transformer, tokenizer: Tokenizer, sentence: str, translation: Translation,
                   prefix: tuple[int, ...] = (), start: int | None = None) -> AttentionView:
    """Every layer's and head's attention weights for `translation` of `sentence`: the translation run
    once more through the model with teacher forcing (`Transformer.attention_maps`; the cached
    step-by-step decoder computes the same weights). `prefix`: the source's first ids, `start` the
    decoder's (default bos): a multilingual model's target language."""
    return attention_views(model, tokenizer, [(sentence, translation)], prefix, start)[0]


@torch.no_grad()
def attention_views(model: Transformer, tokenizer: Tokenizer, pairs: Sequence[tuple[str, Translation]],
                    prefix: tuple[int, ...] = (), start: int | None = None, batch: int = 32,
                    encoder: bool = True) -> list[AttentionView]:
    """`attention_view` of many (sentence, translation) pairs, run through the model `batch` at a time
    (padded: a padded source position gets no attention, a padded target position comes after the
    real ones), each view cut to its own sentence: the same weights, in far fewer model calls. With
    `encoder` False, the views hold the decoder's maps only ("decoder", "cross": all that
    `alignment` reads), and the encoder runs on its fast path."""
    c = model.config
    device = next(model.parameters()).device
    sources = [[*prefix, *ids, c.eos_id] for ids in tokenizer.encode([s for s, _ in pairs])]
    views = []
    for at in range(0, len(pairs), batch):
        chunk = range(at, min(at + batch, len(pairs)))
        targets = [[c.bos_id if start is None else start, *pairs[i][1].tokens] for i in chunk]
        src = _padded([sources[i] for i in chunk], c.pad_id, device)  # (B, S)
        tgt = _padded(targets, c.pad_id, device)  # (B, T)
        with gate.running():  # a server's other thread may be compiling a step
            maps = model.attention_weights(src, tgt, encoder)
        kinds = {"encoder": maps.encoder, "decoder": maps.decoder, "cross": maps.cross}
        if not encoder:
            del kinds["encoder"]
        for b, i in enumerate(chunk):
            s, t = len(sources[i]), len(targets[b])
            sizes = {"encoder": (s, s), "decoder": (t, t), "cross": (t, s)}
            sentence, translation = pairs[i]
            views.append(AttentionView(
                sentence, translation.text, tokenizer.pieces(sources[i], "source"),
                tokenizer.pieces(targets[b]), tokenizer.pieces(translation.tokens + [c.eos_id]),
                {kind: [w[b, :, :sizes[kind][0], :sizes[kind][1]].float().cpu() for w in weights]
                 for kind, weights in kinds.items()}, len(prefix)))
    return views


def _padded(rows: list[list[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [pad_id] * (width - len(r)) for r in rows], device=device)
