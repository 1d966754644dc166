import torch

from aiayn.decoding import beam_search, greedy_search
from tests.conftest import source_ids


def test_a_bfloat16_model_translates_like_the_float32_model(reverse_model):
    model, tokenizer, sources = reverse_model
    half = type(model)(model.config)
    half.load_state_dict(model.state_dict())
    half = half.to(torch.bfloat16).eval()
    src = source_ids(tokenizer, sources[:100])
    for search in (lambda m: greedy_search(m, src), lambda m: [n[0] for n in beam_search(m, src, 3)]):
        pairs = list(zip(search(half), search(model), strict=True))
        assert sum(a.tokens == b.tokens for a, b in pairs) >= 90  # bfloat16 rounding may flip near ties
        assert all(isinstance(a.score, float) and abs(a.log_prob - b.log_prob) < 0.2
                   for a, b in pairs if a.tokens == b.tokens)
