"""Scores with sacreBLEU: BLEU and chrF on detokenised, cased text, each with its signature.

The signature (for example nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0) says
exactly how the score was computed, so anyone can reproduce it with the `sacrebleu` command.
BLEU counts words, so the tokeniser follows the target language, as sacreBLEU itself does:
13a for languages written with spaces, `zh` (characters) for Chinese, MeCab for Japanese and
Korean (`ja-mecab`, `ko-mecab`, with `pip install "sacrebleu[ja]"` or `"sacrebleu[ko]"`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.metrics.bleu import _TOKENIZERS

from aiayn.errors import AiaynError

TOKENIZERS = tuple(_TOKENIZERS)  # what sacreBLEU offers: 13a, intl, zh, ja-mecab, ko-mecab, char, ...
# language -> (sacreBLEU's tokeniser, the sacrebleu extra that installs what it needs)
BY_LANGUAGE = {"zh": ("zh", "zh"), "ja": ("ja-mecab", "ja"), "ko": ("ko-mecab", "ko")}


class ScoringError(AiaynError):
    """A tokeniser that cannot run here (its package is missing)."""


def tokenizer_for(language: str | None) -> str:
    """sacreBLEU's tokeniser for text in `language` (a code such as de, zh, zh-Hans, ja): the
    language's own for Chinese, Japanese and Korean, else 13a."""
    code = (language or "").lower().replace("_", "-").split("-")[0]
    return BY_LANGUAGE.get(code, ("13a", ""))[0]


def bleu_metric(tokenize: str = "13a") -> BLEU:
    """sacreBLEU's BLEU with the tokeniser `tokenize`; a ScoringError says which package it lacks."""
    try:
        return BLEU(tokenize=tokenize)
    except RuntimeError:  # sacreBLEU's message when MeCab and its dictionary are missing
        extra = next((x for t, x in BY_LANGUAGE.values() if t == tokenize), "")
        raise ScoringError(f"BLEU with sacreBLEU's {tokenize} tokeniser needs packages not installed here: "
                           f"pip install \"sacrebleu[{extra}]\" (or --tokenize 13a or char)") from None


@dataclass
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str
    bleu_detail: str  # sacreBLEU's own line: n-gram precisions, brevity penalty, lengths

    def lines(self) -> list[str]:
        return [f"BLEU = {self.bleu:.2f}  {self.bleu_signature}  ({self.bleu_detail})",
                f"chrF2 = {self.chrf:.2f}  {self.chrf_signature}"]


def score(hypotheses: list[str], references: list[str], tokenize: str = "13a") -> Scores:
    """Corpus BLEU (words cut by `tokenize`, one of `TOKENIZERS`) and chrF of detokenised hypotheses
    against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = bleu_metric(tokenize), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    detail = str(b).split(" ", 3)[-1]  # after "BLEU = 42.10"
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), detail)


def looping(text: str, tokenize: str = "13a", longest: int = 3, times: int = 4) -> bool:
    """Whether `text` holds a repetition loop: a sequence of 1 to `longest` words (as BLEU's
    tokeniser `tokenize` cuts them: characters of Chinese with `zh`) `times` or more times in a row."""
    words = _cutter(tokenize)(text).split()
    for n in range(1, longest + 1):
        for i in range(len(words) - times * n + 1):
            if all(words[i + k * n:i + (k + 1) * n] == words[i:i + n] for k in range(1, times)):
                return True
    return False


@functools.lru_cache(maxsize=8)
def _cutter(tokenize: str) -> Callable[[str], str]:
    return bleu_metric(tokenize).tokenizer


@dataclass
class Trial:
    """One search setting of a sweep and what it scored."""

    beam_size: int
    length_penalty: float
    bleu: float
    chrf: float


def sweep(translate: Callable[[int, float], list[str]], references: list[str], beams: Sequence[int],
          penalties: Sequence[float], tokenize: str = "13a",
          progress: Callable[[Trial], None] | None = None) -> list[Trial]:
    """Score every beam size with every length penalty: `translate(beam, penalty)` gives the
    hypotheses of the references' sources. -> the trials, best first: by BLEU, then chrF, then the
    smaller beam (faster), then the penalty nearer the paper's 0.6."""
    trials = []
    for beam in beams:
        for penalty in penalties:
            scores = score(translate(beam, penalty), references, tokenize)
            trials.append(Trial(beam, penalty, scores.bleu, scores.chrf))
            if progress:
                progress(trials[-1])
    return sorted(trials, key=lambda t: (-round(t.bleu, 2), -round(t.chrf, 2), t.beam_size,
                                         abs(t.length_penalty - 0.6)))
