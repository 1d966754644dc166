"""The rules against repetition loops (decoding/repetition.py) in every search."""

import pytest
import torch

from aiayn.decoding import beam_search, greedy_search
from aiayn.decoding.constrained import Constraints, Steer
from aiayn.decoding.repetition import Repetition
from tests.conftest import random_ids, tiny_model

PAD, EOS = 0, 3


def looping_model():
    """A model that prefers token 7 at every step, then 8, 9, 10, whatever came before, and never
    ends: left alone it says "7 7 7 ..." to its length limit, the loop of a weak model."""
    model = tiny_model(output_bias=True)
    with torch.no_grad():
        model.output_proj.weight.mul_(0.01)  # the bias decides
        for token, bias in ((7, 10.0), (8, 9.0), (9, 8.0), (10, 7.0), (EOS, -10.0)):
            model.output_proj.bias[token] = bias
    return model


def reference_banned(row: list[int], n: int) -> set[int]:
    """The tokens that would complete an n-gram `row` already holds, by brute force."""
    tail = tuple(row[len(row) - n + 1:]) if n > 1 else ()
    return {row[i + n - 1] for i in range(len(row) - n + 1) if tuple(row[i:i + n - 1]) == tail}


def repeated(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    """The n-grams of `tokens` that occur in it before."""
    grams = [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
    return [g for i, g in enumerate(grams) if g in grams[:i]]


def test_the_penalty_divides_positive_and_multiplies_negative_scores_of_tokens_produced():
    logits = torch.tensor([[2.0, -1.0, 4.0, -3.0, 1.0, 0.5]])
    produced = torch.tensor([[2, 3, 3, PAD]])  # padding: no token
    assert Repetition(penalty=2.0).penalise(logits, produced, PAD).tolist() == \
        [[2.0, -1.0, 2.0, -6.0, 1.0, 0.5]]  # 4 halved, -3 doubled (once), padding's score as it was
    assert Repetition().penalise(logits, produced, PAD) is logits  # off: the scores untouched
    assert Repetition().ban(logits, produced) is logits
    with pytest.raises(ValueError, match="repetition_penalty must be positive"):
        Repetition(penalty=0.0)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_the_tokens_banned_are_those_completing_an_ngram_already_produced(n):
    produced = torch.randint(4, 8, (64, 9), generator=torch.Generator().manual_seed(n))  # many repeats
    banned = Repetition(ngram=n).ban(torch.zeros(64, 10), produced) == float("-inf")
    for row, bans in zip(produced.tolist(), banned.tolist(), strict=True):
        assert {t for t, b in enumerate(bans) if b} == reference_banned(row, n), row


def test_the_ban_leaves_every_other_score_as_it_was():
    """The tokens banned get -inf; the others keep their scores, bit for bit (no renormalising)."""
    scores = torch.randn(64, 10, generator=torch.Generator().manual_seed(5)).log_softmax(-1)
    produced = torch.randint(4, 8, (64, 9), generator=torch.Generator().manual_seed(6))
    banned = Repetition(ngram=2).ban(scores, produced)
    kept = banned > float("-inf")
    assert torch.equal(banned[kept], scores[kept]) and (~kept).any()


@pytest.mark.parametrize("n", [1, 2, 3])
def test_only_the_tokens_produced_count_in_a_buffer_with_a_start_token(n):
    """A compiled search's buffer (decoding/whole.py): the start token first, then the tokens produced
    up to `length`, then whatever the buffer held; only the tokens produced make n-grams."""
    rows = torch.randint(4, 8, (64, 12), generator=torch.Generator().manual_seed(10 + n))
    for length in range(1, 12):
        banned = Repetition(ngram=n).ban(torch.zeros(64, 10), rows, length=torch.tensor(length), first=1) < 0
        for row, bans in zip(rows.tolist(), banned.tolist(), strict=True):
            assert {t for t, b in enumerate(bans) if b} == reference_banned(row[1:length], n), (length, row)


def test_greedy_loops_without_the_rules_and_follows_each_rule_with_them():
    model, src, limits = looping_model(), random_ids(2, 5), torch.tensor([8, 8])
    assert [h.tokens for h in greedy_search(model, src, limits)] == [[7] * 8] * 2
    # each token produced loses half its score, once: 7 (10) -> 8 (9 > 5) -> 9 -> 10, then 7 (5) again
    penalised = greedy_search(model, src, limits, repetition=Repetition(penalty=2.0))
    assert [h.tokens for h in penalised] == [[7, 8, 9, 10, 7, 7, 7, 7]] * 2
    for n in (1, 2, 3):
        for h in greedy_search(model, src, limits, repetition=Repetition(ngram=n)):
            assert len(h.tokens) == 8 and repeated(h.tokens, n) == [], (n, h.tokens)
    assert greedy_search(model, src, limits, repetition=Repetition(ngram=2))[0].tokens[:4] == [7, 7, 8, 7]


def test_beam_search_constrained_or_not_repeats_no_ngram_under_the_rule():
    model, src, limits = looping_model(), random_ids(2, 5, seed=3), torch.tensor([9, 9])
    assert all(repeated(h.tokens, 2) for hyps in beam_search(model, src, 3, 3, max_lengths=limits)
               for h in hyps)
    rule = Repetition(ngram=2)
    for hyps in beam_search(model, src, 3, 3, max_lengths=limits, repetition=rule):
        assert len(hyps) == 3 and all(repeated(h.tokens, 2) == [] for h in hyps), hyps
    steers = [Steer(((11, 12),)), Steer(((13,),), prefix=(14,))]
    constrained = beam_search(model, src, 3, 2, max_lengths=limits, repetition=rule,
                              constraints=Constraints(steers))
    first, second = (hyps[0].tokens for hyps in constrained)
    assert any(first[i:i + 2] == [11, 12] for i in range(len(first))) and repeated(first, 2) == []
    assert second[0] == 14 and 13 in second and repeated(second, 2) == []


def rescored(model, src, tokens: list[int], repetition: Repetition, with_eos: bool) -> float:
    """The sum of each token's log-probability under the rules, by re-running the whole decoder on
    each prefix: slow, obviously right. The penalty reshapes the distribution over the tokens that
    can be outputs; without it, each token's is the model's own, normalised over the vocabulary, as
    in training; the ban renormalises nothing."""
    out, total = [*tokens, EOS] if with_eos else tokens, 0.0
    memory = model.encode(src)
    for i, token in enumerate(out):
        tgt = torch.tensor([[model.config.bos_id, *out[:i]]])
        logits = model.logits(model.decode(tgt, memory, src))[:, -1].float()
        produced = torch.tensor([out[:i]], dtype=torch.long)
        if repetition.penalty != 1.0:
            logits[:, [model.config.pad_id, model.config.bos_id]] = float("-inf")
            logits = repetition.penalise(logits, produced, PAD)
        total += float(repetition.ban(logits.log_softmax(-1), produced)[0, token])
    return total


@pytest.mark.parametrize("repetition", [Repetition(penalty=1.8), Repetition(ngram=2),
                                        Repetition(penalty=1.3, ngram=3)], ids=["penalty", "ngram", "both"])
@torch.inference_mode()
def test_each_hypothesis_log_probability_is_under_the_rules(repetition):
    """What the searches add up is each token's log-probability once the rules have acted."""
    model, src, limit = tiny_model(), random_ids(3, 5, seed=4), 8
    limits = torch.tensor([limit] * 3)
    for i, h in enumerate(greedy_search(model, src, limits, repetition=repetition)):
        ended = len(h.tokens) < limit  # else the limit stopped it, with no eos
        want = rescored(model, src[i:i + 1], h.tokens, repetition, ended)
        assert h.log_prob == pytest.approx(want, abs=1e-4)
    for i, hyps in enumerate(beam_search(model, src, 3, 3, max_lengths=limits, repetition=repetition)):
        for h in hyps:  # beam search ends every hypothesis with eos, at the limit too
            assert h.log_prob == pytest.approx(rescored(model, src[i:i + 1], h.tokens, repetition, True),
                                               abs=1e-4)


def test_the_ngram_rules_score_function_pickles_by_reference_for_the_processes_compiling_alongside():
    """`cache.alongside` gives other processes the step to compile, its score function with it: the
    function made for each n is found by its name (it once was not, and no step under the default
    rule could be compiled alongside)."""
    import pickle

    from aiayn.decoding import beam

    rule = beam.candidates_no_repeat(3)
    assert pickle.loads(pickle.dumps(rule)) is rule is beam.candidates_no_repeat_3
    with pytest.raises(AttributeError):
        beam.candidates_no_repeat_x  # noqa: B018
