import torch

from aiayn.model.masks import causal_mask, padding_mask


def test_padding_mask_marks_real_tokens_and_broadcasts_over_heads_and_queries():
    ids = torch.tensor([[5, 6, 0, 0], [7, 8, 9, 3]])
    mask = padding_mask(ids, pad_id=0)
    assert mask.shape == (2, 1, 1, 4)
    assert mask[:, 0, 0].tolist() == [[True, True, False, False], [True, True, True, True]]


def test_causal_mask_lets_position_i_see_only_keys_up_to_i():
    mask = causal_mask(4)[0, 0]
    assert mask.shape == (4, 4)
    for i in range(4):
        for j in range(4):
            assert mask[i, j].item() == (j <= i)


def test_causal_mask_for_new_positions_after_a_cache():
    # 2 new queries after 3 cached positions: query 0 is position 3, query 1 is position 4.
    mask = causal_mask(2, 5)[0, 0]
    assert mask.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
