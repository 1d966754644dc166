import pytest

from aiayn.config import PRESETS, ConfigError, ModelConfig, build, load_config_file, model_config


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
