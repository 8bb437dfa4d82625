"""How a stopping server ends: a drained stop is an ordinary exit, and a stop that hangs is cut short."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from typing import Any

log = logging.getLogger("toolrun.server")


def ignore_signal(signum: int, frame: Any) -> None:
    return None


SHUTDOWN_MARGIN = 1.0  # seconds a stopping server gets after its drain (`shutdown_grace`) before it exits anyway


def hard_stop_after(seconds: float) -> None:
    """The process exits (status 1) `seconds` from now if it is still there: whatever a reload is doing
    (a catalog that takes long, an `fn:` module whose import hangs), whatever thread the exit would
    wait for, a SIGTERM'd server is gone a second after its grace. The timer is the kernel's
    (SIGALRM), armed from the signal handler without taking a lock, and it is never disarmed: the
    process is on its way out."""

    def expire(signum: int, frame: Any) -> None:
        log.error(
            "still running %.1fs after the stop signal (shutdown_grace + %gs): exiting now", seconds, SHUTDOWN_MARGIN
        )
        for handler in logging.getLogger("toolrun").handlers + logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(1)

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
