import pytest
import torch

from aiayn.model.attention import MultiHeadAttention, attention, attention_reference
from aiayn.model.masks import causal_mask, padding_mask


def qkv(b=2, h=4, tq=5, tk=7, k=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, tq, k, generator=g), torch.randn(b, h, tk, k, generator=g),
            torch.randn(b, h, tk, k, generator=g))


def test_reference_is_softmax_of_scaled_scores_times_values():
    q, k, v = qkv()
    out, weights = attention_reference(q, k, v)
    expected = torch.softmax(q @ k.transpose(-2, -1) / 8**0.5, dim=-1)
    assert torch.allclose(weights, expected, atol=1e-6)
    assert torch.allclose(out, expected @ v, atol=1e-6)


def test_fast_path_equals_reference_path_with_a_padding_mask():
    q, k, v = qkv()
    mask = padding_mask(torch.tensor([[5, 5, 5, 5, 5, 5, 5], [5, 5, 5, 0, 0, 0, 0]]), 0)
    fast, no_weights = attention(q, k, v, mask)
    ref, weights = attention(q, k, v, mask, need_weights=True)
    assert no_weights is None
    assert torch.allclose(fast, ref, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(2, 4, 5), atol=1e-6)
    assert (weights[1, :, :, 3:] == 0).all()  # masked keys get exactly zero weight


def test_training_in_bfloat16_on_the_cpu_attends_in_float32():
    q, k, v = (t.bfloat16().requires_grad_() for t in qkv())
    mask = padding_mask(torch.tensor([[5, 6, 7, 8, 9, 0, 0], [5, 6, 7, 8, 9, 10, 11]]), 0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = attention(q, k, v, mask)
    in_float32 = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                                  attn_mask=mask)
    assert out.dtype == torch.bfloat16 and torch.equal(out, in_float32.bfloat16())
    out.float().sum().backward()
    assert q.grad.dtype == torch.bfloat16


def test_causal_weights_are_lower_triangular():
    q, k, v = qkv(tq=6, tk=6)
    mask = causal_mask(6)
    _, weights = attention(q, k, v, mask, need_weights=True)
    assert (weights.triu(diagonal=1) == 0).all()
    assert (weights[mask.expand_as(weights)] > 0).all()


@pytest.mark.parametrize("heads", [1, 2, 4, 8, 16])
def test_multi_head_attention_has_4d2_plus_4d_parameters_whatever_the_heads(heads):
    d = 64
    mha = MultiHeadAttention(d, heads)
    assert sum(p.numel() for p in mha.parameters()) == 4 * d * d + 4 * d


def torch_mha_like(mha: MultiHeadAttention) -> torch.nn.MultiheadAttention:
    ref = torch.nn.MultiheadAttention(mha.d_model, mha.n_heads, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(mha.in_proj.weight)  # the same [W^Q; W^K; W^V] layout
        ref.in_proj_bias.copy_(mha.in_proj.bias)
        ref.out_proj.weight.copy_(mha.out_proj.weight)
        ref.out_proj.bias.copy_(mha.out_proj.bias)
    return ref.eval()


def test_self_attention_matches_torch_multihead_attention_with_padding():
    torch.manual_seed(0)
    mha = MultiHeadAttention(32, 4).eval()
    ref = torch_mha_like(mha)
    x = torch.randn(3, 6, 32)
    ids = torch.tensor([[5] * 6, [5] * 4 + [0] * 2, [5] + [0] * 5])
    ours, our_weights = mha(x, mask=padding_mask(ids, 0), need_weights=True)
    theirs, their_weights = ref(x, x, x, key_padding_mask=ids == 0, average_attn_weights=False)
    assert torch.allclose(ours, theirs, atol=1e-5)
    assert torch.allclose(our_weights, their_weights, atol=1e-6)


def test_causal_self_attention_matches_torch_multihead_attention():
    torch.manual_seed(1)
    mha = MultiHeadAttention(32, 8).eval()
    ref = torch_mha_like(mha)
    x = torch.randn(2, 5, 32)
    ours, _ = mha(x, mask=causal_mask(5))
    theirs, _ = ref(x, x, x, attn_mask=~causal_mask(5)[0, 0])  # torch: True = masked out
    assert torch.allclose(ours, theirs, atol=1e-5)


def test_cross_attention_matches_torch_multihead_attention():
    torch.manual_seed(2)
    mha = MultiHeadAttention(32, 4).eval()
    ref = torch_mha_like(mha)
    x, memory = torch.randn(2, 3, 32), torch.randn(2, 7, 32)
    src = torch.tensor([[5] * 7, [5] * 2 + [0] * 5])
    ours, _ = mha(x, memory, mask=padding_mask(src, 0))
    theirs, _ = ref(x, memory, memory, key_padding_mask=src == 0)
    assert torch.allclose(ours, theirs, atol=1e-5)
