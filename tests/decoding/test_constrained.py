"""Lexically constrained beam search (decoding/constrained.py): every constraint appears in the
output whatever the model prefers, sentences without constraints are searched as plain beam search,
and the compiled step gives what the eager one does."""

import pytest
import torch

from aiayn.decoding import beam_search
from aiayn.decoding.constrained import Constraints, Steer, stripes
from tests.conftest import random_ids, tiny_model

NEG_INF = float("-inf")


def contains(tokens, phrase):
    return any(tokens[i:i + len(phrase)] == phrase for i in range(len(tokens) - len(phrase) + 1))


def test_stripes_take_the_best_of_each_bank_in_turn_from_the_bank_that_met_most():
    values = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -5.0, NEG_INF]])
    banks = torch.tensor([[0, 0, 1, 2, 1, 2]])
    assert stripes(values, banks, 2).tolist() == [[3, 2, 0, 4, 1, 5]]


@pytest.mark.parametrize("seed", range(4))
def test_every_constraint_appears_whatever_the_model_prefers(seed):
    """A random model would never write these phrases: each sentence's constraints (one to three
    phrases of one to three tokens, some sentences none) appear in its best translation."""
    torch.manual_seed(seed)
    model = tiny_model(vocab_size=40)
    src = random_ids(6, 7, 40)
    g = torch.Generator().manual_seed(seed)
    phrases = [[torch.randint(4, 40, (int(n),), generator=g).tolist()
                for n in torch.randint(1, 4, (int(c),), generator=g)]
               for c in [1, 3, 0, 2, 1, 0]]
    plain = beam_search(model, src, beam_size=4)
    found = beam_search(model, src, beam_size=4, constraints=Constraints([Steer(tuple(map(tuple, p)))
                                                                          for p in phrases]))
    for sentence, (best, *_), (unconstrained, *_) in zip(phrases, found, plain, strict=True):
        assert all(contains(best.tokens, p) for p in sentence), (sentence, best.tokens)
        if not sentence:  # searched as plain beam search, beside constrained sentences
            assert best.tokens == unconstrained.tokens and best.score == pytest.approx(unconstrained.score)


def test_no_constraints_at_all_is_plain_beam_search():
    torch.manual_seed(1)
    model = tiny_model(vocab_size=40)
    src = random_ids(5, 6, 40)
    plain = beam_search(model, src, beam_size=4, nbest=4)
    found = beam_search(model, src, beam_size=4, nbest=4, constraints=Constraints([Steer()] * 5))
    assert [[h.tokens for h in n] for n in found] == [[h.tokens for h in n] for n in plain]
