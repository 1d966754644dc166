"""Many directions, one model (Johnson et al., 2017): the data of a multilingual run.

    aiayn train --pairs en-de,de-en,en-fr,fr-en --sampling-temperature 5 ...

Each direction SRC-TGT of `--pairs` reads every `--train` corpus in that direction (a multi-way
corpus such as Multi30k serves every pair of its languages; files as PREFIX.SRC and PREFIX.TGT).
One joint vocabulary is learned over all the languages, on as many sentences of each
(`Tokenizer.learn_languages`), with a piece per language, `>>fr<<`. The model is told the target
language by that piece: as the first token of the source (`language_token = "source"`, as Johnson et
al. and the multi-target OPUS-MT models do), or as the decoder's first token, in place of <s>
(`"target"`, fairseq's decoder language token): a target then begins with the piece, which `collate`
feeds as the decoder's start and never asks the model to predict. The directions are sampled with a
temperature (`mixing.Mix`), and validated one by one.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiayn.data.batching import TokenizedCorpus
from aiayn.data.readers import DataError
from aiayn.tokenizer import Tokenizer


@dataclass(frozen=True)
class Direction:
    src: str
    tgt: str

    @classmethod
    def parse(cls, pair: str) -> Direction:
        """'en-de' (as DataConfig.pairs holds it, checked) -> Direction('en', 'de')."""
        src, tgt = pair.split("-")
        return cls(src, tgt)

    def __str__(self) -> str:
        return f"{self.src}-{self.tgt}"


def told(corpus: TokenizedCorpus, tokenizer: Tokenizer, direction: Direction, where: str = "source"
         ) -> TokenizedCorpus:
    """`corpus` with its target language's piece before every sentence of side `where` (source, target)."""
    lang = target_piece(tokenizer, direction)
    source, target = corpus.source, corpus.target
    if where == "source":
        source = [[lang, *s] for s in source]
    else:
        target = [[lang, *t] for t in target]
    return TokenizedCorpus(source, target, corpus.dropped_empty, corpus.dropped_long)


def target_piece(tokenizer: Tokenizer, direction: Direction) -> int:
    """The id of the piece that asks for `direction`'s target language."""
    lang = tokenizer.language_id(direction.tgt)
    if lang is None:
        have = ", ".join(tokenizer.languages()) or "none"
        raise DataError(f"the vocabulary has no piece >>{direction.tgt}<< to ask for {direction} (it has "
                        f"pieces for: {have}); let training learn the vocabulary (no --tokenizer)")
    return lang
