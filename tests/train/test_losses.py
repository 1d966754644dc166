import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.train.losses import label_smoothed_nll, output_layer_nll


def test_label_smoothed_loss_equals_hand_computed_value():
    # Row 0: probabilities (1/4, 1/2, 1/4), reference token 1. Row 1 is padding (target id 0).
    logits = torch.tensor([[0.0, math.log(2.0), 0.0], [5.0, 1.0, -3.0]])
    target = torch.tensor([1, 0])
    loss, nll = label_smoothed_nll(logits, target, epsilon=0.1, ignore_index=0)
    # nll = -log(1/2); smoothing term = mean over the 3 classes of -log p = (log 4 + log 2 + log 4) / 3
    expected_nll = math.log(2.0)
    expected = 0.9 * math.log(2.0) + 0.1 * (5 * math.log(2.0) / 3)
    assert math.isclose(nll.item(), expected_nll, rel_tol=1e-6)
    assert math.isclose(loss.item(), expected, rel_tol=1e-6)


def test_matches_torch_cross_entropy_with_label_smoothing_and_ignores_padding():
    g = torch.Generator().manual_seed(0)
    logits, target = torch.randn(20, 11, generator=g), torch.randint(0, 11, (20,), generator=g)
    loss, nll = label_smoothed_nll(logits, target, epsilon=0.1, ignore_index=0)
    ref = F.cross_entropy(logits, target, label_smoothing=0.1, ignore_index=0, reduction="sum")
    assert torch.allclose(loss, ref, atol=1e-5)
    assert torch.allclose(nll, F.cross_entropy(logits, target, ignore_index=0, reduction="sum"), atol=1e-5)


def test_epsilon_zero_is_plain_negative_log_likelihood():
    logits, target = torch.randn(5, 7), torch.tensor([1, 2, 3, 4, 5])
    loss, nll = label_smoothed_nll(logits, target, epsilon=0.0, ignore_index=0)
    assert torch.allclose(loss, nll)


@pytest.mark.parametrize("with_bias", [False, True])
def test_chunked_output_layer_loss_and_gradients_equal_the_plain_path(with_bias):
    g = torch.Generator().manual_seed(0)
    n, d, v = 23, 8, 13  # 23 positions in chunks of 5: the last chunk is short
    hidden = torch.randn(n, d, generator=g, requires_grad=True)
    weight = torch.randn(v, d, generator=g, requires_grad=True)
    bias = torch.randn(v, generator=g, requires_grad=True) if with_bias else None
    target = torch.randint(0, v, (n,), generator=g)
    target[[3, 11, 22]] = 0  # padding
    params = [t for t in (hidden, weight, bias) if t is not None]

    loss, nll = label_smoothed_nll(F.linear(hidden, weight, bias), target, epsilon=0.1, ignore_index=0)
    (3.0 * loss).backward()
    expected = [t.grad.clone() for t in params]
    for t in params:
        t.grad = None
    fused_loss, fused_nll = output_layer_nll(hidden, weight, bias, target, 0.1, 0, chunk=5)
    (3.0 * fused_loss).backward()

    assert torch.allclose(fused_loss, loss, atol=1e-5) and torch.allclose(fused_nll, nll, atol=1e-5)
    for t, grad in zip(params, expected, strict=True):
        assert torch.allclose(t.grad, grad, atol=1e-5)
    assert torch.count_nonzero(expected[0][[3, 11, 22]]) == 0  # padding rows get no gradient


def test_chunked_output_layer_loss_without_gradients_gives_the_same_sums():
    hidden, weight, target = torch.randn(9, 4), torch.randn(6, 4), torch.tensor([1, 2, 0, 5, 4, 3, 0, 1, 2])
    with torch.no_grad():
        loss, nll = output_layer_nll(hidden, weight, None, target, 0.1, 0, chunk=4)
    ref_loss, ref_nll = label_smoothed_nll(hidden @ weight.t(), target, 0.1, 0)
    assert torch.allclose(loss, ref_loss, atol=1e-5) and torch.allclose(nll, ref_nll, atol=1e-5)


def test_output_layer_in_bfloat16_matmuls_keeps_float32_sums_and_gradients():
    """The GPU policy (matmuls in the autocast precision), run on the CPU: same sums and gradients
    as float32 within bfloat16 rounding; the weight's and bias's gradients stay float32."""
    g = torch.Generator().manual_seed(3)
    n, d, v = 40, 16, 50  # chunks of 16: three, the last one short
    hidden = torch.randn(n, d, generator=g, requires_grad=True)
    weight = torch.randn(v, d, generator=g, requires_grad=True)
    bias = torch.randn(v, generator=g, requires_grad=True)
    target = torch.randint(1, v, (n,), generator=g)
    target[[0, 17]] = 0  # padding
    params = (hidden, weight, bias)

    loss, nll = output_layer_nll(hidden, weight, bias, target, 0.1, 0, chunk=16)
    loss.backward()
    expected = [t.grad.clone() for t in params]
    for t in params:
        t.grad = None
    low_loss, low_nll = output_layer_nll(hidden, weight, bias, target, 0.1, 0, chunk=16,
                                         matmul_dtype=torch.bfloat16)
    low_loss.backward()

    assert low_loss.dtype == low_nll.dtype == torch.float32
    assert not torch.equal(low_loss, loss)  # the matmuls did run in bfloat16
    assert torch.allclose(low_loss, loss, rtol=1e-2) and torch.allclose(low_nll, nll, rtol=1e-2)
    for t, grad in zip(params, expected, strict=True):
        assert t.grad.dtype == torch.float32
        assert (t.grad - grad).norm() / grad.norm() < 2e-2
    assert torch.count_nonzero(hidden.grad[[0, 17]]) == 0


def test_output_layer_on_cpu_under_autocast_stays_float32():
    hidden, weight, target = torch.randn(9, 4), torch.randn(6, 4), torch.tensor([1, 2, 0, 5, 4, 3, 0, 1, 2])
    plain = output_layer_nll(hidden, weight, None, target, 0.1, 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        autocast = output_layer_nll(hidden, weight, None, target, 0.1, 0)
    assert torch.equal(plain[0], autocast[0]) and torch.equal(plain[1], autocast[1])
