"""A wall clock a test moves ahead by hand, for rules that count time (key expiry): no test sleeps for them."""

from __future__ import annotations

import importlib
import time

import pytest

# Where the key rules read the wall clock (`toolrun.keyrules.now`, imported by name by access and the key stores).
KEY_CLOCKS = (
    "toolrun.keyrules.now",
    "toolrun.access.apikeys.now",
    "toolrun.state.sqlite.now",
    "toolrun.state.redis.now",
)


class Clock:
    """The real time, moved ahead by `advance` (it keeps running: another process that writes a real timestamp,
    `toolrun keys revoke`, still writes one in this clock's past)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += seconds


def key_clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """Every key rule (minting, expiry, revocation, grace) reads this clock for the rest of the test."""
    clock = Clock()
    for target in KEY_CLOCKS:  # all imported first: one imported while `now` is patched would keep the clock for good
        importlib.import_module(target.rpartition(".")[0])
    for target in KEY_CLOCKS:
        monkeypatch.setattr(target, clock)
    return clock
