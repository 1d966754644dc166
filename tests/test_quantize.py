import warnings

import torch

from aiayn.data.batching import pad
from aiayn.decoding import greedy_search
from aiayn.quantize import quantize_int8


def test_int8_model_translates_like_the_float_model(reverse_model):
    model, tokenizer, sources = reverse_model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # PyTorch's deprecation notices stay inside quantize_int8
        int8 = quantize_int8(model)
    src = pad([s + [tokenizer.eos_id] for s in tokenizer.encode(sources[:100])], tokenizer.pad_id)
    tgt = torch.full((100, 1), tokenizer.bos_id)
    with torch.no_grad():
        float_logits, int8_logits = model(src, tgt), int8(src, tgt)
    assert (int8_logits - float_logits).abs().max() < 0.05 * float_logits.abs().max()
    pairs = zip(greedy_search(int8, src), greedy_search(model, src), strict=True)
    same = sum(a.tokens == b.tokens for a, b in pairs)
    assert same >= 90  # int8 rounding may flip a few near ties
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # the original is untouched
    assert type(int8.decoder.layers[0].feed_forward.w1).__module__.startswith("torch.ao.nn.quantized")
