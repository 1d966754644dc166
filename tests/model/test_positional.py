import math

import pytest
import torch

from aiayn.model.positional import LearnedPositionalEmbedding, SinusoidalPositionalEncoding, sinusoids


def test_values_match_the_papers_formula_interleaved():
    d = 16
    pe = SinusoidalPositionalEncoding(d)(50)
    for pos in (0, 1, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_concatenated_layout_puts_all_sines_then_all_cosines():
    d = 16
    inter = sinusoids(torch.arange(30), d, "interleaved")
    concat = sinusoids(torch.arange(30), d, "concatenated")
    assert torch.equal(concat[:, : d // 2], inter[:, 0::2])
    assert torch.equal(concat[:, d // 2:], inter[:, 1::2])


def rotation(k: int, d: int) -> torch.Tensor:
    """The fixed matrix M_k with PE(pos + k) = M_k PE(pos) (interleaved layout), from the formula."""
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        w = k / 10000 ** (2 * i / d)
        # sin(a + w) = sin a cos w + cos a sin w;  cos(a + w) = cos a cos w - sin a sin w
        m[2 * i, 2 * i], m[2 * i, 2 * i + 1] = math.cos(w), math.sin(w)
        m[2 * i + 1, 2 * i], m[2 * i + 1, 2 * i + 1] = -math.sin(w), math.cos(w)
    return m


@pytest.mark.parametrize("k", [1, 5, 37])
def test_pe_of_pos_plus_k_is_a_fixed_linear_function_of_pe_of_pos(k):
    d = 32
    pe = sinusoids(torch.arange(200 + k), d)  # float64
    m = rotation(k, d)
    predicted = pe[:200] @ m.T  # row pos -> M_k PE(pos)
    assert torch.allclose(predicted, pe[k:200 + k], atol=1e-9)
    # Fitting one matrix to all positions by least squares leaves no residual either.
    fitted = torch.linalg.lstsq(pe[:200], pe[k:200 + k], driver="gelsd").solution  # SVD-based
    assert torch.allclose(pe[:200] @ fitted, pe[k:200 + k], atol=1e-6)


def test_works_for_any_length_and_offset_without_a_table():
    pe = SinusoidalPositionalEncoding(64)
    long = pe(10_000)
    assert long.shape == (10_000, 64) and torch.isfinite(long).all()
    assert long.abs().max() <= 1.0
    # An offset window equals the same rows of the full sequence (incremental decoding).
    assert torch.allclose(pe(5, offset=9_000), long[9_000:9_005], atol=1e-6)
    assert list(pe.parameters()) == [] and list(pe.buffers()) == []


def test_learned_positions_are_parameters_limited_to_max_positions():
    learned = LearnedPositionalEmbedding(max_positions=10, d_model=8)
    assert learned(4, offset=6).shape == (4, 8)
    assert sum(p.numel() for p in learned.parameters()) == 80
    with pytest.raises(ValueError, match="beyond the 10 learned positions"):
        learned(5, offset=6)
