"""Per-(caller, tool) rate limits: a fixed window of `calls` per `window` seconds.

Windows are aligned to the wall clock (window n covers [n*W, (n+1)*W)), so every replica sharing
Redis agrees on them; `retry_after` is the time left in the current window, rounded up.

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
        self._clock = clock or time.time
        self._buckets: dict[tuple[str, str], tuple[int, int]] = {}

    async def hit(self, bucket: str, key: str) -> float | None:
        now = self._clock()
        index = int(now // self.window)
        ident = (bucket, key)
        window, count = self._buckets.get(ident, (index, 0))
        if window != index:
            count = 0
        if count >= self.calls:
            return float(max(1, math.ceil((index + 1) * self.window - now)))
        self._buckets[ident] = (index, count + 1)
        if len(self._buckets) > 100_000:
            self._buckets = {k: v for k, v in self._buckets.items() if v[0] == index}
        return None

    async def peek(self, bucket: str, key: str) -> tuple[int, float]:
        """(calls counted in the current window, seconds until it resets), counting nothing."""
        now = self._clock()
        index = int(now // self.window)
        window, count = self._buckets.get((bucket, key), (index, 0))
        return (count if window == index else 0), (index + 1) * self.window - now
