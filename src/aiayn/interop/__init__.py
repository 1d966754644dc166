"""Moving models in and out of other toolkits: HuggingFace Marian, CTranslate2, Argos Translate."""

import importlib
from types import ModuleType

from aiayn.errors import AiaynError


class ConversionError(AiaynError, ValueError):
    """A model feature the other toolkit cannot represent; the message says which."""


def require(module: str, extra: str = "interop") -> ModuleType:
    """Import an optional dependency, or fail saying how to install it (with aiayn's `extra`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"this needs the optional package {module.split('.')[0]!r}: "
                          f"pip install 'aiayn[{extra}]' (or pip install {module.split('.')[0]})") from e
