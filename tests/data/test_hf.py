"""HuggingFace datasets as a source (data/hf.py): local Arrow, Parquet and JSON files, both column
layouts, offline; and a model trains from one."""

import json

import pytest

datasets = pytest.importorskip("datasets")

import aiayn  # noqa: E402
from aiayn.data.corpora import iter_pairs, load_corpus  # noqa: E402
from aiayn.data.readers import DataError  # noqa: E402

PAIRS = [("a dog runs", "ein hund läuft"), ("two cats", "zwei katzen"), ("the end", "das ende")] * 10


def translation_rows():
    return [{"translation": {"en": s, "de": t}, "id": str(i)} for i, (s, t) in enumerate(PAIRS)]


def test_the_translation_layout_of_wmt_and_opus_saved_to_disk(tmp_path):
    dataset = datasets.DatasetDict({"train": datasets.Dataset.from_list(translation_rows()),
                                    "validation": datasets.Dataset.from_list(translation_rows()[:4])})
    dataset.save_to_disk(str(tmp_path / "wmt"))
    assert list(iter_pairs(f"hf:{tmp_path / 'wmt'}", "en", "de")) == PAIRS
    assert list(iter_pairs(f"hf:{tmp_path / 'wmt'}::validation", "en", "de")) == PAIRS[:4]
    assert list(iter_pairs(f"hf:{tmp_path / 'wmt'}", "de", "en")) == [(t, s) for s, t in PAIRS]


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_one_column_per_language_in_a_parquet_or_json_file(tmp_path, suffix):
    dataset = datasets.Dataset.from_list([{"en": s, "de": t} for s, t in PAIRS])
    path = tmp_path / f"pairs{suffix}"
    dataset.to_parquet(str(path)) if suffix == ".parquet" else dataset.to_json(str(path))
    corpus = load_corpus(f"hf:{path}", "en", "de")
    assert list(zip(corpus.source, corpus.target, strict=True)) == PAIRS


def test_a_directory_of_json_files_with_source_and_target_columns(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "train.jsonl").write_text(
        "".join(json.dumps({"source": s, "target": t}) + "\n" for s, t in PAIRS))
    assert list(iter_pairs(f"hf:{tmp_path / 'd'}", "en", "de")) == PAIRS


def test_what_cannot_be_read_is_named(tmp_path):
    datasets.Dataset.from_list([{"fr": "x", "es": "y"}]).to_parquet(str(tmp_path / "p.parquet"))
    with pytest.raises(DataError, match=r"no 'translation' column and no columns 'en' and 'de' .* fr, es"):
        list(iter_pairs(f"hf:{tmp_path / 'p.parquet'}", "en", "de"))
    datasets.Dataset.from_list(translation_rows()).save_to_disk(str(tmp_path / "one"))
    with pytest.raises(DataError, match="a row holds NoneType where a sentence was expected"):
        list(iter_pairs(f"hf:{tmp_path / 'one'}", "en", "fr"))
    datasets.DatasetDict({"train": datasets.Dataset.from_list(translation_rows())}).save_to_disk(
        str(tmp_path / "dict"))
    with pytest.raises(DataError, match="no split 'test' there"):
        list(iter_pairs(f"hf:{tmp_path / 'dict'}::test", "en", "de"))
    with pytest.raises(DataError, match="hf:.*nothing-here: cannot load it with datasets"):
        list(iter_pairs(f"hf:{tmp_path / 'nothing-here'}", "en", "de"))


def test_a_model_trains_from_a_local_dataset(tmp_path):
    datasets.Dataset.from_list(translation_rows() * 5).save_to_disk(str(tmp_path / "wmt"))
    run = aiayn.train_model(tmp_path / "run", train=f"hf:{tmp_path / 'wmt'}", preset="tiny", vocab_size=300,
                            max_steps=3, valid_every=0, bleu_every=0, warmup_steps=2, threads=1)
    assert run.step == 3 and run.metrics["loss"] > 0
