"""Search settings chosen on a validation set (`aiayn evaluate --sweep`): the sweep's choice, kept in
the checkpoint, and used when translating with the model unless an option says otherwise."""

import json
import shutil

import pytest

import aiayn
from aiayn import checkpoint, evaluate
from aiayn.cli import main


def test_the_sweep_tries_every_setting_and_ranks_by_bleu_then_chrf_then_the_smaller_beam():
    references = ["a b c d", "e f g h"]
    hypotheses = {  # (beam, penalty) -> output: a scripted "model"
        (4, 0.6): ["a b c d", "e f g x"],
        (4, 1.0): ["a b c d", "e f g h"],  # perfect
        (8, 0.6): ["a b c d", "e f g h"],  # as perfect, but a wider beam
        (8, 1.0): ["a b x d", "e f g h"],
    }
    asked = []

    def translate(beam, penalty):
        asked.append((beam, penalty))
        return hypotheses[beam, penalty]

    trials = evaluate.sweep(translate, references, [4, 8], [0.6, 1.0])
    assert sorted(asked) == sorted(hypotheses)
    assert [(t.beam_size, t.length_penalty) for t in trials[:2]] == [(4, 1.0), (8, 0.6)]
    assert trials[0].bleu == pytest.approx(100.0) and trials[-1].bleu < trials[1].bleu


@pytest.fixture
def model(trained_run, tmp_path):
    """A copy of the tiny trained model's newest checkpoint, to keep settings in."""
    copy = tmp_path / "model"
    shutil.copytree(checkpoint.resolve(trained_run), copy)
    return copy


def test_kept_settings_are_used_and_an_explicit_option_wins(model):
    assert aiayn.load_translator(model, device="cpu").defaults.beam_size == 4  # the paper's, none kept
    checkpoint.save_decoding(model, {"beam_size": 2, "length_penalty": 1.2}, {"on": "a validation set"})
    kept = aiayn.load_translator(model, device="cpu")
    assert (kept.defaults.beam_size, kept.defaults.length_penalty) == (2, 1.2)
    told = aiayn.load_translator(model, device="cpu", beam_size=5)
    assert (told.defaults.beam_size, told.defaults.length_penalty) == (5, 1.2)
    assert kept.config(length_penalty=0.6).length_penalty == 0.6  # per call too


def test_a_sweep_keeps_its_choice_where_translating_finds_it(model, capsys):
    assert main(["evaluate", str(model), "--sweep", "--sweep-beams", "1,2", "--sweep-penalties", "0.6,1.0",
                 "--test", "synthetic:reverse:val", "--device", "cpu"]) == 0
    kept = json.loads((model / "decoding.json").read_text())
    trials = kept["chosen"]["trials"]
    assert len(trials) == 4 and kept["chosen"]["on"] == "synthetic:reverse:val"
    best = trials[0]
    assert (kept["beam_size"], kept["length_penalty"]) == (best["beam_size"], best["length_penalty"])
    assert "chose beam" in capsys.readouterr().out
    translator = aiayn.load_translator(model, device="cpu")
    assert (translator.defaults.beam_size, translator.defaults.length_penalty) == \
        (kept["beam_size"], kept["length_penalty"])


def test_the_sweep_reads_the_models_own_validation_set_by_default(model, capsys):
    assert main(["evaluate", str(model), "--sweep", "--sweep-beams", "1", "--sweep-penalties", "0.6",
                 "--device", "cpu"]) == 0
    assert json.loads((model / "decoding.json").read_text())["chosen"]["on"] == "synthetic:reverse:val"


def test_a_damaged_settings_file_is_one_line_naming_it(model):
    (model / "decoding.json").write_text('{"beam_size": 0}')
    with pytest.raises(checkpoint.CheckpointError, match="decoding.json"):
        aiayn.load_translator(model, device="cpu")
    with pytest.raises(ValueError, match="not search settings"):
        checkpoint.save_decoding(model, {"nbest": 2}, {})
