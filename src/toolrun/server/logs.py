"""The access log's handler for `toolrun serve`: lines written in batches (one write per event-loop iteration).

Every request writes an access log line; written one by one, each is a system call and a flush.
Here the lines of one loop iteration go out together, at the end of it (under load, dozens per
write); outside an event loop a line is written at once. Lines go to stderr like every other log
line, in the same format, and are flushed at exit.
"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
from typing import Any


class AccessHandler(logging.Handler):
    """Lines buffered in memory and written to stderr once per event-loop iteration."""

    def __init__(self, stream: Any = None) -> None:
        super().__init__()
        self.stream = stream
        self._pending: list[str] = []
        self._scheduled = False

    def _target(self) -> Any:
        return self.stream if self.stream is not None else sys.stderr

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:  # pragma: no cover - logging's own convention
            self.handleError(record)
            return
        self._pending.append(line)
        if self._scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._scheduled = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        text = "\n".join(self._pending) + "\n"
        self._pending.clear()
        target = self._target()
        try:
            raw = sys.__stderr__
            if target is raw and raw is not None:
                raw.flush()
                data = text.encode("utf-8", "backslashreplace")
                fd = raw.fileno()
                while data:
                    data = data[os.write(fd, data) :]
            else:
                target.write(text)
                target.flush()
        except (OSError, ValueError, io.UnsupportedOperation):  # stderr closed or gone: nothing to do
            pass

    def close(self) -> None:
        self.flush()
        super().close()
