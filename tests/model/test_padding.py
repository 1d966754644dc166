import pytest
import torch

from aiayn.model.masks import padding_mask
from aiayn.model.padding import Padder
from tests.conftest import random_ids, tiny_model


def ragged_batch(lengths: list[int], width: int) -> torch.Tensor:
    """Source ids with the given real lengths, padded (id 0) to `width`."""
    ids = random_ids(len(lengths), width)
    for row, n in enumerate(lengths):
        ids[row, n:] = 0
    return ids


def test_remove_keeps_the_real_tokens_in_order_and_restore_puts_them_back_with_zeros_at_padding():
    ids = ragged_batch([3, 1, 4], 4)
    padder = Padder.of(ids, pad_id=0)
    x = torch.randn(3, 4, 5)
    real = x[ids != 0]  # (N, 5), row-major order
    assert torch.equal(padder.remove(x), real)
    restored = padder.restore(real)
    assert torch.equal(restored, x * (ids != 0)[:, :, None])
    assert padder.fraction == pytest.approx(1 - 8 / 12)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_encoder_on_real_tokens_only_equals_the_padded_encoder_with_its_gradients(norm_position):
    model = tiny_model(norm_position=norm_position)
    src = ragged_batch([7, 2, 5, 1], 7)
    mask, padder = padding_mask(src, 0), Padder.of(src, 0)
    real = (src != 0)[:, :, None]
    outputs, grads = [], []
    for use in (None, padder):
        model.zero_grad()
        x = model.embed(src, model.src_embed)
        out, _ = model.encoder(x, mask, padder=use)
        (out * real).square().sum().backward()  # a loss over the real positions
        outputs.append(out)
        grads.append([p.grad.clone() for p in model.encoder.parameters()])
    plain, removed = outputs
    assert torch.allclose(removed * real, plain * real, atol=1e-6)
    assert torch.equal(removed * ~real, torch.zeros_like(removed))  # padding positions are zeros
    for g_plain, g_removed in zip(*grads, strict=True):
        assert torch.allclose(g_removed, g_plain, atol=1e-5)


def test_encode_computes_on_real_tokens_only_and_attention_maps_on_every_position():
    model = tiny_model()
    src = ragged_batch([8, 2, 3], 8)
    # Padding positions come back as zeros only where the encoder computed on real tokens only.
    assert torch.all(model.encode(src)[src == 0] == 0)
    _, maps = model.attention_maps(src, random_ids(3, 4, seed=1))
    assert torch.allclose(maps.encoder[0].sum(-1), torch.ones(3, 4, 8))  # padding rows attend too
