"""tatoeba-zh, English-Chinese: its splits read from $AIAYN_DATA_DIR/tatoeba-zh, named like Multi30k."""

import pytest

from aiayn.data import tatoeba
from aiayn.data.corpora import default_test, default_valid, load_corpus
from aiayn.data.readers import DataError


def test_reads_every_split_both_ways(data_dir):
    if not (data_dir / "tatoeba-zh" / "train.zh.gz").exists():
        pytest.skip(f"tatoeba-zh not found under {data_dir}")
    for split, size in {"train": 22_646, "val": 1_000, "test": 2_000}.items():
        en_zh = load_corpus(f"tatoeba-zh:{split}", "en", "zh")
        assert len(en_zh) == size and en_zh.name == f"tatoeba-zh:{split}"
        assert load_corpus(f"tatoeba-zh:{split}", "zh", "en").source == en_zh.target
    train = load_corpus("tatoeba-zh", "en", "zh")  # train by default
    assert len(train) == 22_646 and any("\u4e00" <= c <= "\u9fff" for c in train.target[0])


def test_goes_with_its_validation_and_test_sets():
    assert default_valid("tatoeba-zh") == "tatoeba-zh:val" and default_test("tatoeba-zh") == "tatoeba-zh:test"
    assert default_test("multi30k") == "multi30k:test_2016_flickr" and default_test("mine.tsv") == ""


def test_missing_files_unknown_split_or_language_are_one_line_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("AIAYN_DATA_DIR", str(tmp_path))
    with pytest.raises(DataError, match=f"tatoeba-zh:val needs val.en.gz in {tmp_path}/tatoeba-zh"):
        tatoeba.load("val", "en", "zh")
    monkeypatch.delenv("AIAYN_DATA_DIR")
    with pytest.raises(DataError, match=r"AIAYN_DATA_DIR is not set"):
        tatoeba.load("val", "en", "zh")
    with pytest.raises(DataError, match="no split 'test_2016_flickr'"):
        tatoeba.path("test_2016_flickr", "en")
    with pytest.raises(DataError, match="no language 'de'; it has en and zh"):
        tatoeba.path("train", "de")
