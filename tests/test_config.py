import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.config import (
    PRESETS,
    ConfigError,
    DataConfig,
    DecodeConfig,
    ModelConfig,
    ServeConfig,
    TrainConfig,
    build,
    default_preset,
    load_config_file,
    model_config,
    recipe,
)


def shape(c: ModelConfig) -> tuple:
    return c.n_encoder_layers, c.n_decoder_layers, c.d_model, c.d_ff, c.n_heads, c.dropout


def test_presets_follow_the_papers_table_3():
    assert shape(model_config("base")) == (6, 6, 512, 2048, 8, 0.1)
    assert shape(model_config("big")) == (6, 6, 1024, 4096, 16, 0.3)
    assert {"small", "tiny"} <= set(PRESETS)


def test_defaults_follow_the_paper():
    c = ModelConfig()
    assert (c.norm_position, c.positional, c.pe_layout) == ("post", "sinusoidal", "interleaved")
    assert c.activation == "relu" and c.dropout == 0.1
    assert c.share_embeddings and c.tie_output and c.d_k == 64


def test_unknown_keys_and_bad_values_are_errors():
    with pytest.raises(ConfigError, match="unknown ModelConfig option.*d_modle"):
        build(ModelConfig, {"d_modle": 3})
    with pytest.raises(ConfigError, match="not divisible"):
        model_config("base", n_heads=7)
    with pytest.raises(ConfigError, match="activation='tanh' is not one of"):
        model_config("base", activation="tanh")
    with pytest.raises(ConfigError, match="unknown preset"):
        model_config("huge")


def test_recipe_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "recipe.toml"
    bad.write_text('preset = "small"\n[modle]\nd_model = 3\n')
    with pytest.raises(ConfigError, match=f"{bad}: unknown section"):
        load_config_file(bad)
    broken = tmp_path / "broken.toml"
    broken.write_text("[model\n")
    with pytest.raises(ConfigError, match=f"{broken}: cannot parse"):
        load_config_file(broken)


@pytest.mark.parametrize("cls, values, message", [
    (ModelConfig, {"d_model": "64"}, "d_model='64' must be an integer, not str"),
    (ModelConfig, {"share_embeddings": "false"}, "share_embeddings='false' must be true or false, not str"),
    (ModelConfig, {"n_encoder_layers": -1}, "n_encoder_layers=-1 must be at least 1"),
    (ModelConfig, {"n_heads": 0}, "n_heads=0 must be at least 1"),
    (ModelConfig, {"dropout": True}, "dropout=True must be a number, not bool"),
    (ModelConfig, {"vocab_size": 3}, "vocab_size=3 must be at least 5"),
    (ModelConfig, {"eos_id": 600, "vocab_size": 512}, "eos_id=600 is not below vocab_size=512"),
    (TrainConfig, {"lr_scale": -1.0}, "lr_scale=-1.0 must be greater than 0"),
    (TrainConfig, {"label_smoothing": 1.5}, "label_smoothing=1.5 must be in [0, 1)"),
    (TrainConfig, {"clip_norm": -1.0}, "clip_norm=-1.0 must be at least 0"),
    (TrainConfig, {"keep_checkpoints": 0}, "keep_checkpoints=0 must be at least 1"),
    (TrainConfig, {"max_steps": -3}, "max_steps=-3 must be at least 0"),
    (TrainConfig, {"warmup_steps": 0}, "warmup_steps=0 must be at least 1"),
    (TrainConfig, {"adam_beta2": 1.5}, "adam_beta2=1.5 must be in [0, 1)"),
    (TrainConfig, {"threads": -1}, "threads=-1 must be at least 0"),
    (TrainConfig, {"device": "gpu9"}, "device='gpu9' is not one of auto, cpu, cuda, cuda:N, mps"),
    (TrainConfig, {"bleu_beam": 0}, "bleu_beam=0 must be at least 1"),
    (DataConfig, {"batch_tokens": 0}, "batch_tokens=0 must be at least 1"),
    (DataConfig, {"max_len": 0}, "max_len=0 must be at least 1"),
    (DecodeConfig, {"temperature": -1.0}, "temperature=-1.0 must be at least 0"),
    (DecodeConfig, {"top_k": -3}, "top_k=-3 must be at least 0"),
    (DecodeConfig, {"max_output_extra": -100}, "max_output_extra=-100 must be at least 0"),
    (DecodeConfig, {"length_penalty": float("nan")}, "length_penalty=nan must be a finite number"),
    (DecodeConfig, {"nbest": 5}, "nbest=5 must be at most beam_size=4"),
    (ServeConfig, {"port": 99999}, "port=99999 must be in [1, 65535]"),
    (ServeConfig, {"max_beam_size": 0}, "max_beam_size=0 must be at least 1"),
    (ServeConfig, {"max_wait_ms": "5"}, "max_wait_ms='5' must be a number, not str"),
])
def test_bad_values_are_config_errors_naming_the_option(cls, values, message):
    """Problem 7: values of the wrong type or out of range were accepted or crashed later."""
    with pytest.raises(ConfigError) as e:
        build(cls, values, "recipe.toml")
    assert str(e.value) == f"recipe.toml: {message}"


def test_an_integer_where_a_number_is_asked_for_becomes_a_float():
    assert build(ModelConfig, {"dropout": 0}).dropout == 0.0
    assert isinstance(build(ModelConfig, {"dropout": 0}).dropout, float)


def test_toml_recipe_values_are_checked_like_flags(tmp_path):
    """Problem 7: `share_embeddings = "false"` in TOML was read as true."""
    bad = tmp_path / "r.toml"
    bad.write_text('preset = "tiny"\n[model]\nshare_embeddings = "false"\n')
    with pytest.raises(ConfigError, match=f"{bad}: share_embeddings='false' must be true or false"):
        load_config_file(bad)
    for text, message in (('preset = 3\n', "unknown preset 3"), ('model = 1\n', r"\[model\] must be a table"),
                          ('[train]\nmax_steps = 1.5\n', "max_steps=1.5 must be an integer")):
        bad.write_text(text)
        with pytest.raises(ConfigError, match=message):
            load_config_file(bad)


def test_no_preset_means_base_on_a_gpu_and_small_elsewhere():
    """Problem 9: `aiayn train` without --preset built base (tens of millions of parameters) on a CPU."""
    assert default_preset("cpu") == "small" and default_preset("cuda:1") == "base"
    assert recipe({}, "x").preset == default_preset("auto")
    assert recipe({}, "x").preset_given is False and recipe({"preset": "tiny"}, "x").preset_given


# Any value of any TOML type in any section: a valid config or a ConfigError, never anything else.
toml_values = st.recursive(
    st.none().map(lambda _: "") | st.booleans() | st.integers(-2**63, 2**63 - 1)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8)
    | st.sampled_from(["small", "tiny", "relu", "pre", "cpu", "bfloat16", "gnmt", "auto"]),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6)
field_names = st.sampled_from(sorted({f.name for cls in (ModelConfig, DataConfig, TrainConfig)
                                      for f in dataclasses.fields(cls)} | {"nonsense"}))
sections = st.fixed_dictionaries({}, optional={
    "preset": toml_values,
    "model": st.dictionaries(field_names, toml_values, max_size=4) | toml_values,
    "data": st.dictionaries(field_names, toml_values, max_size=4),
    "train": st.dictionaries(field_names, toml_values, max_size=4),
    "extra": toml_values})


@settings(max_examples=300, deadline=None)
@given(sections)
def test_property_any_recipe_gives_a_config_or_a_config_error(raw):
    try:
        checked = recipe(raw, "recipe.toml")
    except ConfigError as e:
        assert str(e).startswith("recipe.toml: ")
        return
    model = build(ModelConfig, {**PRESETS[checked.preset], **checked.model})
    assert isinstance(model.d_model, int) and model.d_model % model.n_heads == 0
    assert all(0 <= getattr(model, f) < 1 for f in ("dropout", "attention_dropout", "activation_dropout"))
    assert checked.train.warmup_steps >= 1 and checked.data.batch_tokens >= 1


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_property_any_recipe_file_text_gives_a_config_or_a_config_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("recipes") / "r.toml"
    path.write_text(text, encoding="utf-8")
    try:
        load_config_file(path)
    except ConfigError as e:
        assert str(e).startswith(str(path))


@pytest.mark.parametrize("cls", [ModelConfig, DataConfig, TrainConfig, DecodeConfig, ServeConfig])
def test_every_config_checks_every_bound(cls):
    """Each field with bounds refuses a value beyond them (ServeConfig once checked none)."""
    import dataclasses

    for f in dataclasses.fields(cls):
        bounds = f.metadata.get("bounds")
        if bounds:
            low = float(bounds.split()[1]) if bounds.startswith(">") else float(bounds[1:].split(",")[0])
            with pytest.raises(ConfigError, match=f.name):
                build(cls, {f.name: (int if f.type == "int" else float)(low - 1)})
