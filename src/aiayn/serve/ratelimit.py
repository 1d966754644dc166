"""Requests per minute per client address and per API key, as LibreTranslate limits them."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from aiayn.serve.errors import Problem

WINDOW = 60.0  # seconds


class RateLimits:
    """At most `per_address` requests a minute from one address and `per_key` with one API key (0: no
    limit), counted in fixed one-minute windows; `check` answers 429 with Retry-After past one."""

    def __init__(self, per_address: int, per_key: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = {"address": per_address, "key": per_key}
        self.clock = clock
        self._windows: dict[tuple[str, str], tuple[float, int]] = {}  # (kind, who) -> (start, count)

    def check(self, address: str, key: str | None) -> None:
        """Count one request; past a limit, a 429 Problem (this request is not counted)."""
        now = self.clock()
        if len(self._windows) > 10_000:  # forget windows that have ended
            self._windows = {k: w for k, w in self._windows.items() if now - w[0] < WINDOW}
        counted = []
        for kind, who in (("address", address), ("key", key)):
            limit = self.limits[kind]
            if not limit or who is None:
                continue
            start, count = self._windows.get((kind, who), (now, 0))
            if now - start >= WINDOW:
                start, count = now, 0
            if count >= limit:
                retry = max(1, math.ceil(start + WINDOW - now))
                per = "API key" if kind == "key" else "client address"
                raise Problem(429, f"Slowdown: {limit} per 1 minute (per {per})", {"Retry-After": str(retry)})
            counted.append(((kind, who), (start, count + 1)))
        self._windows.update(counted)
