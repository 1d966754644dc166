"""What a reader of a kind of file gives (text/documents.py): the file's texts in the format the
translator reads them in, and how to write the file back around their translations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiayn.errors import AiaynError


class DocumentError(AiaynError, ValueError):
    """A file that cannot be translated: its kind, or what is wrong with it and where."""


@dataclass
class Document:
    """A file's texts in the format the translator reads them in, and how to write the file back."""

    texts: list[str]
    format: str  # "text" or "html"
    write: Callable[[Sequence[str]], bytes]  # the translations, in order -> the translated file
