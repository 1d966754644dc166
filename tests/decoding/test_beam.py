import itertools
import math
from types import SimpleNamespace

import pytest
import torch

import aiayn.decoding.steps as steps_module
from aiayn.decoding import beam_search, greedy_search, length_penalty, max_output_lengths
from aiayn.decoding.beam import NEG_INF, beam_step, candidates, choose
from aiayn.decoding.topk import top_k
from tests.conftest import random_ids, tiny_model

PAD, UNK, BOS, EOS, A, B = 0, 1, 2, 3, 4, 5


def test_length_penalty_forms():
    assert length_penalty(4, 0.6, "gnmt").item() == pytest.approx(((5 + 4) / 6) ** 0.6)
    assert length_penalty(4, 0.6, "plain").item() == pytest.approx(4**0.6)
    assert length_penalty(7, 0.0, "gnmt").item() == 1.0


def test_beam_step_keeps_the_2k_best_extensions_of_all_beams():
    log_probs = torch.log(torch.tensor([[[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]]))  # (B=1, K=2, V=3)
    scores = torch.log(torch.tensor([[0.5, 0.5]]))
    top, beams, tokens = beam_step(scores[:, :, None] + log_probs)
    assert beams.tolist() == [[0, 1, 0, 1]] and tokens.tolist()[0][:2] == [1, 0]
    assert torch.allclose(top.exp(), torch.tensor([[0.30, 0.25, 0.15, 0.125]]))


def test_candidates_add_each_beams_score_and_allow_only_eos_at_the_length_limit():
    torch.manual_seed(0)
    log_probs = torch.randn(3 * 2, 6).log_softmax(dim=1)  # B=3 sentences, K=2 beams, V=6
    scores = torch.randn(3, 2)
    only_eos = torch.full((6,), NEG_INF)
    only_eos[EOS] = 0.0
    at_limit = torch.tensor([False, True, False])
    top, beams, tokens, *chosen = candidates(log_probs, scores, at_limit, only_eos)  # (B, 2K) each
    totals = log_probs.view(3, 2, 6) + scores[:, :, None]
    for got, want in zip((top, beams, tokens), beam_step(totals), strict=True):
        assert torch.equal(got[[0, 2]], want[[0, 2]])  # the others as beam_step finds them
    assert tokens[1, :2].tolist() == [EOS, EOS] and sorted(beams[1, :2].tolist()) == [0, 1]
    assert torch.equal(top[1, :2], totals[1, :, EOS].sort(descending=True).values)
    assert (top[1, 2:] == NEG_INF).all()  # nothing but eos may follow
    assert [x.tolist() for x in chosen] == [x.tolist() for x in choose(top, beams, tokens, only_eos)]

    first = candidates(log_probs[:3], torch.tensor([[0.0, NEG_INF]] * 3), torch.zeros(3, dtype=torch.bool),
                       only_eos)  # the first step: one row per sentence, its beams equal
    assert (first[1] == 0).all() and torch.equal(first[0], log_probs[:3].topk(4, dim=1).values)


def test_choose_finishes_eos_among_the_first_k_and_keeps_the_best_k_others():
    only_eos = torch.full((7,), NEG_INF)
    only_eos[EOS] = 0.0
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0], [NEG_INF] * 4])  # B=2, K=2: 2K candidates, best first
    beams = torch.tensor([[0, 1, 1, 0], [0, 1, 0, 1]])
    tokens = torch.tensor([[EOS, A, EOS, B], [EOS, A, B, 6]])
    ended, kept, live_scores, live_beams, live_tokens = choose(scores, beams, tokens, only_eos)
    assert ended.tolist() == [[True, False], [False, False]]  # eos in the first K, and not at -inf
    assert kept.tolist() == [[1, 3], [1, 2]]  # the best K that do not end, in rank order
    assert live_scores.tolist() == [[-2.0, -4.0], [NEG_INF, NEG_INF]]
    assert live_beams.tolist() == [[1, 0], [1, 0]] and live_tokens.tolist() == [[A, B], [A, B]]


@pytest.mark.parametrize("n", [8000, 8057])  # rows of whole chunks, and with a tail
def test_top_k_by_chunks_gives_the_values_and_positions_topk_gives(n):
    torch.manual_seed(0)
    x = torch.randint(-50, 50, (6, 4, n)).float()  # many equal values
    x[0, :, :-3] = float("-inf")  # only the rows' tails are finite
    x[1, 2, 1234] = x[1, 3, n - 1] = 99.0  # the best in a chunk and in a tail
    values, positions = top_k(x, 8)
    flat = x.flatten(1)
    assert torch.equal(values, flat.topk(8, dim=1).values)
    assert torch.equal(flat.gather(1, positions), values)
    assert all(len(set(row)) == 8 for row in positions.tolist())  # 8 different positions per row
    assert {2 * n + 1234, 4 * n - 1} <= set(positions[1].tolist())


class ScriptedModel:
    """Next-token probabilities read from a table keyed by the output prefix (a test double);
    with a list of tables, one per sentence of the batch."""

    def __init__(self, table: dict[tuple, dict[int, float]] | list[dict], vocab_size: int = 6) -> None:
        self.table = table
        self.config = SimpleNamespace(pad_id=PAD, bos_id=BOS, eos_id=EOS, vocab_size=vocab_size)

    def encode(self, src):
        return torch.zeros(src.size(0), 1, 1)

    def init_cache(self, memory, capacity, rows_per_sentence=1):
        rows = [(sentence,) for sentence in range(memory.size(0)) for _ in range(rows_per_sentence)]
        return ScriptedCache(rows, rows_per_sentence)  # each history starts with its sentence

    def decode(self, tokens, memory, src, cache):
        cache.histories = [h + (t,) for h, t in zip(cache.histories, tokens[:, 0].tolist(), strict=True)]
        self.last = cache.histories
        return torch.zeros(tokens.size(0), 1, 1)

    def logits(self, hidden):
        rows = torch.full((len(self.last), self.config.vocab_size), 1e-12)
        for r, (sentence, _bos, *prefix) in enumerate(self.last):
            table = self.table[sentence] if isinstance(self.table, list) else self.table
            for token, p in table.get(tuple(prefix), {EOS: 1.0}).items():
                rows[r, token] = p
        return rows.log()[:, None, :]  # log-probabilities are logits too


class ScriptedCache:
    def __init__(self, histories, rows_per_sentence):
        self.histories, self.r = histories, rows_per_sentence

    def reorder(self, rows):
        self.histories = [self.histories[i] for i in rows.tolist()]

    def fan_out(self, r):
        self.histories, self.r = [h for h in self.histories for _ in range(r)], r

    def select(self, sentences):
        self.reorder(torch.tensor([s * self.r + i for s in sentences.tolist() for i in range(self.r)]))


# ()   -> a .5, b .4, eos .1        greedy takes a, then eos (.4): "a" with probability .2
# (a,) -> eos .4, a .3, b .3        beam 2 keeps a and b, then finds b eos (.4 x .9 = .36)
# (b,) -> eos .9, a .05, b .05
TABLE = {(): {A: 0.5, B: 0.4, EOS: 0.1}, (A,): {EOS: 0.4, A: 0.3, B: 0.3}, (B,): {EOS: 0.9, A: 0.05, B: 0.05}}


def test_scripted_probabilities_give_the_hand_computed_beams():
    model, src = ScriptedModel(TABLE), torch.tensor([[A, EOS]])
    assert greedy_search(model, src, torch.tensor([2]))[0].tokens == [A]
    assert beam_search(model, src, 1, alpha=0.0, max_lengths=torch.tensor([2]))[0][0].tokens == [A]
    nbest = beam_search(model, src, beam_size=2, nbest=2, alpha=0.0, max_lengths=torch.tensor([2]))[0]
    assert [h.tokens for h in nbest] == [[B], [A]]
    assert [h.log_prob for h in nbest] == pytest.approx([math.log(0.36), math.log(0.2)], abs=1e-5)


def test_scripted_scores_include_the_length_penalty():
    model, src = ScriptedModel(TABLE), torch.tensor([[A, EOS]])
    for form, lp in (("gnmt", (7 / 6) ** 0.6), ("plain", 2**0.6)):  # both hypotheses have |Y| = 2
        nbest = beam_search(model, src, beam_size=2, nbest=2, alpha=0.6, penalty=form,
                            max_lengths=torch.tensor([2]))[0]
        assert [h.score for h in nbest] == pytest.approx([math.log(0.36) / lp, math.log(0.2) / lp], abs=1e-5)


def test_length_penalty_can_prefer_the_longer_hypothesis():
    # Beam 2. Step 1: "b a" .36 and "a eos" .3 rank first: "a" finishes (|Y| 2); "b a" and "a a" (.18)
    # stay live. Step 2: "b a eos" .252 ranks first and finishes (|Y| 3): two finished, done.
    # alpha 0 prefers "a" (.3 > .252); a strong plain penalty (alpha 2) prefers "b a":
    # log .252 / 3^2 > log .3 / 2^2.
    table = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.5, A: 0.3, B: 0.2}, (B,): {A: 0.9, EOS: 0.05, B: 0.05},
             (B, A): {EOS: 0.7, A: 0.15, B: 0.15}, (A, A): {EOS: 0.01, A: 0.99}}
    model, src, limit = ScriptedModel(table), torch.tensor([[A, EOS]]), torch.tensor([3])
    shortest = beam_search(model, src, 2, alpha=0.0, max_lengths=limit)[0][0]
    assert shortest.tokens == [A] and shortest.score == pytest.approx(math.log(0.3), abs=1e-5)
    longest = beam_search(model, src, 2, alpha=2.0, penalty="plain", max_lengths=limit)[0][0]
    assert longest.tokens == [B, A] and longest.score == pytest.approx(math.log(0.252) / 9, abs=1e-5)


def exhaustive_best(model, src, max_len, alpha, form):
    """Score every output of at most max_len tokens (then eos) with full decoder re-runs."""
    allowed = [t for t in range(model.config.vocab_size) if t not in (PAD, BOS, EOS)]
    memory = model.encode(src)
    best = (float("-inf"), None)
    for length in range(max_len + 1):
        for seq in itertools.product(allowed, repeat=length):
            tgt = torch.tensor([[BOS, *seq]])
            log_probs = model.log_probs(model.decode(tgt, memory, src))[0]  # (length + 1, V)
            total = sum(log_probs[i, t].item() for i, t in enumerate([*seq, EOS]))
            score = total / length_penalty(length + 1, alpha, form).item()
            best = max(best, (score, list(seq)))
    return best


@pytest.mark.parametrize("alpha, form", [(0.0, "gnmt"), (0.6, "gnmt"), (1.5, "plain")])
def test_a_wide_beam_finds_the_best_sequence_exhaustive_search_finds(alpha, form):
    model = tiny_model(vocab_size=7)  # outputs: unk and ids 4..6, or eos
    for seed in range(3):
        src = random_ids(1, 4, vocab=7, seed=seed)
        score, tokens = exhaustive_best(model, src, 3, alpha, form)
        hyp = beam_search(model, src, beam_size=128, alpha=alpha, penalty=form,
                          max_lengths=max_output_lengths(src, PAD, fixed=3))[0][0]
        assert hyp.tokens == tokens and hyp.score == pytest.approx(score, abs=1e-4)


def test_beam_size_1_gives_exactly_the_greedy_output():
    model = tiny_model()
    src = torch.cat([random_ids(8, 9), torch.zeros(8, 2, dtype=torch.long)], dim=1)
    src[3, 5:] = PAD
    limits = max_output_lengths(src, PAD, fixed=12)
    greedy = [h.tokens for h in greedy_search(model, src, limits)]
    beam = [hyps[0].tokens for hyps in beam_search(model, src, beam_size=1, alpha=0.6, max_lengths=limits)]
    assert beam == greedy


def test_nbest_is_sorted_and_distinct():
    model = tiny_model()
    for hyps in beam_search(model, random_ids(3, 6), beam_size=5, nbest=5, max_lengths=torch.full((3,), 6)):
        scores = [h.score for h in hyps]
        assert len(hyps) == 5 and scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in hyps}) == 5


def test_beam_output_does_not_depend_on_the_batch():
    model = tiny_model()
    src = random_ids(7, 8)
    src[2, 3:] = PAD
    src[5, 6:] = PAD
    together = beam_search(model, src, beam_size=4, nbest=2)
    alone = [beam_search(model, src[i:i + 1, : int((src[i] != PAD).sum())], beam_size=4, nbest=2)[0]
             for i in range(7)]
    assert [[h.tokens for h in hyps] for hyps in together] == [[h.tokens for h in hyps] for hyps in alone]


def test_finished_sentences_staying_in_the_batch_add_nothing(monkeypatch):
    # Beam 2, plain length penalty, alpha 1. Sentence 0: step 1 finishes "b" (.36) and "a" (.33), so
    # it is done; its live beam "a b" would end at step 2 with .27, and log .27 / 3 beats log .33 / 2,
    # but a done sentence takes nothing more. Sentence 1 keeps the batch going until step 2.
    first = {(): {A: 0.6, B: 0.4}, (A,): {EOS: 0.55, B: 0.45}, (B,): {EOS: 0.9, A: 0.1}}
    second = {(): {A: 0.5, B: 0.5}, (A,): {A: 0.5, B: 0.5}, (B,): {A: 0.5, B: 0.5}}
    model, src = ScriptedModel([first, second]), torch.tensor([[A, EOS], [A, EOS]])
    for leave_at in (10**9, 1):  # leave the batch at once; stay, masked, until all are done
        monkeypatch.setattr(steps_module, "LEAVE_AT", leave_at)
        nbest = beam_search(model, src, beam_size=2, nbest=2, alpha=1.0, penalty="plain",
                            max_lengths=torch.tensor([5, 5]))
        assert [h.tokens for h in nbest[0]] == [[B], [A]]
        assert len(nbest[1]) == 2


def test_outputs_never_contain_padding_or_bos_and_respect_the_limit():
    model = tiny_model()
    with torch.no_grad():  # make pad and bos the most likely tokens: they must still never appear
        model.output_proj.weight[PAD] *= 50
        model.output_proj.weight[BOS] *= 50
    src = random_ids(4, 5)
    for hyps in beam_search(model, src, beam_size=3, max_lengths=torch.full((4,), 7)):
        assert PAD not in hyps[0].tokens and BOS not in hyps[0].tokens and len(hyps[0].tokens) <= 7
