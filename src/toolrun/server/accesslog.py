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
import time
from typing import Any

from ..telemetry.logs import JsonFormatter, TextFormatter


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
        self.add(line)

    def add(self, line: str) -> None:
        """Queue one formatted line (written at the end of this loop iteration)."""
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


_ACCESS = logging.getLogger("toolrun.access")


def _direct(logger: logging.Logger) -> tuple[AccessHandler, Any] | None:
    """The access logger's one way out, when a line can skip logging's records: `toolrun serve`'s own setup
    (one AccessHandler with toolrun's text or JSON formatter, no filters, no propagation), else None."""
    handlers = logger.handlers
    if len(handlers) != 1 or logger.propagate or logger.filters:
        return None
    handler = handlers[0]
    if type(handler) is not AccessHandler or handler.filters or handler.level > logging.INFO:
        return None
    if type(handler.formatter) not in (TextFormatter, JsonFormatter):
        return None
    return handler, handler.formatter


def access_line(client: str, method: str, path: str, query: str, status: int, ms: float, trace_id: str = "") -> None:
    """Log one request at INFO on `toolrun.access` (when enabled), as `access_log.info(...)` would.

    With tracing on, the line ends with ` trace=<trace id>` (JSON: a `trace_id` field).

    With `toolrun serve`'s logging the line is formatted here and queued on the handler: the same text
    (or JSON object) without a LogRecord and logging's dispatch, about a fifth of the cost."""
    if not _ACCESS.isEnabledFor(logging.INFO):
        return
    fields: dict[str, Any] = {
        "client": client,
        "method": method,
        "path": path,
        "query": query,
        "status": status,
        "ms": ms,
    }
    if trace_id:
        fields["trace_id"] = trace_id
    direct = _direct(_ACCESS)
    if direct is None:
        # The formatter escapes control characters (a `%0A` in the path cannot start a forged line);
        # `fields` are the JSON log's keys.
        form = '%s "%s %s%s" %d %.1fms' + (" trace=%s" if trace_id else "%s")
        _ACCESS.info(form, client, method, path, query, status, ms, trace_id, extra={"fields": fields})
        return
    handler, formatter = direct
    message = '%s "%s %s%s" %d %.1fms' % (client, method, path, query, status, ms)  # noqa: UP031 - the same text
    if trace_id:
        message += f" trace={trace_id}"
    created = time.time()
    if type(formatter) is JsonFormatter:
        handler.add(formatter.line(created, "INFO", _ACCESS.name, message, fields))
    else:
        handler.add(formatter.line(created, "INFO", _ACCESS.name, message))


def configure_logging(level: str, fmt: str = "text") -> None:
    """toolrun's loggers at `level`; everything else (uvicorn, asyncio) at warning or above; one format for all.

    Every line goes through `logs.TextFormatter` (control characters escaped) or `logs.JsonFormatter`.
    The access log (a line per request) writes its lines in batches, one write per event-loop iteration."""
    from ..telemetry.logs import formatter
    from ..telemetry.logs import handler as log_handler

    # The logging HOWTO's optimisations: no caller lookup (a stack walk per record), no thread or process
    # names: none of them is in either format. An access log line costs a third less.
    logging._srcfile = None
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    out = log_handler(fmt)
    ours = logging.getLogger("toolrun")
    ours.handlers[:] = [out]
    ours.setLevel(level.upper())
    ours.propagate = False
    root = logging.getLogger()
    root.handlers[:] = [out]
    root.setLevel(max(logging.WARNING, logging.getLevelName(level.upper())))
    access = AccessHandler()
    access.setFormatter(formatter(fmt))
    access_logger = logging.getLogger("toolrun.access")
    access_logger.handlers[:] = [access]
    access_logger.propagate = False
