"""Typed configuration: the model's hyper-parameters (named as in the paper), data and training.

Each field carries its help text, its allowed values (`choices`) or range (`bounds`) in
`metadata`, so the command line (`aiayn train --help`), recipe files and `aiayn info` explain
and check every option from one place. Every value is checked when a config is built, from
flags and TOML alike: a wrong type, a value out of range or an unknown key is a `ConfigError`
that names the option, never a traceback later in training. Presets are plain dictionaries of
overrides.
"""

from aiayn.config.fields import (
    DEVICE,
    LISTS,
    ConfigError,
    build,
    check_device,
    describe_bounds,
    in_bounds,
    to_dict,
)
from aiayn.config.model import PRESETS, ModelConfig, model_config
from aiayn.config.recipes import SECTIONS, Recipe, default_preset, load_config_file, recipe
from aiayn.config.training import DataConfig, TrainConfig
from aiayn.config.translating import DecodeConfig, ServeConfig

__all__ = ["DEVICE", "LISTS", "PRESETS", "SECTIONS", "ConfigError", "DataConfig", "DecodeConfig",
           "ModelConfig", "Recipe", "ServeConfig", "TrainConfig", "build", "check_device", "default_preset",
           "describe_bounds", "in_bounds", "load_config_file", "model_config", "recipe", "to_dict"]
