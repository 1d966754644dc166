"""Parallel text from HuggingFace `datasets`: `--train hf:NAME_OR_PATH[:CONFIG][:SPLIT]`.

    hf:wmt14:de-en:train            the hub's WMT14 (where the machine has internet)
    hf:data/wmt14-local             a dataset written by `Dataset.save_to_disk`, or a directory of
                                    Parquet, JSON Lines, CSV or Arrow files
    hf:data/pairs.parquet::valid    one file (.parquet, .json, .jsonl, .csv, .arrow); split names it

Rows hold either a `translation` column, `{"en": ..., "de": ...}` as in the WMT and OPUS datasets,
or one column per language, named by its code (`en`, `de`), or `source` and `target`. Rows are read
a thousand at a time from Arrow's memory maps, so a corpus of any size streams in bounded memory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aiayn.data.readers import DataError

FILE_BUILDERS = {".parquet": "parquet", ".json": "json", ".jsonl": "json", ".csv": "csv", ".arrow": "arrow"}
ROWS = 1000  # read at a time


def iter_pairs(spec: str, src_lang: str, tgt_lang: str) -> Iterator[tuple[str, str]]:
    """The (source, target) pairs of the dataset `spec` (the part after `hf:`) names."""
    dataset = load(spec)
    source, target = _columns(dataset.column_names, src_lang, tgt_lang, spec)
    for rows in dataset.iter(batch_size=ROWS):
        if source == "translation":
            for pair in rows["translation"]:
                yield _text(pair.get(src_lang), spec), _text(pair.get(tgt_lang), spec)
        else:
            for s, t in zip(rows[source], rows[target], strict=True):
                yield _text(s, spec), _text(t, spec)


def load(spec: str) -> Any:
    """The `datasets.Dataset` of one split that `spec` (NAME_OR_PATH[:CONFIG][:SPLIT]) names."""
    try:
        import datasets
    except ImportError:
        raise DataError(f"hf:{spec} needs HuggingFace datasets: pip install 'aiayn[hf]'") from None
    path, _, rest = spec.partition(":")
    config, _, split = rest.partition(":")
    split = split or "train"
    local = Path(path)
    try:
        if (local / "dataset_dict.json").is_file() or (local / "state.json").is_file():
            found = datasets.load_from_disk(str(local))
            return found[split] if isinstance(found, datasets.DatasetDict) else found
        if local.suffix in FILE_BUILDERS and local.is_file():
            builder = FILE_BUILDERS[local.suffix]
            return datasets.load_dataset(builder, data_files={split: str(local)}, split=split)
        return datasets.load_dataset(path, config or None, split=split)
    except KeyError:
        raise DataError(f"hf:{spec}: no split {split!r} there") from None
    except (OSError, ValueError, datasets.exceptions.DatasetNotFoundError) as e:
        said = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise DataError(f"hf:{spec}: cannot load it with datasets: {said}") from None


def _columns(names: list[str], src_lang: str, tgt_lang: str, spec: str) -> tuple[str, str]:
    """Which columns hold the source and the target."""
    if "translation" in names:
        return "translation", "translation"
    for source, target in ((src_lang, tgt_lang), ("source", "target")):
        if source in names and target in names:
            return source, target
    raise DataError(f"hf:{spec}: no 'translation' column and no columns {src_lang!r} and {tgt_lang!r} (or "
                    f"'source' and 'target'); its columns are {', '.join(names)}")


def _text(value: Any, spec: str) -> str:
    if not isinstance(value, str):
        raise DataError(f"hf:{spec}: a row holds {type(value).__name__} where a sentence was expected "
                        "(is the language pair right? --src-lang/--tgt-lang)")
    return value
