"""The explain page's numbers are the model's own: recomputed here from the checkpoint's weights with
plain torch (no aiayn module), they match the page's data within 1e-5; its beam tree ends in the
translation `translate` gives."""

import math
import threading

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file

from aiayn import checkpoint
from aiayn.config import ConfigError
from aiayn.explain import explain
from aiayn.explain.data import f32, tensor
from aiayn.translation import load_translator

SENTENCE = "a b c d e f"
CLOSE = dict(atol=1e-5, rtol=1e-5)


@pytest.fixture(scope="module")
def translator(trained_run):
    return load_translator(trained_run, device="cpu", compile=False)


@pytest.fixture(scope="module")
def data(translator):
    return explain(translator, SENTENCE, beam_size=3)


class Reference:
    """The Transformer of the paper (post-norm, sinusoids, tied and shared embeddings), written out
    over a checkpoint's weights."""

    def __init__(self, run):
        path = checkpoint.resolve(run)
        self.w = load_file(path / "model.safetensors")
        self.c = checkpoint.load(path, "cpu", with_state=False).model.config
        assert (self.c.norm_position, self.c.positional, self.c.share_embeddings, self.c.tie_output) == (
            "post", "sinusoidal", True, True)
        self.embedding = self.w["output_proj.weight"]  # tied and shared: saved once

    def embed(self, ids):
        d = self.c.d_model
        position = torch.arange(len(ids), dtype=torch.float64)[:, None]
        angles = position / 10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
        pe = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1).float()  # sin even, cos odd
        rows = self.embedding[ids] * math.sqrt(d)
        return rows, pe, rows + pe

    def norm(self, x, name):
        return F.layer_norm(x, (x.size(-1),), self.w[f"{name}.weight"], self.w[f"{name}.bias"], 1e-5)

    def linear(self, x, name, rows=slice(None)):
        return x @ self.w[f"{name}.weight"][rows].T + self.w[f"{name}.bias"][rows]

    def attention(self, x, memory, name, causal=False):
        """-> q, k, v (N, D), scaled scores and weights (H, Nq, Nk), z (Nq, D), z W^O."""
        d, h = self.c.d_model, self.c.n_heads
        q = self.linear(x, f"{name}.in_proj", slice(0, d))
        k = self.linear(memory, f"{name}.in_proj", slice(d, 2 * d))
        v = self.linear(memory, f"{name}.in_proj", slice(2 * d, 3 * d))
        heads = lambda t: t.view(t.size(0), h, d // h).transpose(0, 1)  # noqa: E731
        scores = heads(q) @ heads(k).transpose(1, 2) / math.sqrt(d // h)
        if causal:
            scores = scores.masked_fill(torch.ones_like(scores, dtype=torch.bool).triu(1), float("-inf"))
        weights = scores.softmax(-1)
        z = (weights @ heads(v)).transpose(0, 1).reshape(x.size(0), d)
        return q, k, v, scores, weights, z, self.linear(z, f"{name}.out_proj")

    def feed_forward(self, x, name):
        hidden = self.linear(x, f"{name}.w1").relu()
        return hidden, self.linear(hidden, f"{name}.w2")


def test_every_encoder_number_on_the_page_is_recomputed_from_the_weights(trained_run, data):
    ref = Reference(trained_run)
    rows, pe, x = ref.embed(data["source"]["ids"])
    for name, expected in (("embedding", rows), ("position", pe), ("x", x)):
        torch.testing.assert_close(tensor(data["input"][name]), expected, **CLOSE)
    assert len(data["encoder"]) == ref.c.n_encoder_layers
    for i, layer in enumerate(data["encoder"]):
        name = f"encoder.layers.{i}"
        q, k, v, scores, weights, z, attention = ref.attention(x, x, f"{name}.self_attn")
        norm1 = ref.norm(x + attention, f"{name}.self_attn_res.norm")
        hidden, ffn = ref.feed_forward(norm1, f"{name}.feed_forward")
        norm2 = ref.norm(norm1 + ffn, f"{name}.feed_forward_res.norm")
        expected = dict(input=x, q=q, k=k, v=v, scores=scores, weights=weights, z=z, attention=attention,
                        norm1=norm1, feed_forward=ffn, norm2=norm2)
        for key, value in expected.items():
            torch.testing.assert_close(tensor(layer[key]), value, **CLOSE,
                                       msg=lambda m, key=key: f"{key}: {m}")
        assert layer["fired"] == (hidden > 0).sum(-1).tolist()
        x = norm2


def test_the_decoder_attention_and_output_distribution_are_recomputed(trained_run, data):
    ref = Reference(trained_run)
    memory = ref.embed(data["source"]["ids"])[2]
    for i in range(ref.c.n_encoder_layers):
        name = f"encoder.layers.{i}"
        memory = ref.norm(memory + ref.attention(memory, memory, f"{name}.self_attn")[-1],
                          f"{name}.self_attn_res.norm")
        memory = ref.norm(memory + ref.feed_forward(memory, f"{name}.feed_forward")[1],
                          f"{name}.feed_forward_res.norm")
    tgt_in = data["target"]["ids"][:-1]  # bos + the translation
    x = ref.embed(tgt_in)[2]
    for i in range(ref.c.n_decoder_layers):
        name = f"decoder.layers.{i}"
        *_, self_weights, _, out = ref.attention(x, x, f"{name}.self_attn", causal=True)
        x = ref.norm(x + out, f"{name}.self_attn_res.norm")
        *_, cross_weights, _, out = ref.attention(x, memory, f"{name}.cross_attn")
        x = ref.norm(x + out, f"{name}.cross_attn_res.norm")
        x = ref.norm(x + ref.feed_forward(x, f"{name}.feed_forward")[1], f"{name}.feed_forward_res.norm")
        torch.testing.assert_close(tensor(data["decoder"]["self_weights"][i]), self_weights, **CLOSE)
        torch.testing.assert_close(tensor(data["decoder"]["cross_weights"][i]), cross_weights, **CLOSE)
    probs = (x @ ref.embedding.T + ref.w["output_proj.bias"]).softmax(-1)  # (T, V)
    top = probs.topk(len(data["decoder"]["top"]["ids"][0]), dim=-1)
    torch.testing.assert_close(tensor(data["decoder"]["top"]["probs"]), top.values, **CLOSE)
    assert data["decoder"]["top"]["ids"] == top.indices.tolist()
    chosen = probs.gather(1, torch.tensor(data["target"]["ids"][1:])[:, None])[:, 0]
    torch.testing.assert_close(tensor(data["decoder"]["chosen"]), chosen, **CLOSE)


@pytest.mark.parametrize("options", [dict(beam_size=3), dict(beam_size=1),
                                     dict(beam_size=4, length_penalty=1.0, penalty_form="plain"),
                                     dict(beam_size=3, no_repeat_ngram_size=1)])  # no token twice
def test_the_search_tree_ends_in_the_translation_translate_gives(translator, options):
    data = explain(translator, SENTENCE, **options)
    expected = translator.translate([SENTENCE], split=False, **options)[0]
    assert data["translation"] == expected.text
    tree = data["search"]
    nodes, best = tree["nodes"], tree["nodes"][tree["best"]]
    path = []
    node = best
    while node["parent"] >= 0:
        path.append(node["token"])
        node = nodes[node["parent"]]
    assert path[::-1] == expected.tokens + [translator.model.config.eos_id]
    assert best["state"] == "finished" and best["log_prob"] == pytest.approx(expected.log_prob, abs=1e-4)
    if options["beam_size"] > 1:  # greedy search ranks by log-probability alone
        assert best["score"] == pytest.approx(expected.score, abs=1e-4)
    assert best["score"] == max(n["score"] for n in nodes if n["state"] == "finished")
    assert data["target"]["ids"][1:-1] == expected.tokens


def test_each_search_step_keeps_k_live_hypotheses_of_its_2k_candidates(data):
    tree, k = data["search"], 3
    nodes = tree["nodes"]
    for step, made in enumerate(tree["steps"], start=1):
        assert 1 <= len(made) <= 2 * k
        states = [nodes[i]["state"] for i in made]
        assert all(nodes[i]["step"] == step for i in made)
        assert states.count("live") <= k
        if step < len(tree["steps"]):  # a step the search went on from keeps K live hypotheses
            assert states.count("live") == k
        scores = [nodes[i]["log_prob"] for i in made]
        assert scores == sorted(scores, reverse=True)  # best first
        for i in made:  # a candidate extends a hypothesis live at the step before
            parent = nodes[nodes[i]["parent"]]
            assert parent["state"] in ("live", "root") and parent["step"] == step - 1
            if nodes[i]["state"] == "finished":
                assert nodes[i]["piece"] == "</s>"
                assert nodes[i]["score"] == pytest.approx(nodes[i]["log_prob"] / nodes[i]["penalty"])


def test_tensors_are_stored_exactly():
    t = torch.randn(3, 4, 5)
    assert torch.equal(tensor(f32(t)), t)


@pytest.mark.parametrize("sentence, options, message", [
    ("   ", {}, "the sentence is empty"),
    ("a " * 300, {}, "this model takes at most"),
    ("a b", {"temperature": 0.5}, "not sampling"),
])
def test_what_cannot_be_explained_is_an_error(translator, sentence, options, message):
    with pytest.raises(ConfigError, match=message):
        explain(translator, sentence, **options)


def test_searches_on_other_threads_do_not_enter_the_record(translator, data):
    """A server searches with the same model on another thread while it explains: only the explained
    sentence's computation is recorded."""
    stop = threading.Event()

    def search():
        while not stop.is_set():
            translator.translate(["g h i j k l m n", "o p"])

    other = threading.Thread(target=search)
    other.start()
    try:
        again = [explain(translator, SENTENCE, beam_size=3) for _ in range(3)]
    finally:
        stop.set()
        other.join()
    for d in again:  # the same numbers (to the last bits: kernels split their work by the threads free)
        for mine, alone in zip(d["encoder"], data["encoder"], strict=True):
            assert mine["fired"] == alone["fired"]
            for key in ("input", "q", "k", "v", "scores", "weights", "z", "attention", "norm1", "norm2"):
                torch.testing.assert_close(tensor(mine[key]), tensor(alone[key]), **CLOSE)
