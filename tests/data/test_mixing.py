"""Several training corpora mixed by weight: each epoch holds each corpus's share of pairs, a corpus
is seen whole before any of its pairs repeats, and one corpus without weights batches as before."""

from collections import Counter

import numpy as np
import pytest

from aiayn.config import DataConfig, TrainConfig
from aiayn.data.batching import TokenizedCorpus, make_batches
from aiayn.data.mixing import Mix
from aiayn.train.order import Position, updates


def corpus(n: int, length: int) -> TokenizedCorpus:
    rng = np.random.default_rng(n)
    lengths = rng.integers(1, length, n)
    return TokenizedCorpus([[5] * int(k) for k in lengths], [[6] * int(k + 1) for k in lengths])


def epoch_pairs(mix: Mix, epoch: int, batch_tokens: int = 200, seed: int = 3) -> list[int]:
    """The pairs training visits in `epoch`: the indices of every batch of every update."""
    data, config = DataConfig(batch_tokens=batch_tokens), TrainConfig(seed=seed)
    pairs = []
    for position, group, _ in updates(mix.lengths(), data, config, Position(epoch), sample=mix.sample):
        if position.epoch != epoch:
            break
        pairs += [int(i) for batch in group for i in batch]
    return pairs


def test_an_epoch_holds_each_corpus_in_the_share_its_weight_asks():
    mix = Mix([("big", corpus(1000, 20)), ("small", corpus(60, 30))], weights=(1, 3))
    pairs = epoch_pairs(mix, epoch=0)
    assert len(pairs) == 1060  # an epoch: as many pairs as both corpora hold
    big = sum(i < 1000 for i in pairs)
    assert (big, len(pairs) - big) == (265, 795)  # 1:3 of 1,060
    counts = Counter(i for i in pairs if i >= 1000)
    assert len(counts) == 60 and set(counts.values()) <= {13, 14}  # 795 / 60: repeated evenly


def test_a_corpus_sampled_below_its_size_is_seen_whole_before_a_pair_repeats():
    mix = Mix([("big", corpus(1000, 20)), ("small", corpus(60, 30))], weights=(1, 3))
    seen = [i for epoch in range(3) for i in epoch_pairs(mix, epoch) if i < 1000]
    assert len(seen) == 795 and len(set(seen)) == 795  # 3 epochs of 265: no pair twice yet
    fourth = [i for i in epoch_pairs(mix, 3) if i < 1000]
    assert len(set(seen + fourth)) == 1000  # the rest of the corpus comes before any repeat


def test_the_sample_depends_on_seed_and_epoch_alone():
    parts = [("a", corpus(300, 20)), ("b", corpus(40, 20))]
    one, two = Mix(parts, (2, 1)), Mix(parts, (2, 1))
    assert epoch_pairs(one, 1) == epoch_pairs(two, 1)
    assert epoch_pairs(one, 1) != epoch_pairs(one, 2)


def test_without_weights_each_pair_is_seen_once_and_one_corpus_batches_as_before():
    single = corpus(500, 25)
    mix = Mix([("only", single)])
    assert [b.tolist() for b in mix.batches(200, 3, 4)] == [b.tolist() for b in
                                                            make_batches(*single.lengths(), 200, 3, 4)]
    both = Mix([("a", corpus(300, 20)), ("b", corpus(40, 20))])
    assert sorted(epoch_pairs(both, 0)) == list(range(340))


def test_rows_of_the_whole_are_the_rows_of_each_corpus():
    a, b = corpus(30, 10), corpus(7, 10)
    mix = Mix([("a", a), ("b", b)], (1, 1))
    assert [mix.source[i] for i in range(37)] == a.source + b.source
    assert [mix.target[i] for i in range(37)] == a.target + b.target
    assert np.array_equal(mix.lengths()[1], np.concatenate([a.lengths()[1], b.lengths()[1]]))


def test_the_mix_is_reported_pair_counts_and_shares():
    mix = Mix([("big.tsv", corpus(1000, 20)), ("multi30k", corpus(60, 30))], weights=(1, 3))
    lines = mix.report()
    assert lines[0] == "mixing 2 corpora: 1,060 pairs an epoch"
    assert lines[1] == "  big.tsv: 1,000 pairs, 25.0% of each epoch (0.27 times its size)"
    assert lines[2] == "  multi30k: 60 pairs, 75.0% of each epoch (13.25 times its size)"
    assert Mix([("one", corpus(10, 5))]).report() == []


def test_an_epoch_holds_exactly_as_many_pairs_as_the_corpora_and_one_corpus_ignores_its_weight():
    mix = Mix([("a", corpus(4, 5)), ("b", corpus(3, 5)), ("c", corpus(3, 5))], weights=(1, 1, 1))
    assert mix.per_epoch.tolist() == [4, 3, 3]  # 10 pairs in thirds: the largest remainder gets one more
    single = corpus(50, 10)
    assert [b.tolist() for b in Mix([("one", single)], (2,)).batches(60, 1, 0)] == \
        [b.tolist() for b in Mix([("one", single)]).batches(60, 1, 0)]


def test_a_corpus_without_pairs_is_an_error():
    with pytest.raises(ValueError, match="b: no pairs to sample"):
        Mix([("a", corpus(10, 5)), ("b", TokenizedCorpus([], []))], (1, 1))


@pytest.mark.parametrize("weights", [(1,), (1, 2, 3)])
def test_weights_must_match_the_corpora(weights):
    with pytest.raises(ValueError, match="weights for 2 corpora"):
        Mix([("a", corpus(10, 5)), ("b", corpus(10, 5))], weights)


def test_a_sampling_temperature_brings_the_shares_closer_to_equal():
    parts = [("big", corpus(900, 10)), ("small", corpus(100, 10))]
    assert Mix(parts).per_epoch.tolist() == [900, 100]  # T = 1: in proportion to size
    assert Mix(parts, temperature=2).per_epoch.tolist() == [750, 250]  # 30:10 = sqrt(900):sqrt(100)
    hot = Mix(parts, temperature=1e9).per_epoch.tolist()
    assert hot == [500, 500]  # T -> infinity: equal shares
    assert "(sampling temperature 2)" in Mix(parts, temperature=2).report()[0]
    with pytest.raises(ValueError, match="not both"):
        Mix(parts, (1, 1), temperature=2)
