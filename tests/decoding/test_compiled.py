import copy
import functools
import json
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.decoding import beam_search, compiled, greedy_search, step_graph, whole
from aiayn.decoding.cache import compiling, library, store
from aiayn.decoding.compiled import CompiledStep, TracedCache
from aiayn.decoding.repetition import Repetition
from aiayn.decoding.step_graph import graphs, row_bucket
from aiayn.decoding.steps import Step
from tests.conftest import one_layer_model, random_ids, tiny_model

pytestmark = pytest.mark.usefixtures("compiled_cache")


# Inputs whose steps several tests share (each graph compiled once for the file; the fuzzed searches'
# graphs include them): greedy decoding of 6 sentences at 8 rows (the step for any count from 8 rows,
# `rows` 0), then 4; one sentence's beam 4.
GREEDY = random_ids(6, 7), torch.tensor([3] * 2 + [7] * 4)
ONE_SENTENCE = random_ids(1, 8, seed=7), torch.tensor([9]), 4, 4


def rows_compiled(model, first: bool = False) -> list[int]:
    """The row counts of the model's compiled steps: the searches' first steps, or the others."""
    return sorted(kind.rows for kind in graphs(model) if kind.first == first)


def assert_same_greedy(model, src, limits):
    eager = greedy_search(model, src, limits)
    compiled = greedy_search(model, src, limits, step=CompiledStep(model))
    assert [h.tokens for h in compiled] == [h.tokens for h in eager]
    assert [h.log_prob for h in compiled] == pytest.approx([h.log_prob for h in eager], abs=1e-4)


def assert_same_beam(model, src, limits, *search):
    """`search`: beam size, nbest, length penalty, its form (default: beam 3, 3-best, the defaults)."""
    search = search or (3, 3)
    eager = beam_search(model, src, *search, max_lengths=limits)
    compiled = beam_search(model, src, *search, max_lengths=limits, step=CompiledStep(model))
    assert [[h.tokens for h in hyps] for hyps in compiled] == [[h.tokens for h in hyps] for hyps in eager]
    assert [h.score for hyps in compiled for h in hyps] == \
        pytest.approx([h.score for hyps in eager for h in hyps], abs=1e-4)


def test_compiled_greedy_equals_eager_greedy_with_one_graph_per_row_bucket():
    """6 sentences run as 8 rows (two finished copies) on the step for any count from 8 rows, then as
    4 once no more than 4 are left: two graphs, each for every step but the first (eager: a batch's).
    Batches of other sizes (8, 12 and 5 sentences, run as 8), source lengths, output lengths and
    padding reuse them."""
    model = one_layer_model()
    assert_same_greedy(model, *GREEDY)
    assert rows_compiled(model) == [0, 4] and rows_compiled(model, first=True) == []

    src = random_ids(8, 11, seed=1)
    src[1, 6:] = model.config.pad_id  # a padded source
    assert_same_greedy(model, src, torch.tensor([12, 4] * 4))
    assert_same_greedy(model, random_ids(12, 5, seed=6), torch.tensor([6] * 12))
    assert_same_greedy(model, src[:5], torch.tensor([5] * 5))
    assert rows_compiled(model) == [0, 4] and rows_compiled(model, first=True) == []


def test_sampling_with_a_seed_draws_the_same_tokens_compiled_as_eagerly():
    """Only the rows still decoding draw, so the random numbers fall alike whichever rows a step runs:
    6 sentences as 8 rows compiled (two copies topping the batch up), then 4; as 6 eagerly, the
    finished ones leaving later (the greedy test's graphs)."""
    model = one_layer_model()
    src, limits = GREEDY

    def sampled(step=None, top_k=0):
        generator = torch.Generator().manual_seed(5)
        return [h.tokens for h in greedy_search(model, src, limits, 1.0, top_k, generator, step)]

    assert sampled(CompiledStep(model)) == sampled()
    assert sampled(CompiledStep(model), top_k=3) == sampled(top_k=3)
    assert rows_compiled(model) == [0, 4]


def address(t: torch.Tensor) -> int:
    return torch.ops.mkldnn.data_ptr(t) if t.is_mkldnn else t.data_ptr()


def share_weights(first: library.Runner, second: library.Runner) -> bool:
    """Whether two loaded steps compute with the same tensors in memory, every one of them."""
    mine, theirs = first.constants(), second.constants()
    assert mine.keys() == theirs.keys()
    shared = [address(mine[name]) == address(theirs[name]) for name in mine]
    assert all(shared) or not any(shared)
    return all(shared)


def test_the_steps_of_a_model_keep_one_copy_of_its_weights(tmp_path, monkeypatch):
    """A step's library holds the model's weights, which loading copies into memory. A model's next
    step uses the first one's weights instead where its entry's digests (name, layout, values) say
    they are the same, and frees its own copy; otherwise it keeps its own. Greedy decoding of 3
    sentences at 4 rows, then 2: both small steps, their weights not packed (`step_graph._packed`)."""
    model, (src, limits) = one_layer_model(), (GREEDY[0][:3], GREEDY[1][:3])
    assert_same_greedy(model, src, limits)
    ((_, step),) = step_graph._steps[model].values()
    first, second = step.runners()
    wanted = {"weights": store.weights_digest(step.module), "output": step.kinds()[0].output}
    entries = {recorded["fields"]["rows"]: (path, recorded["constants"])
               for path, recorded, _ in store.entries()
               if all(recorded["fields"][key] == value for key, value in wanted.items())}
    (_, four), (entry, two) = entries[4], entries[2]
    assert four == two and share_weights(first, second)  # one layout: one copy

    # In another process, the 2-row step's entry says one of its weights differs: it keeps its own.
    shutil.copytree(store.cache_dir(), tmp_path / "steps", ignore=shutil.ignore_patterns(".*"))
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(tmp_path))
    entry = tmp_path / "steps" / entry.name
    recorded = json.loads((entry / store.ENTRY).read_text())
    name = next(iter(recorded["constants"]))
    recorded["constants"][name] = "0" * 64
    (entry / store.ENTRY).write_text(json.dumps(recorded))
    model = copy.deepcopy(model)  # a model this process has not loaded steps for
    assert_same_greedy(model, src, limits)
    ((_, step),) = step_graph._steps[model].values()
    assert len(step.runners()) == 2 and not share_weights(*step.runners())


def test_a_search_of_one_or_two_sentences_compiles_its_first_step_too():
    """A request's search: its first step, one position at 2 rows (one a sentence, topped up to 2
    sentences), is a graph of its own, and the search computes what the model's own steps do."""
    model = one_layer_model()
    assert compiled.FIRST_STEP_ROWS == 2
    assert_same_beam(model, *ONE_SENTENCE)
    assert [(kind.rows, kind.output) for kind in graphs(model) if kind.first] == \
        [(2, "aiayn.decoding.beam.candidates")]
    assert rows_compiled(model) == [4]  # the later steps: the sentence's 4 beams (its filler has left)


def test_a_models_greedy_and_beam_search_steps_keep_one_copy_of_its_weights():
    """The steps of greedy decoding and of beam search of one model's weights share their weights too
    (where their entries' digests say they are the same: the beam search's step of 4 rows, whose
    weights are not packed, uses those the greedy steps loaded, packed or not, for every one), and
    loading them again for changed weights does not: the graphs of the greedy test and of the
    one-sentence beam test, compiled already."""
    model = one_layer_model()
    assert_same_greedy(model, *GREEDY)
    assert_same_beam(model, *ONE_SENTENCE)
    (_, greedy), (_, beam) = step_graph._steps[model].values()
    assert greedy.weights is beam.weights
    assert [kind.packed for kind in greedy.kinds()] == [True, False]  # 8 rows, then 4: plain weights
    same = [recorded["constants"] for _, recorded, _ in store.entries()
            if recorded["fields"]["weights"] == store.weights_digest(greedy.module)
            and not recorded["fields"]["packed"] and recorded["fields"]["output"] != whole.OUTPUT]
    loaded = {address(t) for runner in greedy.runners() for t in runner.constants().values()}
    mine = [address(t) in loaded for t in beam.runners()[-1].constants().values()]
    assert all(mine) == all(c == same[0] for c in same) and (all(mine) or not any(mine))

    with torch.no_grad():
        next(model.parameters()).add_(0.0)  # a change in place: new weights, as far as the steps know
    versions = step_graph.weight_versions(model)
    again = step_graph.packages_for(model, "logits", versions)
    assert again is not greedy and again.weights is not beam.weights


def test_compiled_beam_search_equals_eager_beam_search():
    """Beam 2 with its 2-best lists: 3 sentences run as 4 (8 rows: the step for any count), then as 2
    (4 rows) once at most 2 are left; a second batch of 4 sentences reuses both graphs. The graphs
    find the beams' candidates themselves (`beam.candidates`), eos forced where a sentence reaches its
    length limit (2 and 3 tokens) in a compiled step. (The beam-size test's graphs.)"""
    model = one_layer_model()
    assert_same_beam(model, random_ids(3, 6, seed=3), torch.tensor([2, 9, 9]), 2, 2)
    assert rows_compiled(model) == [0, 4]  # beams of 4 sentences, then of 2

    src = random_ids(4, 9, seed=4)
    src[2, 5:] = model.config.pad_id
    assert_same_beam(model, src, torch.tensor([8, 3] * 2), 2, 2)
    assert rows_compiled(model) == [0, 4]
    assert {kind.output for kind in graphs(model)} == {"aiayn.decoding.beam.candidates"}  # in the graph


def test_the_rules_against_repetition_find_the_same_hypotheses_compiled_as_eagerly():
    """The rules act on the logits a step gives, compiled or not: greedy decoding (the greedy test's
    graphs) and beam search (its logits at 8 rows) find the same hypotheses, scored alike. The n-gram
    rule alone, beam search's default, acts inside the step's graph (`beam.candidates_no_repeat`)."""
    model, rules = one_layer_model(), Repetition(penalty=1.5, ngram=2)
    src, limits = GREEDY
    eager = greedy_search(model, src, limits, repetition=rules)
    compiled = greedy_search(model, src, limits, step=CompiledStep(model), repetition=rules)
    assert [h.tokens for h in compiled] == [h.tokens for h in eager]
    assert [h.log_prob for h in compiled] == pytest.approx([h.log_prob for h in eager], abs=1e-4)
    src, limits = random_ids(4, 6, seed=3), torch.tensor([9, 6, 9, 9])
    eager = beam_search(model, src, 2, 2, max_lengths=limits, repetition=rules)
    compiled = beam_search(model, src, 2, 2, max_lengths=limits, step=CompiledStep(model), repetition=rules)
    assert [[h.tokens for h in hyps] for hyps in compiled] == [[h.tokens for h in hyps] for hyps in eager]
    assert [h.score for hyps in compiled for h in hyps] == \
        pytest.approx([h.score for hyps in eager for h in hyps], abs=1e-4)
    assert "aiayn.decoding.beam.candidates_no_repeat_2" not in {kind.output for kind in graphs(model)}

    rule = Repetition(ngram=2)
    eager = beam_search(model, src, 2, 2, max_lengths=limits, repetition=rule)
    compiled = beam_search(model, src, 2, 2, max_lengths=limits, step=CompiledStep(model), repetition=rule)
    assert [[h.tokens for h in hyps] for hyps in compiled] == [[h.tokens for h in hyps] for hyps in eager]
    assert [h.score for hyps in compiled for h in hyps] == \
        pytest.approx([h.score for hyps in eager for h in hyps], abs=1e-4)
    compiled_now = {(kind.rows, kind.output) for kind in graphs(model)}
    assert (0, "aiayn.decoding.beam.candidates_no_repeat_2") in compiled_now


def test_sampling_goes_on_from_a_prefix_compiled_as_eagerly():
    """A prefix in a batch that a compiled step tops up (3 sentences run as 4): the prefix rows follow
    the batch's, the forced tokens come first, and the draws after them are the eager search's."""
    model = one_layer_model()
    src, limits = random_ids(3, 6, seed=8), torch.tensor([6, 6, 6])
    prefix = torch.tensor([[9, 10], [11, -1], [-1, -1]])

    def sampled(step):
        generator = torch.Generator().manual_seed(4)
        return [h.tokens for h in greedy_search(model, src, limits, 1.0, 0, generator, step, prefix=prefix)]

    eager, compiled = sampled(None), sampled(CompiledStep(model))
    assert compiled == eager
    assert eager[0][:2] == [9, 10] and eager[1][0] == 11


def test_beam_searches_of_the_same_rows_and_another_beam_size_get_steps_of_their_own():
    """8 rows are 4 sentences of beam 2, or 2 of beam 4 (the step for any count of 8 or more): the
    beam search's inputs to the step differ in shape, so each beam size has a graph of its own (a
    server answers requests of any beam size)."""
    model = one_layer_model()
    src, limits = random_ids(4, 6, seed=8), torch.tensor([5, 3, 6, 4])
    for beam, n in ((2, 4), (4, 2), (2, 4)):
        assert_same_beam(model, src[:n], limits[:n], beam, beam)
    steps = {(kind.rows, kind.beams) for kind in graphs(model) if not kind.first}
    assert {(0, 2), (0, 4)} <= steps
    assert {(2, 2), (4, 4)} <= steps  # the last sentence searching, alone: its own beams' rows


@st.composite
def searches(draw: st.DrawFn) -> dict:
    """A search whose compiled steps other tests of this model compile anyway (greedy at any count from
    8 rows, 4 and 2, beam 2 at any, 4 and 2, beam 4 at any and 4, a search's first step at 2), with
    anything else drawn:
    sources of any length and padding (one-token ones run eagerly), output limits from 0, nbest,
    length penalties."""
    beam = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.integers(*{1: (5, 8), 2: (3, 4), 4: (1, 2)}[beam]))
    length = draw(st.integers(1, 9))
    src = random_ids(n, length, seed=draw(st.integers(0, 1000)))
    for i, words in enumerate(draw(st.lists(st.integers(1, length), min_size=n, max_size=n))):
        src[i, words:] = _fuzzed_model().config.pad_id
    limits = torch.tensor(draw(st.lists(st.integers(0, 10), min_size=n, max_size=n)))
    return {"src": src, "limits": limits, "beam": beam, "nbest": draw(st.integers(1, beam)),
            "alpha": draw(st.sampled_from([0.0, 0.6, 1.0, 2.5])),
            "form": draw(st.sampled_from(["gnmt", "plain"]))}


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(searches())
def test_any_search_compiled_finds_what_the_eager_search_finds(search):
    """The compiled step is the default once cached, so it must find the eager search's hypotheses for
    whatever a request asks (a step keyed by rows alone once answered another beam size's search
    with a graph of the wrong shape)."""
    model, src, limits = _fuzzed_model(), search["src"], search["limits"]
    if search["beam"] == 1:
        assert_same_greedy(model, src, limits)
        return
    assert_same_beam(model, src, limits, search["beam"], search["nbest"], search["alpha"], search["form"])


@functools.cache
def _fuzzed_model():
    """One model for every example (its compiled steps load once)."""
    return one_layer_model()


def test_compiled_beam_search_equals_eager_beam_search_with_relative_positions():
    """The compiled step adds the relative position embeddings as the model's own layers do: the
    same beam outputs without absolute positions, a padded source included."""
    model = one_layer_model(relative_positions=4, positional="none")
    src = random_ids(6, 9, seed=2)
    src[1, 5:] = model.config.pad_id
    assert_same_beam(model, src, torch.tensor([9, 12, 12, 12, 12, 12]))  # beams of 8 sentences


def test_sentences_leave_at_power_of_two_counts_of_2_rows_or_more_when_compiled():
    """Below 8 rows, the steps run at powers of two: greedy decoding keeps 2 sentences at least; a beam
    search's last sentence steps on alone. From 8 rows one step takes any count: the finished leave
    once they are 1/8 of the batch, as from the model's own step."""
    compiled, eager = CompiledStep(tiny_model()), Step(tiny_model())
    done = torch.tensor([True, False, True, False, False, True, True, True] * 2)
    assert compiled.rows_to_keep(done).tolist() == [1, 3, 4, 9, 11, 12, 0, 2]  # unfinished first
    assert compiled.rows_to_keep(~done).tolist() == [0, 2, 5, 6, 7, 8, 10, 13, 14, 15]  # 10 of 16
    one = torch.zeros(16, dtype=torch.bool)
    one[3] = True
    assert compiled.rows_to_keep(one) is None  # 1 of 16 finished: it stays
    assert compiled.rows_to_keep(done[:8]).tolist() == [1, 3, 4, 0]  # 3 unfinished: 4 rows
    assert compiled.rows_to_keep(torch.tensor([True, True, False])).tolist() == [2, 0]
    assert compiled.rows_to_keep(torch.tensor([True, False])) is None  # never fewer than 2 rows
    assert compiled.rows_to_keep(torch.tensor([True, False]), 4).tolist() == [1]  # 4 beams: 4 rows
    assert compiled.rows_to_keep(torch.tensor([True, False, False]), 2).tolist() == [1, 2]
    assert eager.rows_to_keep(done).tolist() == [1, 3, 4, 9, 11, 12]
    assert [row_bucket(n) for n in (1, 2, 3, 5, 7, 8, 9, 33, 129)] == [2, 2, 4, 8, 8, 8, 9, 33, 129]
    assert [row_bucket(n, 4) for n in (1, 2, 3, 33)] == [1, 2, 3, 33] and row_bucket(1, 2) == 1
    assert [row_bucket(n, 2) for n in (1, 2, 3, 4)] == [1, 2, 4, 4]  # 4 sentences of 2 rows: any count
    assert compiled_kinds_rows(8) == 0 and compiled_kinds_rows(4) == 4 and compiled_kinds_rows(2) == 2


def compiled_kinds_rows(rows: int) -> int:
    """`Kind.rows` of a later step of `rows` rows: 0 for the step that takes any count."""
    return 0 if step_graph._takes_any_count(rows, first=False) else rows


def test_large_batches_leave_once_an_eighth_of_their_sentences_have_finished():
    """A batch of 128 whose sentences finish one by one: the unfinished go on alone (first, in order)
    once 16 have finished, on the step for any count."""
    done = torch.zeros(128, dtype=torch.bool)
    done[::9] = True  # 15 finished: all stay
    assert CompiledStep(tiny_model()).rows_to_keep(done) is None
    done[::5] = True  # 38 finished, 90 unfinished: they alone go on
    keep = CompiledStep(tiny_model()).rows_to_keep(done)
    assert len(keep) == 90 and not done[keep].any() and keep.tolist() == sorted(keep.tolist())


def test_traced_ancestors_name_the_histories_that_reordering_would_move():
    """With `trace_ancestors`, reorder and select leave keys and values where they are (the buffers
    keep all their rows when sentences leave); reading each row's positions from the rows the table
    names gives what the copying cache holds, and each kept row writes its next positions in a
    buffer row of its own."""
    model = tiny_model()
    src, tgt = random_ids(3, 5), random_ids(6, 3, seed=1)
    with torch.no_grad():  # a cache of tensors outside autograd, as the searches make, can be copied
        copying = model.init_cache(model.encode(src), capacity=8, rows_per_sentence=2)
        for i in range(3):
            model.decode(tgt[:, i:i + 1], None, src, copying)
    kept = copy.deepcopy(copying)
    traced = TracedCache(kept.self_attn, kept.cross_attn, kept.rows_per_sentence)
    traced.trace_ancestors()  # no reordering yet: the table names every row's own positions
    for rows in (torch.tensor([1, 1, 2, 2, 5, 4]), torch.tensor([0, 0, 3, 2, 4, 4])):
        copying.reorder(rows)
        traced.reorder(rows)
    copying.select(torch.tensor([2, 1]))  # sentences 2 and 1 stay, in that order
    traced.select(torch.tensor([2, 1]))
    n = traced.length
    where = traced.ancestors[:, :n], torch.arange(n)  # (4, n), (n,)
    assert traced.ancestors.tolist() != [[row] * 8 for row in range(4)]  # some history lies elsewhere
    assert len(traced.self_attn[0].k) == 6 and len(traced.cross_attn[0][0]) == 2  # nothing copied
    assert traced.ancestors[:, n:].tolist() == [[row] * (8 - n) for row in range(4)]
    for mine, reference in zip(traced.self_attn, copying.self_attn, strict=True):
        assert torch.equal(mine.k[where].transpose(1, 2), reference.filled()[0])
        assert torch.equal(mine.v[where].transpose(1, 2), reference.filled()[1])


@pytest.mark.parametrize("beyond", ["one-token sources", "a cache longer than a compiled step takes"])
def test_a_batch_beyond_the_compiled_step_searches_eagerly_with_the_models_own_histories(beyond, monkeypatch):
    """Sizes the compiled step does not take run every step eagerly: the beams' histories must then move
    with them (no traced table, which only the compiled step reads), or hypotheses mix up histories."""
    model = tiny_model()
    if beyond == "one-token sources":
        src, limits = random_ids(3, 1), torch.tensor([12, 12, 12])
    else:
        monkeypatch.setattr(compiling, "LARGEST", 8)  # capacity 14 > 8
        src, limits = random_ids(3, 5), torch.tensor([12, 12, 12])
    assert_same_beam(model, src, limits)
    assert graphs(model) == []  # nothing compiled: every step was eager


def test_constrained_beam_search_compiled_finds_what_it_finds_eagerly():
    """The compiled step gives the log-probabilities; the constraints choose among them as eagerly."""
    from aiayn.decoding.constrained import Constraints, Steer

    model = one_layer_model()
    src, limits = random_ids(3, 6, seed=5), torch.tensor([9, 9, 9])
    steers = [Steer(((7, 8),)), Steer(), Steer(((9,), (10, 11)), prefix=(12,))]
    eager = beam_search(model, src, 2, 2, max_lengths=limits, constraints=Constraints(steers))
    compiled = beam_search(model, src, 2, 2, max_lengths=limits, step=CompiledStep(model),
                           constraints=Constraints(steers))
    assert [[h.tokens for h in hyps] for hyps in compiled] == [[h.tokens for h in hyps] for hyps in eager]
    assert [h.score for hyps in compiled for h in hyps] == \
        pytest.approx([h.score for hyps in eager for h in hyps], abs=1e-4)
    assert eager[2][0].tokens[0] == 12 and {9, 10} <= set(eager[2][0].tokens)


@pytest.mark.skipif(not (torch._C.has_mkl and torch.backends.mkldnn.is_available()),
                    reason="Inductor packs float linears on CPUs with MKL and oneDNN only")
def test_a_step_of_a_few_rows_compiles_its_linears_unpacked_and_a_later_step_packed_again(tmp_path):
    """Inductor registers its rewrite packing float linears once per process, for every later compile
    (`compiling.packing` registers it first): the seam finds it (a torch upgrade that moves it fails
    here, loudly), an unpacked compile packs none, a packed compile after it packs them again, and the
    rewrites are put back as they were."""
    from torch._dynamo.utils import counters
    from torch._inductor import config as inductor_config
    from torch._inductor.fx_passes import freezing_patterns

    def packed_linears(pack: bool) -> int:
        before = counters["inductor"]["mkldnn_linear_weight_pack_matcher_count"]
        module = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)).eval()
        with torch.no_grad(), compiling.packing(pack), inductor_config.patch(
                freezing=True, force_disable_caches=True):  # the passes run, not a cached graph
            exported = torch.export.export(module, (torch.randn(4, 16),), strict=False)
            torch._inductor.aoti_compile_and_package(exported, package_path=str(tmp_path / f"{pack}.pt2"))
        return counters["inductor"]["mkldnn_linear_weight_pack_matcher_count"] - before

    def rewrites():
        return [(id(entries), list(entries)) for matcher in freezing_patterns.pass_patterns
                for entries in matcher.patterns.values()]

    assert packed_linears(False) == 0
    registered = rewrites()
    assert any(compiling.packs_linear(entry) for _, entries in registered for entry in entries)
    assert packed_linears(True) == 2  # the rewrites put back
    assert rewrites() == registered
