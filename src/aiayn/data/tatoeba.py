"""Tatoeba English-Chinese (`tatoeba-zh`): short everyday sentences, Mandarin in simplified
characters, split into train (22,646 pairs), val (1,000) and test (2,000, drawn from the Tatoeba
Translation Challenge's test set v2021-08-07, with every training pair that shares a side with it
removed). Sentences by tatoeba.org's contributors, CC-BY 2.0 FR: keep the attribution files with
any copy.

The files (`{train,val,test}.{en,zh}.gz`) are read from $AIAYN_DATA_DIR/tatoeba-zh; they are not
downloaded.
"""

from __future__ import annotations

import os
from pathlib import Path

from aiayn.data.readers import DataError, ParallelCorpus, read_parallel

NAME = "tatoeba-zh"
SPLITS = ("train", "val", "test")
LANGUAGES = ("en", "zh")


def load(split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    corpus = read_parallel(path(split, src_lang), path(split, tgt_lang))
    corpus.name = f"{NAME}:{split}"
    return corpus


def path(split: str, lang: str) -> Path:
    """The file of one split and language."""
    if split not in SPLITS:
        raise DataError(f"{NAME} has no split {split!r}; choose from {', '.join(SPLITS)}")
    if lang not in LANGUAGES:
        raise DataError(f"{NAME} has no language {lang!r}; it has {' and '.join(LANGUAGES)}")
    root = os.environ.get("AIAYN_DATA_DIR")
    found = Path(root, NAME, f"{split}.{lang}.gz") if root else None
    if found is None or not found.exists():
        where = f"{found.parent}" if found else "$AIAYN_DATA_DIR/tatoeba-zh ($AIAYN_DATA_DIR is not set)"
        raise DataError(f"{NAME}:{split} needs {split}.{lang}.gz in {where}: put the corpus's files in "
                        f"DIR/{NAME}/ and export AIAYN_DATA_DIR=DIR")
    return found
