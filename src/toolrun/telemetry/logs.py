"""Log lines nobody can forge: text with every control character escaped, or one JSON object per line.

A request path, a header or a tool key can carry `%0A` / `%0D`; written raw, it would end the
line and start a forged, well-formed one. `TextFormatter` escapes control characters (C0, DEL,
C1, U+2028/U+2029) and the format characters that reorder or hide text (bidi controls such as U+202E, zero-width
characters) in the message as `\\n`, `\\r`, `\\t`, `\\xNN`, `\\uNNNN`; a traceback keeps its
line breaks but every line of it is indented, so none can pass for a log line of its own.

`JsonFormatter` writes `{"ts", "level", "logger", "message", ...}` per line (ASCII only, so no
character can break the line), plus the record's `fields` dict when it has one: the access log
(and any other structured log, such as an audit log) passes its fields with
``log.info(text, extra={"fields": {...}})`` and gets them as top-level keys.

`handler(level, fmt)` builds the stderr handler every toolrun process uses.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

# Control characters, line and paragraph separators, and the format characters that reorder or hide text (bidi
# marks, embeddings, overrides and isolates, zero-width characters, the BOM): a caller's U+202E would show the rest
# of a line, the status the server appended included, reversed.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\xad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape(text: str) -> str:
    """`text` on one line: every control character written as an escape sequence."""
    return _CONTROL.sub(_escape_one, text) if _CONTROL.search(text) else text


def _block(text: str) -> str:
    """A traceback or stack: its lines kept, each indented and escaped."""
    return "\n".join("    " + escape(line) for line in text.splitlines())


class TextFormatter(logging.Formatter):
    """`%(asctime)s %(levelname)s %(name)s: %(message)s`, the message on one line."""

    FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
    _second = -1
    _stamp = ""

    def __init__(self) -> None:
        super().__init__(self.FORMAT)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        """`2026-11-23 21:17:23,573`, the strftime part computed once per second (a log line per request)."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self.stamp(record.created, int(record.msecs))

    def stamp(self, created: float, msecs: int) -> str:
        second = int(created)
        if second != self._second:
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", self.converter(second))
            self._second = second
        return f"{self._stamp},{msecs:03d}"

    def line(self, created: float, level: str, name: str, message: str) -> str:
        """The line `format` writes for a record of these values with no exception or stack (the access log's)."""
        stamp = self.stamp(created, int((created - int(created)) * 1000))
        return self.FORMAT % {"asctime": stamp, "levelname": level, "name": name, "message": escape(message)}

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape(record.getMessage())
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += "\n" + _block(record.exc_text)
        if record.stack_info:
            line += "\n" + _block(self.formatStack(record.stack_info))
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line; a record's `fields` dict becomes top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        data = self._data(record.created, int(record.msecs), record.levelname, record.name, record.getMessage())
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                data.setdefault(str(key), value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            data["exc"] = record.exc_text
        if record.stack_info:
            data["stack"] = self.formatStack(record.stack_info)
        return json.dumps(data, ensure_ascii=True, default=str)

    @staticmethod
    def _data(created: float, msecs: int, level: str, name: str, message: str) -> dict[str, Any]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created))
        return {"ts": f"{stamp}.{msecs:03d}Z", "level": level.lower(), "logger": name, "message": message}

    def line(self, created: float, level: str, name: str, message: str, fields: dict[str, Any]) -> str:
        """The line `format` writes for a record of these values and `fields` with no exception or stack."""
        data = self._data(created, int((created - int(created)) * 1000), level, name, message)
        for key, value in fields.items():
            data.setdefault(key, value)
        return json.dumps(data, ensure_ascii=True, default=str)


def formatter(fmt: str) -> logging.Formatter:
    """The formatter of the `log_format` setting: `text` or `json`."""
    return JsonFormatter() if fmt.strip().lower() == "json" else TextFormatter()


def handler(fmt: str = "text") -> logging.Handler:
    out = logging.StreamHandler(sys.stderr)
    out.setFormatter(formatter(fmt))
    return out
