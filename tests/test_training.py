"""The public training API (training.py): `aiayn.train_model` trains, resumes, and checks its options."""

import threading

import pytest
import torch

import aiayn
from aiayn import checkpoint
from aiayn.config import PRESETS, ConfigError
from aiayn.data import prepared

TINY = dict(preset="tiny", train="synthetic:reverse", batch_tokens=512, warmup_steps=10, valid_every=0,
            bleu_every=0, log_every=1, threads=1)


def test_train_model_trains_and_the_run_translates(tmp_path):
    run = aiayn.train_model(tmp_path / "run", max_steps=6, save_every=3, **TINY)
    assert isinstance(run, aiayn.TrainingRun)
    assert (run.step, run.stopped_by) == (6, None)
    assert run.checkpoint == checkpoint.step_path(tmp_path / "run", 6) and run.checkpoint.is_dir()
    assert run.metrics["loss"] > 0
    ck = checkpoint.load(run.checkpoint)
    assert ck.model.config.d_model == PRESETS["tiny"]["d_model"]
    assert ck.train.max_steps == 6 and ck.data.train == ("synthetic:reverse",)
    translation = aiayn.load_translator(run.run_dir).translate(["abc"])[0]
    assert isinstance(translation.text, str)


def test_options_override_the_preset_and_the_recipe_file(tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('preset = "tiny"\n[model]\nd_ff = 96\nn_heads = 2\n[train]\nmax_steps = 2\n')
    run = aiayn.train_model(tmp_path / "run", config=recipe, n_heads=4, **{**TINY, "preset": None})
    config = checkpoint.load(run.checkpoint).model.config
    assert (config.d_ff, config.n_heads, run.step) == (96, 4, 2)  # file over preset, option over file


def test_resume_continues_the_run(tmp_path):
    aiayn.train_model(tmp_path / "run", max_steps=3, **TINY)
    run = aiayn.train_model(tmp_path / "run", resume=True, max_steps=5)
    assert run.step == 5
    names = sorted(p.name for p in checkpoint.step_checkpoints(tmp_path / "run"))
    assert names == ["step_00000003", "step_00000005"]


@pytest.mark.parametrize("options, message", [
    (dict(resume=True, d_model=32), r"cannot change d_model \(the run has 64, asked 32\)"),
    (dict(resume=True, preset="small"), r"cannot change .*d_model \(the run has 64, asked 256\)"),
    (dict(resume=True, train="synthetic:copy"), r"cannot change train \(the run has synthetic:reverse, "
                                                r"asked synthetic:copy\)"),
    (dict(resume=True, max_steps=3), "has already reached --max-steps 3"),
])
def test_resume_refuses_what_it_cannot_do(tmp_path, options, message):
    aiayn.train_model(tmp_path / "run", max_steps=3, **TINY)
    with pytest.raises(ConfigError, match=message):
        aiayn.train_model(tmp_path / "run", **options)


def test_resume_takes_the_command_that_started_the_run_and_its_recipe_file(tmp_path, capsys):
    """A script may repeat its first command with resume: the preset, the recipe file and model and
    data options equal to the saved run's are accepted, and the recipe's training options replace
    the saved ones, as options do."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_text('preset = "tiny"\n[model]\nd_ff = 96\n[data]\nbatch_tokens = 512\n'
                      '[train]\nmax_steps = 2\n')
    started = dict(TINY, batch_tokens=None)
    aiayn.train_model(tmp_path / "run", config=recipe, **started)
    recipe.write_text(recipe.read_text().replace("max_steps = 2", "max_steps = 4"))
    capsys.readouterr()
    run = aiayn.train_model(tmp_path / "run", resume=True, config=recipe, **started)
    assert run.step == 4 and checkpoint.load(run.checkpoint).model.config.d_ff == 96
    assert "training options changed: --max-steps 2 -> 4" in capsys.readouterr().out
    recipe.write_text(recipe.read_text().replace("d_ff = 96", "d_ff = 128").replace("= 4", "= 6"))
    with pytest.raises(ConfigError, match=r"cannot change d_ff \(the run has 96, asked 128\)"):
        aiayn.train_model(tmp_path / "run", resume=True, config=recipe, **started)
    assert checkpoint.resolve(tmp_path / "run").name == "step_00000004"  # nothing trained


def test_resume_checks_the_options_given_against_the_runs_own_not_the_defaults(tmp_path):
    """A linear decay needs max_steps over warmup_steps: the run's warm-up (1), not the default's."""
    aiayn.train_model(tmp_path / "run", **{**TINY, "warmup_steps": 1, "lr_decay": "linear", "max_steps": 2})
    run = aiayn.train_model(tmp_path / "run", resume=True, preset="tiny", lr_decay="linear", max_steps=3)
    assert run.step == 3


@pytest.mark.parametrize("options, message", [
    (dict(max_stpes=3), "unknown training option.s. max_stpes"),
    (dict(d_model=-8), "d_model=-8"),
    (dict(preset="huge"), "unknown preset 'huge'"),
])
def test_bad_options_fail_before_any_data_is_read(tmp_path, options, message):
    with pytest.raises(ConfigError, match=message):
        aiayn.train_model(tmp_path / "run", **{**TINY, "train": "no/such/file", **options})
    assert not (tmp_path / "run").exists()


def test_a_run_directory_with_checkpoints_needs_resume(tmp_path):
    aiayn.train_model(tmp_path / "run", max_steps=2, **TINY)
    with pytest.raises(ConfigError, match="already holds checkpoints"):
        aiayn.train_model(tmp_path / "run", max_steps=4, **TINY)


def test_training_runs_in_a_thread_other_than_the_main_one(tmp_path):
    """Signals belong to the main thread: a run started from another (a notebook's worker, a
    server) trains without installing handlers."""
    result, errors = [], []

    def work():
        try:
            result.append(aiayn.train_model(tmp_path / "run", max_steps=2, **TINY))
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert not errors and result[0].step == 2


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data directory `aiayn prepare` made from synthetic:reverse."""
    out = tmp_path_factory.mktemp("prepared") / "data"
    tokenizer, _ = prepared.learn_tokenizer("synthetic:reverse", "en", "de", PRESETS["tiny"]["vocab_size"], 1,
                                            2_000_000)
    prepared.prepare(out, "synthetic:reverse", None, "en", "de", tokenizer, 256)
    return out


def test_resume_takes_a_data_directory_again_whatever_vocabulary_size_was_asked_beside_it(tmp_path, data_dir):
    """A tokenizer given sets the vocabulary, as in a fresh run: the size asked beside it is not compared."""
    options = {**TINY, "max_steps": 2, "vocab_size": 300}
    del options["train"]
    aiayn.train_model(tmp_path / "run", data=str(data_dir), **options)
    run = aiayn.train_model(tmp_path / "run", resume=True, data=str(data_dir), **{**options, "max_steps": 3})
    assert run.step == 3 and checkpoint.load(run.checkpoint).model.config.vocab_size > 300


def test_training_from_a_data_directory_makes_the_same_updates_as_from_the_text(tmp_path, data_dir):
    """The memory-mapped corpus holds the pairs tokenizing the text gives, so the batches, and the
    weights after them, are the same."""
    options = {**TINY, "max_steps": 4, "max_len": 6}  # 6 drops some pairs
    del options["train"]
    mapped = aiayn.train_model(tmp_path / "mapped", data=str(data_dir), **options)
    text = aiayn.train_model(tmp_path / "text", train="synthetic:reverse", tokenizer=str(data_dir), **options)
    a, b = checkpoint.load(mapped.checkpoint), checkpoint.load(text.checkpoint)
    assert a.data.train == (str(data_dir / "train"),) and a.data.valid == str(data_dir / "valid")
    for (name, x), y in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        assert torch.equal(x, y), name
    assert mapped.metrics["loss"] == text.metrics["loss"]
    resumed = aiayn.train_model(tmp_path / "mapped", resume=True, max_steps=6)
    assert resumed.step == 6


@pytest.mark.parametrize("options, message", [
    (dict(train="synthetic:copy"), "already sets --train"),
    (dict(tgt_lang="fr"), "already sets --tgt-lang"),
    (dict(tokenizer="x"), "already sets --tokenizer"),
])
def test_a_data_directory_and_what_it_stands_for_are_not_given_together(tmp_path, data_dir, options, message):
    with pytest.raises(ConfigError, match=message):
        aiayn.train_model(tmp_path / "run", **{**TINY, "train": None, "data": str(data_dir), **options})
    assert not (tmp_path / "run").exists()


SEPARATE = dict(vocabulary="separate", share_embeddings=False, vocab_size=300, src_vocab_size=320)


def test_separate_vocabularies_train_save_and_translate(tmp_path):
    run = aiayn.train_model(tmp_path / "run", max_steps=2, **{**TINY, **SEPARATE})
    ck = checkpoint.load(run.checkpoint)
    assert ck.tokenizer.separate
    sizes = ck.tokenizer.source_vocab_size, ck.tokenizer.vocab_size  # at most the sizes asked (a small text)
    assert sizes[0] != sizes[1] and sizes[0] <= 320 and sizes[1] <= 300
    model = ck.model
    assert (model.src_embed.weight.shape[0], model.tgt_embed.weight.shape[0]) == sizes
    assert model.output_proj.weight is model.tgt_embed.weight  # tie_output still ties the target side
    assert isinstance(aiayn.load_translator(run.run_dir).translate(["abc"])[0].text, str)


def test_the_vocabulary_options_are_checked_against_each_other_and_the_tokenizer(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="needs one vocabulary: with vocabulary=separate pass --no-share"):
        aiayn.train_model(tmp_path / "a", **{**TINY, "vocabulary": "separate"})
    options = {**TINY, **SEPARATE, "train": None}
    with pytest.raises(ConfigError, match="has one joint vocabulary: train with --vocabulary joint"):
        aiayn.train_model(tmp_path / "b", data=str(data_dir), **options)


def test_a_data_directory_with_separate_vocabularies_trains(tmp_path):
    tokenizer, _ = prepared.learn_tokenizer("synthetic:reverse", "en", "de", 300, 1, 1000, src_vocab_size=320)
    prepared.prepare(tmp_path / "data", "synthetic:reverse", "", "en", "de", tokenizer, 256)
    run = aiayn.train_model(tmp_path / "run", data=str(tmp_path / "data"), max_steps=2,
                            **{**TINY, **SEPARATE, "train": None})
    assert checkpoint.load(run.checkpoint).model.src_embed.weight.shape[0] == tokenizer.source_vocab_size
