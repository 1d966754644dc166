"""BPE-dropout: pieces drawn afresh each epoch, reproducibly, spelling the same text."""

import io
import os
from pathlib import Path

import pytest
import sentencepiece as spm

from aiayn.config import ConfigError
from aiayn.data import binarized, multi30k
from aiayn.data.batching import tokenize
from aiayn.data.multilingual import Direction, told
from aiayn.data.subwords import Resampler
from aiayn.tokenizer import Tokenizer
from tests.conftest import SHARED_DATA


@pytest.fixture(scope="module")
def captions():
    """Multi30k val en-de (1,014 pairs), with a joint BPE vocabulary learned on it."""
    path = Path(os.environ.get("AIAYN_DATA_DIR", SHARED_DATA))
    if not (path / "multi30k" / "val.en.gz").exists():
        pytest.skip(f"Multi30k not found under {path}")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIAYN_DATA_DIR", str(path))
        corpus = multi30k.load("val", "en", "de")
    tokenizer = Tokenizer.learn(corpus.source, corpus.target, 2000)
    return corpus, tokenizer, tokenize(corpus, tokenizer)


def rows(sampled, side, n):
    return [getattr(sampled, side)[i] for i in range(n)]


def test_no_dropout_draws_exactly_sentencepieces_pieces(captions):
    _, tokenizer, corpus = captions
    usual = Resampler(tokenizer, 0.0, seed=1, max_len=256).drawn(corpus, 0)
    for side in ("source", "target"):
        assert rows(usual, side, len(corpus)) == getattr(corpus, side)


def test_drawn_pieces_spell_the_sentence_and_differ_from_the_usual_ones(captions):
    text, tokenizer, corpus = captions
    sampled = Resampler(tokenizer, 0.1, seed=1, max_len=256).drawn(corpus, 0)
    for side, sentences in (("source", text.source), ("target", text.target)):
        drawn = rows(sampled, side, len(corpus))
        spelled = [tokenizer.source_sp.decode(ids) for ids in getattr(corpus, side)]  # spaces as cut
        assert [tokenizer.source_sp.decode(ids) for ids in drawn] == spelled
        assert sum(a == b for a, b in zip(spelled, sentences, strict=True)) > 0.99 * len(corpus)
        changed = sum(d != u for d, u in zip(drawn, getattr(corpus, side), strict=True))
        assert changed > len(corpus) // 4  # most sentences have a word cut otherwise at P = 0.1
        assert sum(map(len, drawn)) > sum(map(len, getattr(corpus, side)))  # smaller pieces, more of them


def test_one_seed_draws_the_same_pieces_twice_and_each_epoch_new_ones(captions):
    _, tokenizer, corpus = captions
    first = Resampler(tokenizer, 0.1, seed=1, max_len=256)
    again = Resampler(tokenizer, 0.1, seed=1, max_len=256)
    other = Resampler(tokenizer, 0.1, seed=2, max_len=256)
    n = 200
    assert rows(first.drawn(corpus, 3), "source", n) == rows(again.drawn(corpus, 3), "source", n)
    # a pair's pieces do not depend on the others drawn with it (nor on the batch it falls into)
    alone = [again.row(corpus.target[i], "target", 3, i) for i in reversed(range(n))][::-1]
    assert rows(first.drawn(corpus, 3), "target", n) == alone
    assert rows(first.drawn(corpus, 3), "source", n) != rows(first.drawn(corpus, 4), "source", n)
    assert rows(first.drawn(corpus, 3), "source", n) != rows(other.drawn(corpus, 3), "source", n)


def test_memory_mapped_corpora_draw_the_same_pieces_as_lists(captions, tmp_path):
    text, tokenizer, corpus = captions
    mapped = binarized.write(tmp_path / "val", zip(text.source, text.target, strict=True), tokenizer)
    resampler = Resampler(tokenizer, 0.1, seed=1, max_len=256)
    for side in ("source", "target"):
        assert rows(resampler.drawn(mapped, 2), side, 100) == rows(resampler.drawn(corpus, 2), side, 100)


def test_a_draw_longer_than_max_len_keeps_the_usual_pieces(captions):
    _, tokenizer, corpus = captions
    longest = max(map(len, corpus.source))
    sampled = Resampler(tokenizer, 0.9, seed=1, max_len=longest).drawn(corpus, 0)
    for i, usual in enumerate(corpus.source):
        drawn = sampled.source[i]
        assert len(drawn) <= longest
        if len(usual) == longest:
            assert drawn == usual  # P = 0.9 cuts every long sentence into more pieces than the limit


def test_the_target_language_piece_stays_first(captions):
    text, _, _ = captions
    tokenizer = Tokenizer.learn_languages({"en": text.source, "de": text.target}, 2000)
    corpus = told(tokenize(text, tokenizer), tokenizer, Direction("en", "de"), "target")
    piece = tokenizer.language_id("de")
    sampled = Resampler(tokenizer, 0.5, seed=1, max_len=256).drawn(corpus, 0)
    for i in range(50):
        drawn = sampled.target[i]
        assert drawn[0] == piece and piece not in drawn[1:]
        assert tokenizer.target_sp.decode(drawn[1:]) == tokenizer.target_sp.decode(corpus.target[i][1:])


def test_a_unigram_tokenizer_is_refused_with_one_line(captions):
    text, _, _ = captions
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text.source), model_writer=model,
                                   model_type="unigram",
                                   vocab_size=500, minloglevel=2, pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    unigram = Tokenizer(model.getvalue())
    assert not unigram.is_bpe()
    with pytest.raises(ConfigError, match="not a BPE\nmodel|not a BPE model"):
        Resampler(unigram, 0.1, seed=1, max_len=256)
