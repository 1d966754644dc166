import pytest
import torch

import aiayn.decoding.greedy as greedy_module
from aiayn.decoding import greedy_search
from aiayn.model.cache import KVCache
from tests.conftest import random_ids, tiny_model


def test_compiled_greedy_equals_eager_greedy_as_rows_leave_and_batches_change(monkeypatch):
    """One compilation serves batches of other sizes and source lengths, and rows leaving the batch
    (a smaller batch, the cache compacted) mid-way; tokens are the same as eager decoding's and
    log-probabilities equal within float32 rounding."""
    monkeypatch.setattr(greedy_module, "LEAVE_AT", 1)  # rows leave as soon as any finishes
    model = tiny_model()
    batches = [(random_ids(9, 7), torch.tensor([2, 9, 4, 12, 1, 7, 3, 10, 5])),
               (random_ids(4, 11, seed=1), torch.tensor([6, 3, 8, 8]))]
    batches[1][0][1, 6:] = model.config.pad_id  # a padded source
    for src, limits in batches:
        eager = greedy_search(model, src, limits)
        compiled = greedy_search(model, src, limits, compiled=True)
        assert [h.tokens for h in compiled] == [h.tokens for h in eager]
        assert [h.log_prob for h in compiled] == pytest.approx([h.log_prob for h in eager], abs=1e-4)


def test_compacting_the_cache_leaves_zeros_after_the_filled_positions():
    """The compiled step attends over the whole capacity with a mask; masked positions must hold
    finite numbers (0 x NaN would be NaN), so the cache is zeros beyond its filled positions."""
    cache = KVCache(3, 2, 4, capacity=6, dtype=torch.float32, device=torch.device("cpu"))
    assert torch.count_nonzero(cache.k) == 0
    cache.append(torch.randn(3, 2, 2, 4), torch.randn(3, 2, 2, 4))
    for rows in ([0, 1, 2], [2, 0, 1]):  # the second select reuses the memory the first freed
        cache.k[:, 2:] = float("nan")  # what a reused allocation may hold
        cache.select(torch.tensor(rows))
        assert torch.count_nonzero(cache.k[:, 2:]) == 0 and not cache.k.isnan().any()
