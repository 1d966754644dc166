"""The decoder's key/value cache (model/cache.py): what it holds after each operation equals what
decoding every row from the start would hold."""

import torch

from tests.conftest import random_ids, tiny_model


def test_rows_sharing_a_source_decode_as_if_each_had_its_own_copy():
    """Beam search keeps a sentence's cross-attention keys and values once for its R rows."""
    model, r = tiny_model(), 3
    src, tgt = random_ids(2, 7), random_ids(2 * r, 6, seed=1)
    src[0, 5:] = model.config.pad_id  # padding must stay masked for every row of the sentence
    shared = model.init_cache(model.encode(src), capacity=8, rows_per_sentence=r)
    copied_src = src.repeat_interleave(r, dim=0)  # (2R, S): one copy of the source per row
    copied = model.init_cache(model.encode(copied_src), capacity=8)
    for i in range(6):
        if i == 3:  # the first sentence leaves the batch
            shared.select(torch.tensor([1]))
            copied.select(torch.tensor([3, 4, 5]))
            src, copied_src, tgt = src[1:], copied_src[r:], tgt[r:]
        mine = model.logits(model.decode(tgt[:, i:i + 1], None, src, shared))
        reference = model.logits(model.decode(tgt[:, i:i + 1], None, copied_src, copied))
        assert torch.allclose(mine, reference, atol=1e-5)
    assert len(shared.cross_attn[0][0]) == 1 and len(shared.self_attn[0].k) == r


def test_reordering_the_cache_gives_each_row_the_history_of_the_row_it_continues():
    model = tiny_model()
    src, tgt = random_ids(2, 5), random_ids(4, 3, seed=1)
    cache = model.init_cache(model.encode(src), capacity=8, rows_per_sentence=2)
    for i in range(3):
        model.decode(tgt[:, i:i + 1], None, src, cache)
    before = [tuple(t.clone() for t in kv.filled()) for kv in cache.self_attn]  # each (4, H, 3, K)
    rows = torch.tensor([1, 1, 2, 2])  # row 0 continues row 1; row 3 continues row 2; rows 1, 2 stay
    cache.reorder(rows)
    for kv, (k, v) in zip(cache.self_attn, before, strict=True):
        assert torch.equal(kv.filled()[0], k[rows]) and torch.equal(kv.filled()[1], v[rows])
    cache.reorder(torch.arange(4))  # nothing moves
    assert torch.equal(cache.self_attn[0].filled()[0], before[0][0][rows])


def test_fanning_out_a_cache_equals_decoding_every_row_from_the_start():
    model = tiny_model()
    src, tgt = random_ids(2, 5), random_ids(2, 3, seed=1)
    fanned = model.init_cache(model.encode(src), capacity=8)  # one row per sentence, then 3
    wide = model.init_cache(model.encode(src), capacity=8, rows_per_sentence=3)
    for i in range(2):  # two steps alike for the 3 rows of a sentence
        model.decode(tgt[:, i:i + 1], None, src, fanned)
        model.decode(tgt[:, i:i + 1].repeat_interleave(3, 0), None, src, wide)
    fanned.fan_out(3)
    assert fanned.rows_per_sentence == 3 and len(fanned.self_attn[0].k) == 6
    nxt = random_ids(6, 1, seed=2)  # each of the 6 rows goes its own way from here
    mine = model.logits(model.decode(nxt, None, src, fanned))
    reference = model.logits(model.decode(nxt, None, src, wide))
    assert torch.allclose(mine, reference, atol=1e-5)
