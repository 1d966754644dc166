"""The Multi30k dataset (task 1, raw, cased): en, de, fr and cs image descriptions, multi-way
parallel (line n of every language is one caption). Czech has train, val and test_2016_flickr.

Files are looked for, in order, in $AIAYN_DATA_DIR/multi30k, then in the download cache
($AIAYN_CACHE_DIR, default ~/.cache/aiayn/multi30k); a file found in neither is downloaded
from the official repository (github.com/multi30k/dataset) into the cache.
"""

from __future__ import annotations

import os
import tempfile
import urllib.request
from pathlib import Path

from aiayn.data.readers import DataError, ParallelCorpus, read_parallel

SPLITS = ("train", "val", "test_2016_flickr", "test_2017_flickr")
LANGUAGES = ("en", "de", "fr", "cs")
SPLITS_OF = {"cs": ("train", "val", "test_2016_flickr")}  # the languages that lack a split
URL = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


def load(split: str, src_lang: str, tgt_lang: str) -> ParallelCorpus:
    corpus = read_parallel(path(split, src_lang, tgt_lang), path(split, tgt_lang, src_lang))
    corpus.name = f"multi30k:{split}"
    return corpus


def path(split: str, lang: str, other_lang: str | None = None) -> Path:
    """The local file of one split and language, downloading it if needed (`other_lang`: the other
    side of the pair, named in the error when neither file can be had)."""
    if split not in SPLITS:
        raise DataError(f"multi30k has no split {split!r}; choose from {', '.join(SPLITS)}")
    if lang not in LANGUAGES:
        raise DataError(f"multi30k has no language {lang!r}; choose from {', '.join(LANGUAGES)}")
    if split not in SPLITS_OF.get(lang, SPLITS):
        raise DataError(f"multi30k has no {split} in {lang!r}; {lang} has {', '.join(SPLITS_OF[lang])}")
    name = f"{split}.{lang}.gz"
    local = data_dir()
    if local and (local / name).exists():
        return local / name
    cached = cache_dir() / name
    if not cached.exists():
        url = f"{os.environ.get('AIAYN_MULTI30K_URL', URL)}/{name}"
        try:
            download(url, cached)
        except OSError as e:
            needed = sorted({name, f"{split}.{other_lang}.gz"} if other_lang else {name})
            where = f"$AIAYN_DATA_DIR/multi30k ({local})" if local else "$AIAYN_DATA_DIR/multi30k (not set)"
            raise DataError(
                f"multi30k:{split} needs {' and '.join(needed)}, found neither in {where} nor in the "
                f"download cache {cache_dir()}, and downloading {url} failed ({e}). Put the files in "
                f"DIR/multi30k/ and export AIAYN_DATA_DIR=DIR, or train on your own parallel text with "
                f"--train PREFIX (PREFIX.{lang} and PREFIX.{other_lang or 'TGT'}, plain or .gz)") from None
    return cached


def data_dir() -> Path | None:
    """$AIAYN_DATA_DIR/multi30k, when the variable is set."""
    root = os.environ.get("AIAYN_DATA_DIR")
    return Path(root) / "multi30k" if root else None


def cache_dir() -> Path:
    root = os.environ.get("AIAYN_CACHE_DIR") or Path.home() / ".cache" / "aiayn"
    return Path(root) / "multi30k"


def download(url: str, dest: Path) -> None:
    """Fetch `url` to `dest` atomically: an interrupted download leaves no partial file."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    print(f"downloading {url} -> {dest}", flush=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            out.write(response.read())
        os.replace(tmp, dest)
    except (OSError, ValueError) as e:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(str(e)) from e
