"""A lone sentence's whole beam search as one compiled graph (decoding/whole.py): beam.py's results."""

import pytest
import torch

from aiayn import inference
from aiayn.config import DecodeConfig
from aiayn.decoding import beam_search, translator, whole
from aiayn.decoding.cache import compiling
from aiayn.decoding.repetition import Repetition
from aiayn.decoding.steps import Step, output_limits
from aiayn.decoding.translator import search
from tests.conftest import one_layer_model, random_ids
from tests.decoding.test_repetition import looping_model, repeated

pytestmark = pytest.mark.usefixtures("compiled_cache")


def sentence(length: int, seed: int) -> torch.Tensor:
    src = random_ids(1, length, seed=seed)
    src[0, -1] = 3  # eos
    return src


def assert_same(found, eager):
    assert found is not None
    assert [[h.tokens for h in hyps] for hyps in found] == [[h.tokens for h in hyps] for hyps in eager]
    for field in ("score", "log_prob"):
        assert [getattr(h, field) for h in found[0]] == \
            pytest.approx([getattr(h, field) for h in eager[0]], rel=1e-4, abs=1e-4)


def test_the_whole_search_of_one_sentence_finds_what_beam_search_finds():
    """Sources of 2 to 17 tokens, limits that force eos at the first step, early or late (searches that
    end by themselves: the trained model's, below), both penalty forms, n-best lists of 1, 2 and 4
    and another first token: one graph for them all, the model's for its beam size."""
    model = one_layer_model()
    bos = model.config.bos_id
    for length, seed in ((2, 1), (5, 2), (9, 3), (17, 4)):
        src = sentence(length, seed)
        for limit, nbest, alpha, form, start in ((1, 4, 0.6, "gnmt", bos), (4, 2, 1.0, "plain", 7),
                                                 (2 * length + 6, 1, 0.6, "gnmt", bos)):
            found = whole.search(model, src, limit, 4, nbest, alpha, form, start)
            eager = beam_search(model, src, 4, nbest, alpha, form, torch.tensor([limit]), start=start)
            assert_same(found, eager)
    assert [(kind.output, kind.beams) for kind in whole.graphs(model)] == [(whole.OUTPUT, 4)]


def test_the_whole_search_under_the_ngram_rule_finds_what_beam_search_finds_under_it():
    """A model that loops (7 7 7 ...) searched alone under `no_repeat_ngram_size` 3, the translator's
    default: the graph bans from its buffers what beam.py bans from its histories, limits early and
    late, n-best lists of 4; a graph of its own beside the rule's absence."""
    model, rule = looping_model(), Repetition(ngram=3)
    for length, seed in ((2, 1), (7, 3)):
        src = sentence(length, seed)
        for limit, nbest in ((2, 4), (3, 4), (2 * length + 6, 4)):
            found = whole.search(model, src, limit, 4, nbest, 0.6, "gnmt", model.config.bos_id, ngram=3)
            eager = beam_search(model, src, 4, nbest, max_lengths=torch.tensor([limit]), repetition=rule)
            assert_same(found, eager)
            assert all(repeated(h.tokens, 3) == [] for h in found[0])
    assert found[0][0].tokens[0] == 7 and len(set(found[0][0].tokens)) > 1  # the loop broken
    assert [(kind.output, kind.beams) for kind in whole.graphs(model)] == [(whole.OUTPUT + "-no-repeat-3", 4)]


def test_searches_that_end_by_themselves_within_the_room_find_what_beam_search_finds(reverse_model):
    """A trained model (it reverses letters) ends its searches long before their limits (the source's
    length + 50), within the graph's first, shorter width (the whole search of tests/cli's)."""
    model, tokenizer, sources = reverse_model
    for line in sources[:12]:
        src = torch.tensor([tokenizer.encode([line])[0] + [tokenizer.eos_id]])
        limit = int(output_limits(model, src)[0])
        found = whole.search(model, src, limit, 2, 2, 0.6, "gnmt", model.config.bos_id)
        assert_same(found, beam_search(model, src, 2, 2, max_lengths=torch.tensor([limit])))
        assert len(found[0][0].tokens) + 2 <= whole.room(src.size(1)) < limit + 2


def test_translation_compiled_searches_a_lone_sentence_by_the_graph_and_leaves_others_to_the_steps():
    model = one_layer_model()
    src = sentence(6, 5)
    config = DecodeConfig(beam_size=4, nbest=2, compile=True, max_output_extra=10)  # and no 3-gram twice
    eager = beam_search(model, src, 4, 2, max_lengths=torch.tensor([6 + 10]), repetition=Repetition(ngram=3))
    assert_same(search(model, src, config), eager)
    assert [kind.output for kind in whole.graphs(model)] == [whole.OUTPUT + "-no-repeat-3"]
    limits = torch.tensor([16])
    assert whole.takes(model, src, 4, limits)
    batch = torch.cat([src, src])
    assert not whole.takes(model, batch, 4, limits.repeat(2)) and not whole.takes(model, src, 1, limits)
    assert not whole.takes(one_layer_model(relative_positions=4, positional="none"), src, 4, limits)
    assert not whole.takes(model, src, 4, torch.tensor([compiling.LARGEST]))  # wider than the graph takes
    if inference.int8_compilable():  # an int8 model's lone sentences are faster on its steps
        assert not whole.takes(inference.quantize_int8(model, compiled=True), src, 4, limits)
        assert whole.takes(model, src, 4, limits)


def test_learned_positions_up_to_the_models_last_are_asked_for(monkeypatch):
    """A model with learned positions: the limit is clamped to its table (`output_limits`), whose
    positions the search's width goes one beyond (eos is never fed back); the graph is given the
    positions it reads, and no more (here a stand-in graph: what it is given)."""
    model = one_layer_model(positional="learned", max_positions=16)
    src, given = sentence(6, 8), []
    k, c = 4, model.config

    def graph(src, table, penalties, scores, limit, start):
        given.append((table.size(0), penalties.size(0)))
        tokens = torch.full((k, penalties.size(0)), c.pad_id)
        tokens[:, 0], tokens[:, 1] = start, c.eos_id
        return torch.zeros(k), torch.zeros(k), tokens, torch.tensor(True)

    graph.module, graph.kinds = whole.WholeBeam(model), lambda: []
    monkeypatch.setattr(whole, "_graph", lambda model, ngram=0: graph)
    limit = int(output_limits(model, src)[0])
    assert limit == 15 and whole.search(model, src, limit, k, 1, 0.6, "gnmt", c.bos_id) is not None
    assert given == [(16, 17)]  # room (2 x 6 + 8 = 20) beyond the width: the whole width at once


def test_a_search_that_outgrows_the_graphs_room_is_searched_again_in_its_whole_width(monkeypatch):
    """Two positions of room and a limit of 20: the graph stops before the search ends, and the search
    runs again in its width of 22 (beam.py's results); the graph's first call did not end."""
    model = one_layer_model()
    src = sentence(6, 6)
    monkeypatch.setattr(whole, "room", lambda source_length: 3)
    ran, graph = [], whole._graph(model)

    def counted(*inputs):
        ran.append(graph(*inputs))
        return ran[-1]

    counted.module, counted.kinds = graph.module, graph.kinds
    monkeypatch.setattr(whole, "_graph", lambda model, ngram=0: counted)
    found = whole.search(model, src, 20, 4, 2, 0.6, "gnmt", model.config.bos_id)
    assert_same(found, beam_search(model, src, 4, 2, max_lengths=torch.tensor([20])))
    assert [bool(outputs[-1]) for outputs in ran] == [False, True]
    assert [outputs[2].size(1) for outputs in ran] == [3, 22]


def test_a_model_whose_search_does_not_compile_as_one_graph_is_said_once_and_searched_on_the_steps(
        monkeypatch, capsys):
    model = one_layer_model(d_ff=96)  # weights of its own: its graph is not in the cache
    src = sentence(5, 7)

    def fails(self, src, table, penalties, scores, limit, start):
        raise RuntimeError("cannot trace this\nmore lines")

    monkeypatch.setattr(whole.WholeBeam, "forward", fails)
    monkeypatch.setattr(translator, "CompiledStep", Step)  # the steps' search, without compiling them
    config = DecodeConfig(beam_size=4, nbest=2, compile=True, max_output_len=6)
    assert_same(search(model, src, config), beam_search(model, src, 4, 2, max_lengths=torch.tensor([6]),
                                                        repetition=Repetition(ngram=3)))
    err = capsys.readouterr().err
    assert "the whole search of one sentence did not compile (RuntimeError: cannot trace this); " \
           "searching with compiled steps" in err and "more lines" not in err
    assert not whole.takes(model, src, 4, torch.tensor([6]))  # not tried again for this model
    assert whole.search(model, src, 6, 4, 1, 0.6, "gnmt", model.config.bos_id) is None
    assert capsys.readouterr().err.count("did not compile") == 1
