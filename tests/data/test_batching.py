import numpy as np
import pytest

from aiayn.data.batching import TokenizedCorpus, collate, make_batches, padding_fraction, tokenize
from aiayn.data.readers import ParallelCorpus
from aiayn.tokenizer import Tokenizer


def lengths(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(2, 60, n), rng.integers(2, 60, n)


def test_batches_respect_the_token_budget_and_cover_every_pair_once():
    src, tgt = lengths()
    batches = make_batches(src, tgt, batch_tokens=1000, seed=3, epoch=0)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    for b in batches:
        assert len(b) * max(src[b].max(), tgt[b].max()) <= 1000


def test_batches_are_deterministic_per_seed_and_epoch_and_differ_across_epochs():
    src, tgt = lengths()
    first = make_batches(src, tgt, 1000, seed=3, epoch=0)
    again = make_batches(src, tgt, 1000, seed=3, epoch=0)
    other = make_batches(src, tgt, 1000, seed=3, epoch=1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert [b.tolist() for b in first] != [b.tolist() for b in other]


def test_grouping_by_length_keeps_padding_small():
    src, tgt = lengths()
    grouped = make_batches(src, tgt, 1000, seed=3)
    assert padding_fraction(grouped, tgt) < 0.02
    # Random batches of the same sizes pad far more.
    rng = np.random.default_rng(0)
    order, sizes = rng.permutation(len(src)), [len(b) for b in grouped]
    random_batches = np.split(order, np.cumsum(sizes)[:-1])
    assert padding_fraction(random_batches, tgt) > 0.3


def test_padding_fraction_counts_padded_positions():
    lens = np.array([2, 4, 4])
    assert padding_fraction([np.array([0, 1])], lens) == pytest.approx(2 / 8)


def test_a_pair_longer_than_the_budget_gets_a_batch_of_its_own():
    batches = make_batches(np.array([5, 500, 5]), np.array([5, 5, 5]), 100, shuffle=False)
    assert [b.tolist() for b in batches] == [[0, 2], [1]]


def test_tokenize_drops_empty_and_overlong_pairs_and_counts_them():
    corpus = ParallelCorpus(["a b", "", "c", "d e f g h i j k"], ["x", "y", "", "z"], "t")
    tokenizer = Tokenizer.train(["a b c d e f g h i j k x y z"] * 20, 300)
    kept = tokenize(corpus, tokenizer, max_len=4)
    assert len(kept) == 1 and kept.dropped_empty == 2 and kept.dropped_long == 1
    assert "1 of 4 pairs kept; dropped 2 with an empty side and 1 over the length limit" in kept.summary("t")


def test_collate_adds_eos_to_source_and_shifts_the_target():
    corpus = TokenizedCorpus([[10, 11], [12]], [[20], [21, 22, 23]])
    batch = collate(np.array([0, 1]), corpus, pad_id=0, bos_id=2, eos_id=3)
    assert batch.src.tolist() == [[10, 11, 3], [12, 3, 0]]
    assert batch.tgt_in.tolist() == [[2, 20, 0, 0], [2, 21, 22, 23]]
    assert batch.tgt_out.tolist() == [[20, 3, 0, 0], [21, 22, 23, 3]]
    assert batch.n_tgt_tokens == 6
