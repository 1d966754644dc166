"""Prepared data directories (data/prepared.py): the tokenizer and the tokenized corpora that
`aiayn prepare` writes and `aiayn train --data` reads."""

import json

import pytest

from aiayn.data import prepared
from aiayn.data.batching import tokenize
from aiayn.data.binarized import MappedCorpus
from aiayn.data.corpora import load_corpus
from aiayn.data.readers import DataError
from aiayn.files import OutputError
from aiayn.tokenizer import Tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return prepared.learn_tokenizer("synthetic:reverse", "en", "de", 300, 1, 2_000_000)[0]


def test_prepare_writes_the_tokenizer_and_both_corpora(tmp_path, tokenizer):
    data = prepared.prepare(tmp_path / "d", "synthetic:reverse", None, "en", "de", tokenizer, 30)
    assert data.valid == "synthetic:reverse:val"  # the named dataset's own validation split
    assert prepared.load(tmp_path / "d") == data
    assert Tokenizer.load(tmp_path / "d").vocab == tokenizer.vocab
    for name, spec, limit in (("train", data.train, 30), ("valid", data.valid, None)):
        expected = tokenize(load_corpus(spec, "en", "de"), tokenizer, limit)
        corpus = MappedCorpus(tmp_path / "d" / name)
        assert list(corpus.source) == expected.source and list(corpus.target) == expected.target
    d = tmp_path / "d"
    assert data.data_options() == {"train": str(d / "train"), "valid": str(d / "valid"), "tokenizer": str(d),
                                   "src_lang": "en", "tgt_lang": "de"}


def test_files_have_no_validation_set_unless_one_is_given(tmp_path, tokenizer):
    for lang, text in (("en", "a b c\nd e\n"), ("de", "c b a\ne d\n")):
        (tmp_path / f"t.{lang}").write_text(text)
    data = prepared.prepare(tmp_path / "d", str(tmp_path / "t"), None, "en", "de", tokenizer, 30)
    assert data.valid == "" and not (tmp_path / "d" / "valid").exists()
    assert data.data_options()["valid"] == ""
    text = str(tmp_path / "t")
    data = prepared.prepare(tmp_path / "d", text, text, "en", "de", tokenizer, 30)
    assert len(MappedCorpus(tmp_path / "d" / "valid")) == 2


def test_what_is_not_a_data_directory_is_named(tmp_path, tokenizer):
    with pytest.raises(DataError, match="not a prepared data directory, no data.json; make one"):
        prepared.load(tmp_path)
    tokenizer.save(tmp_path)
    with pytest.raises(DataError, match="it holds only a tokenizer: pass it as --tokenizer"):
        prepared.load(tmp_path)
    data = prepared.prepare(tmp_path / "d", "synthetic:reverse", "", "en", "de", tokenizer, 30)
    (data.path / "train" / "corpus.json").unlink()
    with pytest.raises(DataError, match=r"d/train: missing or damaged; run `aiayn prepare` again"):
        prepared.load(data.path)
    (data.path / "data.json").write_text(json.dumps({"format": 99}))
    with pytest.raises(DataError, match="data.json: not a data directory description of format 1"):
        prepared.load(data.path)


def test_prepare_never_writes_over_other_things(tmp_path, tokenizer):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="is not empty and holds no prepared data directory"):
        prepared.prepare(tmp_path / "d", "synthetic:reverse", "", "en", "de", tokenizer, 30)
    assert (tmp_path / "d" / "notes.txt").read_text() == "mine"
