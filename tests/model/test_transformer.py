
import pytest
import torch

from aiayn.config import model_config
from aiayn.model import Transformer, parameter_counts
from tests.conftest import random_ids, tiny_model


def test_shapes_of_encode_decode_logits_and_forward():
    model = tiny_model()
    src, tgt = random_ids(3, 7), random_ids(3, 5, seed=1)
    memory = model.encode(src)
    assert memory.shape == (3, 7, 64)
    hidden = model.decode(tgt, memory, src)
    assert hidden.shape == (3, 5, 64)
    assert model.logits(hidden).shape == (3, 5, 50)
    assert model(src, tgt).shape == (3, 5, 50)
    log_probs = model.log_probs(hidden)
    assert torch.allclose(log_probs.exp().sum(-1), torch.ones(3, 5), atol=1e-5)


@pytest.mark.parametrize("norm_position", ["post", "pre"])
def test_source_padding_never_changes_outputs_at_real_positions(norm_position):
    model = tiny_model(norm_position=norm_position)
    src, tgt = random_ids(2, 6), random_ids(2, 4, seed=1)
    padded_src = torch.cat([src, torch.zeros(2, 5, dtype=torch.long)], dim=1)  # 5 pads (id 0)
    assert torch.allclose(model.encode(padded_src)[:, :6], model.encode(src), atol=1e-5)
    assert torch.allclose(model(padded_src, tgt), model(src, tgt), atol=1e-5)


def test_target_padding_never_changes_outputs_at_real_positions():
    model = tiny_model()
    src, tgt = random_ids(2, 6), random_ids(2, 4, seed=1)
    padded_tgt = torch.cat([tgt, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    assert torch.allclose(model(src, padded_tgt)[:, :4], model(src, tgt), atol=1e-5)


def test_changing_a_future_target_token_never_changes_earlier_outputs():
    model = tiny_model()
    src, tgt = random_ids(2, 6), random_ids(2, 8, seed=1)
    before = model(src, tgt)
    changed = tgt.clone()
    changed[:, 5] = (changed[:, 5] + 7) % 46 + 4
    after = model(src, changed)
    assert torch.allclose(after[:, :5], before[:, :5], atol=1e-6)
    assert not torch.allclose(after[:, 5:], before[:, 5:], atol=1e-3)


def test_incremental_decoding_with_cache_equals_full_decoder():
    model = tiny_model()
    src, tgt = random_ids(3, 7), random_ids(3, 9, seed=1)
    memory = model.encode(src)
    full = model.logits(model.decode(tgt, memory, src))
    cache = model.init_cache(memory, capacity=2)  # small on purpose: it must grow
    steps = [model.logits(model.decode(tgt[:, i:i + 1], None, src, cache)) for i in range(9)]
    assert cache.length == 9
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_tied_weights_are_one_tensor_three_ways():
    model = Transformer(model_config("tiny"))
    assert model.src_embed.weight is model.tgt_embed.weight
    assert model.output_proj.weight is model.tgt_embed.weight
    untied = Transformer(model_config("tiny", share_embeddings=False, tie_output=False))
    assert untied.src_embed.weight is not untied.tgt_embed.weight
    assert untied.output_proj.weight is not untied.tgt_embed.weight
    v, d = 512, 64
    assert parameter_counts(untied)["total"] - parameter_counts(model)["total"] == 2 * v * d


def test_base_preset_with_37000_shared_vocabulary_has_about_63m_parameters():
    counts = parameter_counts(Transformer(model_config("base", vocab_size=37_000)))
    assert 62.5e6 < counts["total"] < 63.5e6  # the paper reports 65M
    assert counts["target embedding"] == counts["output projection"] == 0


def test_dropout_acts_in_each_of_its_places():
    src, tgt = random_ids(2, 6), random_ids(2, 5, seed=1)
    places = {"dropout": 0.5, "attention_dropout": 0.5, "activation_dropout": 0.5}
    for name, p in places.items():
        model = tiny_model(**{k: (p if k == name else 0.0) for k in places}).train()
        assert not torch.equal(model(src, tgt), model(src, tgt)), name
    model = tiny_model(dropout=0.0, attention_dropout=0.0, activation_dropout=0.0).train()
    assert torch.equal(model(src, tgt), model(src, tgt))


def test_post_norm_normalises_each_layer_output_and_pre_norm_the_stack_output():
    for norm_position in ("post", "pre"):
        model = tiny_model(norm_position=norm_position)
        memory = model.encode(random_ids(2, 6))
        # LayerNorm with its initial affine (1, 0): zero mean, unit variance per position.
        assert torch.allclose(memory.mean(-1), torch.zeros(2, 6), atol=1e-5)
        assert torch.allclose(memory.var(-1, unbiased=False), torch.ones(2, 6), atol=1e-3)
    assert isinstance(tiny_model(norm_position="post").encoder.final_norm, torch.nn.Identity)


def test_attention_maps_are_the_weights_of_the_forward_pass():
    model = tiny_model()
    src = torch.cat([random_ids(2, 5), torch.zeros(2, 2, dtype=torch.long)], dim=1)
    tgt = random_ids(2, 4, seed=1)
    logits, maps = model.attention_maps(src, tgt)
    assert torch.allclose(logits, model(src, tgt), atol=1e-5)
    assert len(maps.encoder) == len(maps.decoder) == len(maps.cross) == 2
    assert maps.encoder[0].shape == (2, 4, 7, 7) and maps.cross[0].shape == (2, 4, 4, 7)
    for w in maps.encoder + maps.decoder + maps.cross:
        assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-5)
    for w in maps.encoder + maps.cross:
        assert (w[..., 5:] == 0).all()  # source padding gets no attention
    for w in maps.decoder:
        assert (w.triu(diagonal=1) == 0).all()


def test_learned_positions_and_gelu_options_build_and_run():
    model = tiny_model(positional="learned", max_positions=16, activation="gelu", pe_layout="concatenated")
    assert parameter_counts(model)["positions"] == 16 * 64
    assert model(random_ids(1, 6), random_ids(1, 4)).shape == (1, 4, 50)


def test_returned_encoder_weights_are_those_the_forward_pass_computes():
    model = tiny_model()
    src = torch.cat([random_ids(2, 5), torch.zeros(2, 2, dtype=torch.long)], dim=1)
    _, maps = model.attention_maps(src, random_ids(2, 3, seed=1))
    # Layer 1 by hand: softmax(Q K^T / sqrt(d_k)) over the embedded source, padding at -inf.
    x = model.embed(src, model.src_embed)
    attn = model.encoder.layers[0].self_attn
    q, k, _ = attn.project_qkv(x)  # (B, H, S, K)
    scores = q @ k.transpose(-2, -1) / 16**0.5
    scores = scores.masked_fill((src == 0)[:, None, None, :], float("-inf"))
    assert torch.allclose(maps.encoder[0], scores.softmax(-1), atol=1e-6)


@torch.no_grad()
def test_attention_weights_are_the_maps_of_attention_maps_without_its_output_layer():
    model = tiny_model().eval()
    src, tgt = random_ids(2, 5), random_ids(2, 3, seed=1)
    _, maps = model.attention_maps(src, tgt)
    alone = model.attention_weights(src, tgt)
    for kind in ("encoder", "decoder", "cross"):
        assert all(torch.equal(a, b) for a, b in zip(getattr(alone, kind), getattr(maps, kind), strict=True))
    assert model.attention_weights(src, tgt, encoder=False).cross[0].shape == (2, model.config.n_heads, 3, 5)
