import pytest
import torch
from torch._dynamo.utils import counters

from aiayn.decoding import greedy_search
from aiayn.decoding.compiled import row_bucket
from aiayn.decoding.greedy import rows_to_keep
from aiayn.model.cache import KVCache
from tests.conftest import random_ids, tiny_model


def graphs_compiled() -> int:
    return counters["stats"]["unique_graphs"]


def assert_same_search(model, src, limits):
    eager = greedy_search(model, src, limits)
    compiled = greedy_search(model, src, limits, compiled=True)
    assert [h.tokens for h in compiled] == [h.tokens for h in eager]
    assert [h.log_prob for h in compiled] == pytest.approx([h.log_prob for h in eager], abs=1e-4)


def test_compiled_greedy_equals_eager_greedy_with_one_graph_per_row_bucket():
    """3 sentences run as 4 rows (one a finished copy), then as 2 once the first has finished: two
    graphs. A batch of another source length, output length and padding reuses the 4-row graph."""
    model = tiny_model()
    src = random_ids(3, 7)
    before = graphs_compiled()
    assert_same_search(model, src, torch.tensor([3, 7, 7]))
    assert graphs_compiled() - before == 2  # 4 rows, then 2

    src = random_ids(4, 11, seed=1)
    src[1, 6:] = model.config.pad_id  # a padded source
    before = graphs_compiled()
    assert_same_search(model, src, torch.tensor([12, 4, 12, 12]))
    assert graphs_compiled() == before


def test_changed_weights_are_compiled_anew():
    """The weights are constants of a compiled graph: after they change in place, the search uses
    the new ones."""
    model = tiny_model()
    src, limits = random_ids(2, 5, seed=2), torch.tensor([6, 6])
    first = greedy_search(model, src, limits, compiled=True)
    with torch.no_grad():
        model.decoder.layers[0].feed_forward.w1.weight.mul_(3.0)
        model.tgt_embed.weight[7] += 1.0
    assert_same_search(model, src, limits)
    assert [h.log_prob for h in greedy_search(model, src, limits, compiled=True)] != \
        pytest.approx([h.log_prob for h in first], abs=1e-4)


def test_rows_leave_at_power_of_two_counts_when_compiled():
    done = torch.tensor([True, False, True, False, False, True, True, True])
    assert rows_to_keep(done, compiled=True).tolist() == [1, 3, 4, 0]  # unfinished first, topped up
    assert rows_to_keep(~done, compiled=True) is None  # 5 unfinished still need 8 rows: all stay
    assert rows_to_keep(done, compiled=False).tolist() == [1, 3, 4]
    assert [row_bucket(n) for n in (1, 2, 3, 5, 32, 33)] == [1, 2, 4, 8, 32, 64]


def test_the_cache_holds_zeros_after_its_filled_positions():
    """The compiled step attends over the whole capacity under a mask; masked positions must hold
    finite numbers (0 x NaN would be NaN), also after rows are selected into a new buffer."""
    cache = KVCache(3, 2, 4, capacity=6, dtype=torch.float32, device=torch.device("cpu"))
    assert torch.count_nonzero(cache.k) == 0 and torch.count_nonzero(cache.v) == 0
    cache.append(torch.randn(3, 2, 2, 4), torch.randn(3, 2, 2, 4))
    for rows in ([0, 1, 2], [2, 0, 1]):  # the second select may reuse the memory the first freed
        cache.k[:, 2:], cache.v[:, 2:] = float("nan"), float("nan")  # what a reused allocation may hold
        cache.select(torch.tensor(rows))
        for buffer in (cache.k, cache.v):
            assert torch.count_nonzero(buffer[:, 2:]) == 0 and not buffer.isnan().any()
