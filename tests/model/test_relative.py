"""Relative position representations (model/relative.py, Shaw et al. 2018): the formula, the
property that defines them, cached decoding, the parameter count, and attention maps."""

import pytest
import torch

from aiayn.config import ConfigError, model_config
from aiayn.model import Transformer, parameter_counts
from aiayn.model.attention import attention_reference
from aiayn.model.relative import RelativePositions
from tests.conftest import random_ids, tiny_model

RELATIVE = dict(relative_positions=3, positional="none")


def test_the_kernel_computes_shaws_formula():
    """e_ij = q_i (k_j + a^K_ij) / sqrt(d_k), z_i = sum_j alpha_ij (v_j + a^V_ij), by loops."""
    torch.manual_seed(0)
    rel = RelativePositions(max_distance=2, d_k=4)
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    with torch.no_grad():
        out, weights = attention_reference(q, k, v, relative=rel(3, 5))  # queries at positions 2, 3, 4
        for h in range(2):
            for qi, i in enumerate(range(2, 5)):
                a = [min(max(j - i, -2), 2) + 2 for j in range(5)]
                keys = [k[0, h, j] + rel.keys[a[j]] for j in range(5)]
                e = torch.stack([q[0, h, qi] @ key for key in keys]) / 2  # sqrt(d_k)
                alpha = e.softmax(0)
                z = sum(alpha[j] * (v[0, h, j] + rel.values[a[j]]) for j in range(5))
                assert torch.allclose(weights[0, h, qi], alpha, atol=1e-6)
                assert torch.allclose(out[0, h, qi], z, atol=1e-6)


@pytest.mark.parametrize("positional, invariant", [("none", True), ("sinusoidal", False)])
def test_without_absolute_positions_the_encoder_does_not_see_where_a_sentence_starts(positional, invariant):
    """The defining property: outputs depend on distances only, so the same words shifted right
    (masked padding in front) come out the same; with sinusoids they do not."""
    model = tiny_model(relative_positions=3, positional=positional)
    src = random_ids(1, 9)
    shifted = torch.cat([torch.full((1, 4), model.config.pad_id), src], dim=1)  # 4 positions later
    with torch.no_grad():
        plain, moved = model.encode(src), model.encode(shifted)[:, 4:]
    assert torch.allclose(plain, moved, atol=1e-5) == invariant


@pytest.mark.parametrize("values", [True, False])
def test_cached_decoding_gives_the_logits_of_the_full_decoder(values):
    model = tiny_model(**RELATIVE, relative_values=values)
    src, tgt = random_ids(2, 7), random_ids(2, 9, seed=1)
    src[1, 5:] = model.config.pad_id
    with torch.no_grad():
        memory = model.encode(src)
        full = model.logits(model.decode(tgt, memory, src))  # (B, T, V)
        cache = model.init_cache(memory, capacity=4)  # grows while decoding
        steps = [model.logits(model.decode(tgt[:, i:i + 1], None, src, cache)) for i in range(9)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


@pytest.mark.parametrize("values", [True, False])
def test_the_parameter_count_is_the_formula(values):
    plain = model_config("tiny", vocab_size=50)
    config = model_config("tiny", vocab_size=50, relative_positions=5, relative_values=values)
    added = parameter_counts(Transformer(config))["total"] - parameter_counts(Transformer(plain))["total"]
    layers = config.n_encoder_layers + config.n_decoder_layers  # one table per self-attention
    assert added == layers * (2 * 5 + 1) * config.d_k * (2 if values else 1)


def test_attention_maps_still_come_back():
    model = tiny_model(**RELATIVE)
    src, tgt = random_ids(2, 6), random_ids(2, 4, seed=1)
    with torch.no_grad():
        logits, maps = model.attention_maps(src, tgt)
        assert torch.allclose(logits, model(src, tgt), atol=1e-5)
    assert maps.encoder[0].shape == (2, model.config.n_heads, 6, 6)
    assert maps.decoder[0][0, 0].triu(1).abs().max() == 0  # causal
    assert torch.allclose(maps.cross[0].sum(-1), torch.ones(2, model.config.n_heads, 4))


def test_a_model_without_any_positions_is_refused():
    with pytest.raises(ConfigError, match="positional=none leaves the model blind to word order"):
        model_config("tiny", positional="none")
