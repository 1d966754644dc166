"""Scores with sacreBLEU: BLEU and chrF on detokenised, cased text, each with its signature.

The signature (for example nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0) says
exactly how the score was computed, so anyone can reproduce it with the `sacrebleu` command.
"""

from __future__ import annotations

from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF


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


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus BLEU and chrF of detokenised hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    bleu, chrf = BLEU(), CHRF()
    b = bleu.corpus_score(hypotheses, [references])
    c = chrf.corpus_score(hypotheses, [references])
    detail = str(b).split(" ", 3)[-1]  # after "BLEU = 42.10"
    return Scores(b.score, c.score, str(bleu.get_signature()), str(chrf.get_signature()), detail)
