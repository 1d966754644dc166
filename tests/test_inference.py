import copy
import os
import warnings
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from aiayn.decoding import beam_search, greedy_search
from aiayn.decoding.compiled import CompiledStep
from aiayn.decoding.step_graph import graphs
from aiayn.inference import (
    PACK_AFTER,
    Int8Linear,
    MKLPackedLinear,
    OneDNNInt8Linear,
    int8_saturates,
    pack_for_cpu,
    packing_available,
    quantize_int8,
    weights_by_column,
)
from aiayn.translation import prepare
from tests.conftest import source_ids

needs_mkl = pytest.mark.skipif(not packing_available(torch.float32), reason="no MKL packed matmul here")
needs_onednn_bf16 = pytest.mark.skipif(not packing_available(torch.bfloat16),
                                       reason="no oneDNN bfloat16 matmul here")


def _batch(tokenizer, sources):
    return source_ids(tokenizer, sources), torch.full((len(sources), 1), tokenizer.bos_id)


def test_int8_model_translates_like_the_float_model(reverse_model):
    model, tokenizer, sources = reverse_model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch's deprecation notices stay inside quantize_int8
        int8 = quantize_int8(model)
    src, tgt = _batch(tokenizer, sources[:100])
    with torch.no_grad():
        float_logits, int8_logits = model(src, tgt), int8(src, tgt)
    assert (int8_logits - float_logits).abs().max() < 0.05 * float_logits.abs().max()
    pairs = zip(greedy_search(int8, src), greedy_search(model, src), strict=True)
    same = sum(a.tokens == b.tokens for a, b in pairs)
    assert same >= 90  # int8 rounding may flip a few near ties
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the original is untouched
    assert type(int8.decoder.layers[0].feed_forward.w1).__module__.startswith("torch.ao.nn.quantized")


def _quantized_maths(x, weight, bias, top=255):
    """int8 weights with a scale per output feature, x on a uint8 grid (0..top) spanning its range
    and 0."""
    w_scale = weight.abs().amax(dim=1) / 127
    lo, hi = min(x.min().item(), 0.0), max(x.max().item(), 0.0)
    x_scale = (hi - lo) / top
    zero = round(-lo / x_scale)
    x_grid = (torch.clamp(torch.round(x / x_scale) + zero, 0, top) - zero) * x_scale
    return F.linear(x_grid, torch.round(weight / w_scale[:, None]) * w_scale[:, None], bias)


def test_the_int8_layers_avoid_overflow_where_the_kernels_add_products_in_int16():
    """Under ONEDNN_MAX_CPU_ISA=AVX2 (no VNNI), 8-bit x 8-bit products overflow int16 sums; the
    probe says so and the layers keep one operand to 7 bits; elsewhere they use all 8."""
    int8_saturates.cache_clear()
    weight = torch.randn(4, 8)
    seven_bits = int8_saturates()
    assert (Int8Linear(weight, None).weight_max, OneDNNInt8Linear(weight, None).quant_max) == \
        ((63, 127) if seven_bits else (127, 255))
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in ("AVX2", "AVX", "SSE41"):
        assert seven_bits


@torch.inference_mode()
def test_onednn_int8_linear_eagerly_and_compiled_computes_int8_maths_with_onednn():
    """Eagerly and compiled by Inductor with freezing, the layer computes the quantized maths, and
    the compiled graph multiplies with oneDNN's int8 matmul (not a float matmul of dequantized
    weights)."""
    torch.manual_seed(0)
    weight, bias = torch.randn(300, 64) * 0.1, torch.randn(300)
    layer = OneDNNInt8Linear(weight, bias)
    x = torch.randn(4, 2, 64)  # (N, 1, I)-like: leading dimensions are flattened and restored
    expected = _quantized_maths(x.view(8, 64), weight, bias, layer.quant_max).view(4, 2, 300)
    float_error = (F.linear(x, weight, bias) - expected).abs().max()
    torch.testing.assert_close(layer(x), expected, rtol=1e-4, atol=1e-4)
    assert float_error > 1e-3  # so the check above tells int8 maths from float maths

    compiled = torch.compile(layer)
    with torch._inductor.config.patch(freezing=True), torch.profiler.profile() as profile:
        out = compiled(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert "onednn::qlinear_pointwise" in {event.key for event in profile.key_averages()}


def _row_quantized_maths(x, weight, bias, top=127):
    """int8 weights (-top..top) with a scale per output feature, each row of x on an int8 grid of
    its own."""
    w_scale = weight.abs().amax(dim=1) / top
    x_scale = x.abs().amax(dim=1, keepdim=True) / 127
    w_grid = torch.round(weight / w_scale[:, None]) * w_scale[:, None]
    return F.linear(torch.round(x / x_scale) * x_scale, w_grid, bias)


@torch.inference_mode()
def test_int8_linear_eagerly_and_compiled_computes_row_quantized_int8_maths_with_int_mm():
    """Eagerly and compiled by Inductor with freezing, the layer computes the quantized maths, and
    the compiled graph multiplies with `_int_mm` (not oneDNN's int8 linear op, which Inductor puts
    in place of some ways of writing it, nor a float matmul)."""
    torch.manual_seed(0)
    weight, bias = torch.randn(300, 64) * 0.1, torch.randn(300)
    layer = Int8Linear(weight, bias)
    x = torch.randn(4, 2, 64) * torch.logspace(-2, 1, 8).view(4, 2, 1)  # rows of different ranges
    expected = _row_quantized_maths(x.view(8, 64), weight, bias, layer.weight_max).view(4, 2, 300)
    float_error = (F.linear(x, weight, bias) - expected).abs().max()
    per_tensor_error = (_quantized_maths(x.view(8, 64), weight, bias).view(4, 2, 300) - expected).abs().max()
    torch.testing.assert_close(layer(x), expected, rtol=1e-4, atol=1e-4)
    assert min(float_error, per_tensor_error) > 1e-3  # so the check tells these maths from others

    compiled = torch.compile(layer)
    with torch._inductor.config.patch(freezing=True), torch.profiler.profile() as profile:
        out = compiled(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    called = {event.key for event in profile.key_averages()}
    assert "aten::_int_mm" in called and "onednn::qlinear_pointwise" not in called


def test_int8_model_compiled_for_searches_translates_like_the_float_model(reverse_model, compiled_cache):
    model, tokenizer, sources = reverse_model
    int8 = quantize_int8(model, compiled=True)
    src, _ = _batch(tokenizer, sources[:100])
    eager = [h.tokens for h in greedy_search(int8, src)]  # oneDNN int8 matmuls called directly
    assert sum(a == b.tokens for a, b in zip(eager, greedy_search(model, src), strict=True)) >= 90
    # Compiled beam search, 8 sentences whose translations have one length, which ends every search at
    # once: one graph (beams of 3, 24 rows: the step for any count from 8 rows). A lone sentence's
    # whole search compiled: tests/cli's int8 test.
    length, _ = Counter(len(tokens) for tokens in eager).most_common(1)[0]
    same = [i for i, tokens in enumerate(eager) if len(tokens) == length][:8]
    src, limits = src[same], torch.full((8,), length)
    pairs = zip(beam_search(int8, src, 3, max_lengths=limits, step=CompiledStep(int8)),
                beam_search(model, src, 3, max_lengths=limits), strict=True)
    assert sum(a[0].tokens == b[0].tokens for a, b in pairs) >= 7
    assert sorted(kind.rows for kind in graphs(int8)) == [0]  # 24 rows: the step for any count
    assert isinstance(int8.decoder.layers[0].feed_forward.w1, Int8Linear)
    assert isinstance(int8.output_proj, OneDNNInt8Linear)


@needs_mkl
@torch.inference_mode()
def test_packed_linear_packs_for_a_row_count_that_repeats_and_computes_the_same():
    torch.manual_seed(0)
    weight, bias = torch.randn(300, 64), torch.randn(300)
    linear = MKLPackedLinear(weight, bias)
    n = PACK_AFTER
    calls = ([(5, None)] * (n - 1) + [(5, 5), (5, 5)]  # (rows of a call, rows packed for after it)
             + [(7, 5)] * (n - 1) + [(5, 5)]  # 7 rows not often enough running: 5 stays packed
             + [(3, 5)] * (n - 1) + [(3, 3)])
    for rows, packed_for in calls:
        x = torch.randn(rows, 1, 64)  # (N, 1, I): rows count all leading dimensions
        torch.testing.assert_close(linear(x), F.linear(x, weight, bias), rtol=1e-5, atol=1e-4)
        assert (linear.packed and linear.packed[0]) == packed_for
    no_bias = MKLPackedLinear(weight, None)
    x = torch.randn(4, 64)
    for _ in range(n + 1):
        torch.testing.assert_close(no_bias(x), x @ weight.T, rtol=1e-5, atol=1e-4)
    assert no_bias.packed[0] == 4
    copied = copy.deepcopy(no_bias)  # packs anew: MKL's packing cannot move
    assert copied.packed is None
    torch.testing.assert_close(copied(x), x @ weight.T, rtol=1e-5, atol=1e-4)


@needs_mkl
def test_packed_model_translates_exactly_like_the_float_model(reverse_model):
    model, tokenizer, sources = reverse_model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    packed = pack_for_cpu(model)
    _translates_like(packed, model, tokenizer, sources[:100])
    assert packed.output_proj.packed is not None  # the decoding steps ran on packed weights
    assert packed.decoder.layers[0].self_attn.in_proj.qkv.packed is not None
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the original is untouched


def test_weights_stored_by_column_keep_their_values_and_translate_like_the_model(reverse_model):
    """The compiled path's layout on a CPU (`weights_by_column`, chosen by `translation.prepare`):
    every matrix transposed in memory, the same values, the same translations."""
    model, tokenizer, sources = reverse_model

    def by_column(m):  # the decoder's matrices and the output layer's; the encoder's stay by row
        matrices = [p for p in [*m.decoder.parameters(), m.output_proj.weight] if p.dim() == 2]
        return bool(matrices) and all(p.stride() == (1, p.size(0)) for p in matrices)

    changed = weights_by_column(copy.deepcopy(model))
    assert by_column(changed) and all(p.is_contiguous() for p in changed.encoder.parameters())
    assert all(torch.equal(p, model.get_parameter(n)) for n, p in changed.named_parameters())
    _translates_like(changed, model, tokenizer, sources[:100])
    prepared, how, compiled = prepare(copy.deepcopy(model), torch.device("cpu"), compile=True)
    assert compiled and by_column(prepared)
    assert not by_column(model)  # a copy was given: the model is as it was


@needs_onednn_bf16
def test_bfloat16_packed_model_translates_exactly_like_the_bfloat16_model(reverse_model):
    model, tokenizer, sources = reverse_model
    packed, plain = pack_for_cpu(model, torch.bfloat16), copy.deepcopy(model).to(torch.bfloat16)
    assert packed.output_proj.weight.dtype == torch.bfloat16
    _translates_like(packed, plain, tokenizer, sources[:100])
    assert packed.output_proj.packed is not None
    copied = copy.deepcopy(packed)  # packs anew: a packed weight cannot move
    assert copied.output_proj.packed is None
    _translates_like(copied, plain, tokenizer, sources[:10])


def _translates_like(packed, model, tokenizer, sources):
    """The same logits (to rounding) and the same greedy and beam outputs."""
    src, tgt = _batch(tokenizer, sources)
    with torch.no_grad():
        torch.testing.assert_close(packed(src, tgt).float(), model(src, tgt).float(), rtol=1e-5, atol=1e-4)
    assert [h.tokens for h in greedy_search(packed, src)] == [h.tokens for h in greedy_search(model, src)]
    assert ([[h.tokens for h in n] for n in beam_search(packed, src, nbest=2)]
            == [[h.tokens for h in n] for n in beam_search(model, src, nbest=2)])
