"""Translated files kept for their download (LibreTranslate's `translatedFileUrl`), in memory:
the newest `count` of them, each for `ttl` seconds."""

from __future__ import annotations

import os
import re
import time
import unicodedata
import urllib.parse
import uuid
from collections import OrderedDict


class TranslatedFiles:
    def __init__(self, count: int = 64, ttl: float = 600.0) -> None:
        self.count, self.ttl = count, ttl
        self._files: OrderedDict[str, tuple[float, str, bytes]] = OrderedDict()

    def add(self, name: str, data: bytes) -> str:
        """Keep `data`, to be downloaded as `name` (its folders and control characters taken out);
        -> the name to fetch it by: a random prefix and `name` in ASCII letters, digits, `.`, `-` and
        `_`, as LibreTranslate names them."""
        self._expire()
        name = re.sub(r"[\x00-\x1f\x7f]", "", re.split(r"[/\\]", name)[-1]).strip() or "file"
        key = f"{uuid.uuid4().hex}.{ascii_name(name)}"
        self._files[key] = (time.monotonic() + self.ttl, name, data)
        while len(self._files) > self.count:
            self._files.popitem(last=False)
        return key

    def get(self, key: str) -> tuple[str, bytes] | None:
        """(the name to save it as, the file) or None: never kept, or expired."""
        self._expire()
        found = self._files.get(key)
        return None if found is None else found[1:]

    def _expire(self) -> None:
        now = time.monotonic()
        for key in [k for k, (until, _, _) in self._files.items() if until < now]:
            del self._files[key]


def ascii_name(name: str) -> str:
    """`name` in ASCII letters, digits, `.`, `-` and `_` ("Café Ü.docx" -> "Cafe_U.docx"); a name with
    none of them before its extension ("日本語.docx") -> "translated" and the extension."""
    def plain(text: str) -> str:
        return re.sub(r"[^A-Za-z0-9._-]+", "_", unicodedata.normalize("NFKD", text).encode("ascii", "ignore")
                      .decode())

    stem, suffix = os.path.splitext(name)
    return (plain(stem).strip("._") or "translated") + plain(suffix)


def attachment(name: str) -> str:
    """A Content-Disposition header that saves the file as `name`, whatever its characters (RFC 6266):
    an ASCII `filename` for old clients and the UTF-8 `filename*` that browsers prefer."""
    plain = ascii_name(name)
    header = f'attachment; filename="{plain}"'
    if name != plain:
        header += f"; filename*=UTF-8''{urllib.parse.quote(name, safe='')}"
    return header
