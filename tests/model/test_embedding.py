import math

import torch

from aiayn.model.embedding import TokenEmbedding


def test_embedding_is_the_weight_row_times_sqrt_d_model():
    emb = TokenEmbedding(100, 64)
    ids = torch.tensor([[3, 7, 99]])
    assert torch.allclose(emb(ids)[0], emb.weight[[3, 7, 99]] * math.sqrt(64))


def test_initialisation_n_0_dinv_gives_unit_variance_after_scaling():
    torch.manual_seed(0)
    d = 512
    emb = TokenEmbedding(20_000, d)
    assert abs(emb.weight.std().item() - d**-0.5) < 0.01 * d**-0.5
    scaled = emb(torch.arange(20_000)[None])
    assert abs(scaled.var().item() - 1.0) < 0.02
