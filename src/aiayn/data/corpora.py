"""Where parallel text comes from: one registry of named sources, and files.

A corpus is named as `--train`, `--valid` and `--test` take it (DataConfig.train lists the forms):
a name in `SOURCES` (`multi30k:test_2016_flickr`, `tatoeba-zh:val`, `synthetic:reverse`,
`hf:wmt14:de-en:train`),
else files (`PREFIX`, `SRC_FILE,TGT_FILE`, `FILE.tsv`). The named sources read their files
through `aiayn.data.readers`; none of them imports this module.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiayn.data import hf, multi30k, synthetic, tatoeba
from aiayn.data.readers import DataError, ParallelCorpus, collect, iter_parallel, iter_tsv

Pairs = Iterator[tuple[str, str]]


@dataclass(frozen=True)
class Source:
    """A named source of parallel text, `NAME[:REST]`: its pairs, and the validation and test sets
    that go with a training set of it."""

    open: Callable[[str, str, str], tuple[Pairs, str]]  # (REST, src_lang, tgt_lang) -> (pairs, name)
    valid: Callable[[str], str]  # REST of a training set -> the spec of its validation set ('': none)
    test: Callable[[str], str] = lambda rest: ""  # REST of a training set -> its test set ('': none)


def _whole(corpus: ParallelCorpus) -> tuple[Pairs, str]:
    return corpus.pairs(), corpus.name


def _synthetic(rest: str) -> ParallelCorpus:
    task, _, split = rest.partition(":")
    return synthetic.load(task, split or "train")


SOURCES: dict[str, Source] = {
    "multi30k": Source(lambda rest, s, t: _whole(multi30k.load(rest or "train", s, t)),
                       lambda rest: "multi30k:val", lambda rest: "multi30k:test_2016_flickr"),
    "tatoeba-zh": Source(lambda rest, s, t: _whole(tatoeba.load(rest or "train", s, t)),
                         lambda rest: "tatoeba-zh:val", lambda rest: "tatoeba-zh:test"),
    "synthetic": Source(lambda rest, s, t: _whole(_synthetic(rest)),
                        lambda rest: f"synthetic:{rest.partition(':')[0]}:val",
                        lambda rest: f"synthetic:{rest.partition(':')[0]}:test"),
    # Read as needed, in bounded memory; needs HuggingFace datasets (imported when used).
    "hf": Source(lambda rest, s, t: (hf.iter_pairs(rest, s, t), f"hf:{rest}"), lambda rest: ""),
}


def load_corpus(spec: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    """Read the corpus that `spec` names, whole."""
    return collect(*_open(spec, src_lang, tgt_lang))


def iter_pairs(spec: str, src_lang: str, tgt_lang: str) -> Pairs:
    """The pairs `spec` names, read as they are needed: files and hub datasets of any size in
    bounded memory (the small named datasets are read whole)."""
    return _open(spec, src_lang, tgt_lang)[0]


def default_valid(train_spec: str) -> str:
    """The validation set that goes with a named training set ('' when there is none)."""
    name, _, rest = train_spec.partition(":")
    return SOURCES[name].valid(rest) if name in SOURCES else ""


def default_test(train_spec: str) -> str:
    """The test set that goes with a named training set ('' when there is none)."""
    name, _, rest = train_spec.partition(":")
    return SOURCES[name].test(rest) if name in SOURCES else ""


def _open(spec: str, src_lang: str, tgt_lang: str) -> tuple[Pairs, str]:
    """(the pairs, the corpus's name) of a named source or of files."""
    name, _, rest = spec.partition(":")
    if name in SOURCES:
        return SOURCES[name].open(rest, src_lang, tgt_lang)
    return _file_pairs(spec, src_lang, tgt_lang)


def _file_pairs(spec: str, src_lang: str, tgt_lang: str) -> tuple[Pairs, str]:
    """The pairs of the files `spec` names (TSV, SRC_FILE,TGT_FILE or PREFIX), and their name."""
    if spec.endswith((".tsv", ".tsv.gz")):
        return iter_tsv(spec), spec
    if "," in spec:
        src_path, tgt_path = spec.split(",", 1)
    else:
        src_path, tgt_path = _with_suffix(spec, src_lang), _with_suffix(spec, tgt_lang)
    return iter_parallel(src_path, tgt_path), f"{src_path},{tgt_path}"


def sample_pairs(pairs: Iterable[tuple[str, str]], k: int, seed: int = 1
                 ) -> tuple[list[tuple[str, str]], int]:
    """A uniform random sample of at most `k` pairs, read in one pass in bounded memory (reservoir
    sampling); -> (the sample, how many pairs were read). With `k` or fewer pairs, all of them, in
    order."""
    rng, sample, seen = random.Random(seed), [], 0
    for seen, pair in enumerate(pairs, start=1):
        if len(sample) < k:
            sample.append(pair)
        elif (j := rng.randrange(seen)) < k:
            sample[j] = pair
    return sample, seen


def _with_suffix(prefix: str, lang: str) -> Path:
    for candidate in (Path(f"{prefix}.{lang}"), Path(f"{prefix}.{lang}.gz")):
        if candidate.exists():
            return candidate
    raise DataError(f"{prefix}.{lang}: no such file (nor {prefix}.{lang}.gz)")
