"""Tokenized corpora on disk (data/binarized.py): what `batching.tokenize` gives, read through memory
maps, written in one streaming pass, and damage named by file."""

import json

import numpy as np
import pytest

from aiayn.data.batching import collate, tokenize
from aiayn.data.binarized import MappedCorpus, is_corpus_dir, write
from aiayn.data.readers import DataError, ParallelCorpus
from aiayn.tokenizer import Tokenizer

SOURCE = ["a dog runs", "", "two cats sleep on a mat", "x " * 40, "the end"]
TARGET = ["ein hund läuft", "leer", "zwei katzen schlafen", "y " * 40, "das ende"]


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.train(SOURCE * 20 + TARGET * 20, 300)


def test_the_corpus_on_disk_is_what_tokenize_gives(tmp_path, tokenizer):
    expected = tokenize(ParallelCorpus(SOURCE, TARGET, "t"), tokenizer, max_len=30)
    corpus = write(tmp_path / "c", zip(SOURCE, TARGET, strict=True), tokenizer, max_len=30, chunk=2)
    assert is_corpus_dir(tmp_path / "c") and isinstance(corpus.source.tokens, np.memmap)
    assert list(corpus.source) == expected.source and list(corpus.target) == expected.target
    assert (corpus.dropped_empty, corpus.dropped_long) == (1, 1)
    for mine, theirs in zip(corpus.lengths(), expected.lengths(), strict=True):
        assert mine.tolist() == theirs.tolist()
    assert corpus.summary("t") == expected.summary("t")
    rows = np.array([2, 0])
    batch, reference = collate(rows, corpus, 0, 2, 3), collate(rows, expected, 0, 2, 3)
    for name in ("src", "tgt_in", "tgt_out"):
        assert getattr(batch, name).tolist() == getattr(reference, name).tolist()
    assert MappedCorpus(tmp_path / "c").source[-1] == expected.source[-1]


def test_pairs_are_read_once_a_chunk_at_a_time_and_chunking_changes_no_byte(tmp_path, tokenizer):
    read = []

    def pairs():
        for pair in zip(SOURCE * 30, TARGET * 30, strict=True):
            read.append(pair)
            yield pair

    write(tmp_path / "a", pairs(), tokenizer, chunk=7)
    assert len(read) == 150
    write(tmp_path / "b", zip(SOURCE * 30, TARGET * 30, strict=True), tokenizer, chunk=1000)
    for name in ("source.tokens", "source.offsets", "target.tokens", "target.offsets", "corpus.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_token_ids_take_two_bytes_when_the_vocabulary_fits(tmp_path, tokenizer):
    corpus = write(tmp_path / "c", zip(SOURCE, TARGET, strict=True), tokenizer)
    assert corpus.source.tokens.dtype == np.uint16
    assert (tmp_path / "c" / "source.tokens").stat().st_size == 2 * sum(map(len, corpus.source))


def test_an_empty_corpus_is_written_and_read(tmp_path, tokenizer):
    corpus = write(tmp_path / "c", [("", "x")], tokenizer)
    assert len(corpus) == 0 and corpus.dropped_empty == 1 and corpus.lengths()[0].tolist() == []


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "corpus.json").unlink(), "not a tokenized corpus"),
    (lambda d: (d / "corpus.json").write_text("{"), "corpus.json: cannot read"),
    (lambda d: (d / "corpus.json").write_text(json.dumps({"format": 99})), "not a corpus of format 1"),
    (lambda d: (d / "target.tokens").write_bytes(b"\0\0"), "target.tokens: damaged or cut short"),
    (lambda d: (d / "source.offsets").unlink(), "source.offsets: damaged or cut short (missing"),
])
def test_damage_is_a_data_error_naming_the_file(tmp_path, tokenizer, damage, message):
    write(tmp_path / "c", zip(SOURCE, TARGET, strict=True), tokenizer)
    damage(tmp_path / "c")
    with pytest.raises(DataError, match=message.replace("(", r"\(")):
        MappedCorpus(tmp_path / "c")


def test_a_lower_length_limit_when_reading_drops_what_tokenize_would_drop(tmp_path, tokenizer):
    pairs = list(zip(SOURCE * 3, TARGET * 3, strict=True))
    write(tmp_path / "c", pairs, tokenizer)  # no limit on disk
    for limit in (4, 12, 100):
        expected = tokenize(ParallelCorpus(*map(list, zip(*pairs, strict=True)), "t"), tokenizer, limit)
        corpus = MappedCorpus(tmp_path / "c", max_len=limit)
        assert list(corpus.source) == expected.source and list(corpus.target) == expected.target
        assert corpus.lengths()[1].tolist() == expected.lengths()[1].tolist()
        assert corpus.summary("t") == expected.summary("t"), limit
        assert 0 < len(corpus) < len(pairs) or limit == 100
        assert corpus.target[-1] == expected.target[-1]
