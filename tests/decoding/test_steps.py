import torch

from aiayn.decoding.steps import Step, max_output_lengths, next_log_probs, next_logits, output_tokens
from tests.conftest import random_ids, tiny_model


def test_output_tokens_stop_at_eos_and_drop_padding():
    assert output_tokens([5, 6, 3, 7, 0], eos_id=3, pad_id=0) == [5, 6]
    assert output_tokens([5, 0, 6, 0], eos_id=3, pad_id=0) == [5, 6]  # no eos: the length limit
    assert output_tokens([3, 5], eos_id=3, pad_id=0) == []


def test_the_length_limit_is_the_source_length_plus_50_or_a_fixed_cap():
    src = torch.tensor([[5, 6, 7, 3], [5, 3, 0, 0]])  # the second padded
    assert max_output_lengths(src, pad_id=0).tolist() == [54, 52]
    assert max_output_lengths(src, pad_id=0, extra=2).tolist() == [6, 4]
    assert max_output_lengths(src, pad_id=0, fixed=9).tolist() == [9, 9]


def test_one_cached_step_gives_the_full_decoders_last_log_probabilities_without_pad_or_bos():
    model, c = tiny_model(), tiny_model().config
    src, tgt = random_ids(3, 6), random_ids(3, 4, seed=1)
    full = model.log_probs(model.decode(tgt, model.encode(src), src))[:, -1]  # (B, V)
    with torch.no_grad():
        cache = model.init_cache(model.encode(src), capacity=8)
        for i in range(3):
            model.decode(tgt[:, i:i + 1], None, src, cache)
        step = next_log_probs(model, tgt[:, 3], src, cache)  # (B, V)
    assert torch.isinf(step[:, [c.pad_id, c.bos_id]]).all()
    others = [i for i in range(c.vocab_size) if i not in (c.pad_id, c.bos_id)]
    torch.testing.assert_close(step[:, others], full[:, others], atol=1e-5, rtol=1e-5)


def test_logits_and_their_normaliser_give_the_same_log_probabilities():
    model = tiny_model()
    src, tgt = random_ids(2, 5), random_ids(2, 1, seed=2)
    with torch.no_grad():
        cache_a, cache_b = (model.init_cache(model.encode(src), capacity=4) for _ in range(2))
        logits, normaliser = next_logits(model, tgt[:, 0], src, cache_a)
        log_probs = next_log_probs(model, tgt[:, 0], src, cache_b)
    torch.testing.assert_close(logits - normaliser, log_probs)


def test_finished_rows_leave_the_eager_step_an_eighth_at_a_time():
    step = Step(tiny_model())
    done = torch.zeros(16, dtype=torch.bool)
    done[3] = True
    assert step.rows_to_keep(done) is None  # 1 of 16: computing it costs less than moving the cache
    done[[5, 9]] = True
    assert step.rows_to_keep(done).tolist() == [i for i in range(16) if i not in (3, 5, 9)]
