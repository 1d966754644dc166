"""Translated files kept for their download (LibreTranslate's `translatedFileUrl`), in memory:
the newest `count` of them, each for `ttl` seconds."""

from __future__ import annotations

import re
import time
import uuid
from collections import OrderedDict


class TranslatedFiles:
    def __init__(self, count: int = 64, ttl: float = 600.0) -> None:
        self.count, self.ttl = count, ttl
        self._files: OrderedDict[str, tuple[float, str, bytes]] = OrderedDict()

    def add(self, name: str, data: bytes) -> str:
        """Keep `data`, to be downloaded as `name`; -> the name to fetch it by (a random prefix
        and `name` with only safe characters, as LibreTranslate names them)."""
        self._expire()
        safe = re.sub(r"[^\w.-]", "_", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]).lstrip(".") or "file"
        key = f"{uuid.uuid4().hex}.{safe}"
        self._files[key] = (time.monotonic() + self.ttl, safe, data)
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
