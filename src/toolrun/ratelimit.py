"""Per-(caller, tool) rate limits: a fixed window of `calls` per `window` seconds.

One interface, `Limiter.hit(bucket, key) -> retry_after or None`; the in-memory limiter is the
embedded default, and a Redis one (same interface, atomic across replicas) is used when a
`redis_url` is set.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol


class Limiter(Protocol):
    async def hit(self, bucket: str, key: str) -> float | None:
        """Count one call; return None when allowed, else the seconds until the window resets."""
        ...


class MemoryLimiter:
    def __init__(self, calls: int, window: float, clock: Callable[[], float] | None = None) -> None:
        self.calls = calls
        self.window = window
        self._clock = clock or time.monotonic
        self._buckets: dict[tuple[str, str], tuple[float, int]] = {}

    async def hit(self, bucket: str, key: str) -> float | None:
        now = self._clock()
        ident = (bucket, key)
        start, count = self._buckets.get(ident, (now, 0))
        if now - start >= self.window:
            start, count = now, 0
        if count >= self.calls:
            return float(max(1, math.ceil(start + self.window - now)))
        self._buckets[ident] = (start, count + 1)
        if len(self._buckets) > 100_000:
            self._sweep(now)
        return None

    def _sweep(self, now: float) -> None:
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[0] < self.window}
