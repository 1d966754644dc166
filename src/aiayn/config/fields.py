"""What every config field is made of: its help text and the values it takes (`_opt`), the checks
run when a config is built (`_check_fields`), and `ConfigError`, which names the option and where it
came from.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import field
from typing import Any

from aiayn.errors import AiaynError


def _opt(default: Any, help: str, choices: tuple[str, ...] | None = None, flag: bool = True,
         bounds: str | None = None, metavar: str | None = None, joined: bool = False) -> Any:
    """A config field with its help text; `choices` or `bounds` (">= 1", "> 0", "[0, 1)") say which
    values it takes; `flag=False` keeps it off the command line; `joined`: a list field whose flag
    takes the items joined by commas (else the flag is given once per item)."""
    return field(default=default, metadata={"help": help, "choices": choices, "flag": flag,
                                            "bounds": bounds, "metavar": metavar, "joined": joined})


class ConfigError(AiaynError, ValueError):
    """A configuration value or key that cannot be used; the message says which and where."""

def build(cls: type, overrides: dict[str, Any], source: str = "overrides") -> Any:
    """Build `cls` from its defaults and `overrides`; any error names `source` (a file, the command line)."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigError(f"{source}: unknown {cls.__name__} option(s): {', '.join(unknown)}")
    try:
        return cls(**overrides)
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None



def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


def check_device(name: str) -> str:
    """`name` if it is a device aiayn knows how to ask for (auto, cpu, mps, cuda, cuda:N)."""
    if not DEVICE.match(name):
        raise ConfigError(f"device={name!r} is not one of auto, cpu, cuda, cuda:N, mps")
    return name


_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}
_TYPE_NAMES = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}
LISTS = {"tuple[str, ...]": "str", "tuple[float, ...]": "float"}  # list fields: the type of an item


def _check_fields(config: Any) -> None:
    """Every field has its declared type (an int where a float is asked for becomes a float; a list
    field takes a list, or one item, and becomes a tuple), one of its choices and a value within its
    bounds; otherwise a ConfigError names the field."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.type in LISTS:
            item = LISTS[f.type]
            items = [value] if isinstance(value, _TYPES[item]) and not isinstance(value, bool) else value
            if not isinstance(items, (list, tuple)):
                raise ConfigError(f"{f.name}={value!r} must be a list of {item}s, not {type(value).__name__}")
            object.__setattr__(config, f.name, tuple(_checked(f, item, v) for v in items))
        else:
            object.__setattr__(config, f.name, _checked(f, f.type, value))


def _checked(f: dataclasses.Field, kind: str, value: Any) -> Any:
    """`value` of field `f` (or an item of it) checked as a `kind` (int, float, str, bool)."""
    if not isinstance(value, _TYPES[kind]) or (isinstance(value, bool) and kind != "bool"):
        raise ConfigError(f"{f.name}={value!r} must be {_TYPE_NAMES[kind]}, not {type(value).__name__}")
    if kind == "float":
        if not math.isfinite(value):
            raise ConfigError(f"{f.name}={value!r} must be a finite number")
        value = float(value)
    choices, bounds = f.metadata.get("choices"), f.metadata.get("bounds")
    if choices and value not in choices:
        raise ConfigError(f"{f.name}={value!r} is not one of {', '.join(choices)}")
    if bounds and not in_bounds(value, bounds):
        raise ConfigError(f"{f.name}={value!r} must be {describe_bounds(bounds)}")
    return value


def in_bounds(value: float, bounds: str) -> bool:
    """Whether `value` lies within `bounds`: ">= x", "> x", or an interval such as "[0, 1)"."""
    if bounds.startswith(">"):
        op, limit = bounds.split()
        return value >= float(limit) if op == ">=" else value > float(limit)
    low, high = (float(x) for x in bounds[1:-1].split(","))
    above = value >= low if bounds[0] == "[" else value > low
    below = value <= high if bounds[-1] == "]" else value < high
    return above and below


def describe_bounds(bounds: str) -> str:
    if bounds.startswith(">"):
        op, limit = bounds.split()
        return f"{'at least' if op == '>=' else 'greater than'} {limit}"
    return f"in {bounds}"

