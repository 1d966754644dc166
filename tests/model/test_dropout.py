import pytest
import torch

from aiayn.model.dropout import Dropout


def test_drops_about_p_of_the_elements_and_scales_the_rest_to_keep_the_mean():
    torch.manual_seed(0)
    x = torch.rand(1001, 999) + 0.5  # an odd number of elements: the last draw is only partly used
    y = Dropout(0.1).train()(x)
    dropped = y == 0
    assert abs(dropped.float().mean().item() - 0.1) < 0.002
    assert torch.equal(y[~dropped], x[~dropped] * (32768 / (32768 - 3277)))  # p rounded to 15 bits
    assert abs(y.mean().item() / x.mean().item() - 1.0) < 0.003


def test_each_random_lane_is_uniform():
    """Four elements share one 64-bit draw; every position within a group must drop at rate p."""
    torch.manual_seed(1)
    y = Dropout(0.3).train()(torch.ones(400_000, 4))
    rates = (y == 0).float().mean(dim=0)
    assert torch.allclose(rates, torch.full((4,), 0.3), atol=0.004)


def test_identity_in_eval_and_with_p_zero():
    x = torch.randn(64, 32)
    assert torch.equal(Dropout(0.5).eval()(x), x)
    assert torch.equal(Dropout(0.0).train()(x), x)


def test_gradient_flows_only_through_kept_elements_and_seeds_repeat_the_mask():
    x = torch.randn(300, 70, requires_grad=True)
    torch.manual_seed(3)
    y = Dropout(0.2).train()(x)
    y.sum().backward()
    kept = y != 0
    assert torch.all(x.grad[~kept] == 0)
    assert torch.allclose(x.grad[kept], torch.tensor(32768 / (32768 - 6554)))
    torch.manual_seed(3)
    assert torch.equal(Dropout(0.2).train()(x), y)


def test_bfloat16_keeps_its_type_and_scales_each_kept_element_by_the_exact_factor():
    torch.manual_seed(4)
    x = (torch.rand(500, 400) + 0.5).bfloat16()
    y = Dropout(0.1).train()(x)
    kept = y != 0
    assert y.dtype == torch.bfloat16 and abs((~kept).float().mean().item() - 0.1) < 0.003
    assert torch.equal(y[kept], (x[kept] * (32768 / (32768 - 3277))))  # not a bfloat16-rounded factor


def test_rejects_probabilities_outside_zero_to_one():
    with pytest.raises(ValueError, match="dropout probability"):
        Dropout(1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_output_and_gradient_equal_scaling_then_zeroing_the_dropped_elements(dtype):
    x = torch.randn(301, 77).to(dtype).requires_grad_()
    dropout = Dropout(0.1).train()
    torch.manual_seed(6)
    y = dropout(x)
    y.backward(torch.ones_like(y))
    dropped = y == 0
    expected = (x.detach() * dropout.scale).masked_fill(dropped, 0.0)
    assert torch.equal(y.detach(), expected)
    assert torch.equal(x.grad, torch.full_like(x, dropout.scale).masked_fill(dropped, 0.0))
