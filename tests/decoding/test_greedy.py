import pytest
import torch

import aiayn.decoding.steps as steps_module
from aiayn.decoding import greedy_search, max_output_lengths
from tests.conftest import random_ids, tiny_model


def greedy_without_cache(model, src, steps):
    """Re-run the whole decoder on the prefix at every step: slow, obviously right."""
    memory = model.encode(src)
    tgt = torch.full((src.size(0), 1), model.config.bos_id)
    for _ in range(steps):
        next_token = model.logits(model.decode(tgt, memory, src))[:, -1].argmax(-1, keepdim=True)
        tgt = torch.cat([tgt, next_token], dim=1)
    return tgt[:, 1:].tolist()


def test_cached_greedy_equals_greedy_by_full_re_runs():
    model = tiny_model()
    src = random_ids(4, 6)
    fixed = max_output_lengths(src, 0, fixed=8)
    expected = greedy_without_cache(model, src, 8)
    for hyp, full in zip(greedy_search(model, src, fixed), expected, strict=True):
        assert hyp.tokens == (full[: full.index(3)] if 3 in full else full)


def test_output_does_not_depend_on_the_batch():
    model = tiny_model()
    src = random_ids(6, 7)
    src[2, 4:] = 0  # a shorter sentence, padded
    together = [h.tokens for h in greedy_search(model, src)]
    alone = [greedy_search(model, src[i:i + 1, : (src[i] != 0).sum()])[0].tokens for i in range(6)]
    assert together == alone


def test_finished_rows_leaving_the_batch_change_nothing(monkeypatch):
    model = tiny_model()
    src = random_ids(9, 7)
    limits = torch.tensor([2, 9, 4, 12, 1, 7, 3, 10, 5])  # rows finish at different steps
    results = []
    for leave_at in (1, 10**9):  # never leave (rows stay to the end); leave at once
        monkeypatch.setattr(steps_module, "LEAVE_AT", leave_at)
        results.append(greedy_search(model, src, limits))
    staying, leaving = results
    assert [h.tokens for h in leaving] == [h.tokens for h in staying]
    assert all(len(h.tokens) <= n for n, h in zip(limits.tolist(), leaving, strict=True))
    assert [h.log_prob for h in leaving] == pytest.approx([h.log_prob for h in staying], abs=1e-5)


def test_stops_at_the_papers_maximum_length_source_plus_50():
    model = tiny_model()
    src = random_ids(2, 5)
    with torch.no_grad():  # make eos impossible, so only the length limit stops decoding
        model.output_proj.weight[3] = -100.0
    hyps = greedy_search(model, src)
    assert [len(h.tokens) for h in hyps] == [55, 55]
    assert max_output_lengths(src, 0).tolist() == [55, 55]


def test_training_works_after_decoding_made_new_positions():
    """Decoding runs in inference mode: what it leaves behind (memoised positional encodings for
    longer sequences than training has seen) must still serve training."""
    model = tiny_model()
    src = random_ids(2, 5)
    greedy_search(model, src, max_output_lengths(src, 0, fixed=300))
    model.train()
    model(src, random_ids(2, 200, seed=1)).sum().backward()
    assert model.src_embed.weight.grad is not None
