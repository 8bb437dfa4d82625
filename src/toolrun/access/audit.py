"""The audit trail: one JSON line per tool call, whatever the door, written by ToolService.

A record (docs/operations.md lists every field)::

    {"ts": "2026-11-23T21:40:00.123Z", "level": "info", "logger": "toolrun.access.audit",
     "message": "tool call", "request_id": "…", "door": "http", "user": "alice",
     "client": "10.0.0.7", "key_prefix": "trk_ab12cd34ef", "tool": "ops.disk_usage",
     "outcome": "ok", "exit_code": 0, "error": null, "duration_ms": 12.3,
     "output_bytes": 512, "truncated": false, "args": {"path": "/var", "token": "[secret]"}}

Argument values are cut to ``MAX_VALUE`` characters, the values of `secret` params are replaced
by ``[secret]``, and the value of a name the tool does not declare (a misspelled `tokn` for `token`,
refused with a 400) by ``[undeclared]``: it could be a secret under a wrong name. The audit trail
is the only place toolrun writes argument values.

Targets (the ``audit_log`` setting): empty for none, ``-`` for stderr, else a file path. A
file is created with mode 0600 and opened in append mode; before each record its path is
checked against the open file (device and inode, as logging's WatchedFileHandler does), so a
logrotate rename or delete starts a new file at the path, with no signal and no restart.
Several processes (workers) may append to one file: each record is one ``write`` in O_APPEND. The path is
opened without following a link and must be a regular file of this process's user with one name: a link, a fifo,
another user's file or a hard link left there (by whoever may write its folder) is refused, at start, or at a
reopen, where records keep going to the file open before.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import random
import stat
import sys
import threading
from collections.abc import Mapping
from typing import Any

from .. import telemetry
from ..formatting import output_bytes
from ..models import CallOrigin, CallResult, Identity, ToolSpec
from ..telemetry.logs import JsonFormatter

_FORMATTER = JsonFormatter()

log = logging.getLogger("toolrun.access.audit")

MAX_VALUE = 200  # characters of one argument value kept in a record
MAX_ARGS = 50  # arguments recorded per call
SECRET = "[secret]"
UNDECLARED = "[undeclared]"  # the value of a name the tool does not declare: never recorded


def new_request_id() -> str:
    """16 hex digits. Unique, not secret: from `random` (reseeded in every forked worker), no system call."""
    return f"{random.getrandbits(64):016x}"


def clean_request_id(raw: str | None) -> str:
    """A client's X-Request-ID, kept when it is short printable ASCII; else a new id."""
    if raw and len(raw) <= 128 and raw.isascii() and raw.isprintable() and '"' not in raw and "\\" not in raw:
        return raw
    return new_request_id()


def _cut(text: str) -> str:
    if len(text) <= MAX_VALUE:
        return text
    return f"{text[:MAX_VALUE]}…[{len(text) - MAX_VALUE} more characters]"


def _value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return _cut(value)
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(value).__name__}>"
    if len(text) <= MAX_VALUE:
        return value
    return _cut(text)


def audit_args(tool: ToolSpec | None, args: Mapping[str, Any] | None) -> dict[str, Any]:
    """The arguments as recorded: secrets and undeclared names' values replaced, values cut, at most
    MAX_ARGS of them."""
    if not args:
        return {}
    params = tool.params if tool is not None else ()
    declared = {p.name for p in params}
    secrets = {p.name for p in params if p.secret}
    out: dict[str, Any] = {}
    for i, (name, value) in enumerate(args.items()):
        if i >= MAX_ARGS:
            out["…"] = f"{len(args) - MAX_ARGS} more arguments"
            break
        if name in secrets:
            shown = SECRET
        elif name not in declared:
            shown = UNDECLARED
        else:
            shown = _value(value)
        out[_cut(str(name))] = shown
    return out


_NO_ORIGIN = CallOrigin()


def call_record(
    identity: Identity,
    tool: ToolSpec,
    args: Mapping[str, Any] | None,
    origin: CallOrigin | None,
    outcome: str,
    result: CallResult | None,
    error: type[BaseException] | None,
    seconds: float,
) -> dict[str, Any]:
    """The audit record of a call that just ended (docs/operations.md lists the fields)."""
    origin = origin or _NO_ORIGIN
    ex = result.exec if result is not None else None
    record: dict[str, Any] = {
        "request_id": origin.request_id or None,
        "door": origin.door,
        "user": identity.username if not identity.anonymous else None,
        "anonymous": identity.anonymous,
        "client": identity.client or None,
        "key_prefix": identity.key_prefix or None,
        "tool": tool.key,
        "outcome": outcome,
        "exit_code": ex.returncode if ex is not None else None,
        "error": error.__name__ if error is not None else None,
        "duration_ms": round(seconds * 1000, 3),
        "output_bytes": output_bytes(result),
        "truncated": bool(ex is not None and ex.truncated),
        "args": audit_args(tool, args),
    }
    if origin.job_id:  # the job it ran for: a request id is the client's, and two clients may send the same
        record["job"] = origin.job_id
    if ex is not None and ex.truncated:
        record["bytes_dropped"] = ex.bytes_dropped
    trace_id = telemetry.current_trace_id()  # the call's span is current while its record is made
    if trace_id:
        record["trace_id"] = trace_id
    return record


class AuditLog:
    """Writes records as JSON lines to stderr or a file (reopened when rotated away)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._ident: tuple[int, int] | None = None
        if target != "-":
            self._open()  # a path that cannot be opened fails at start, not at the first call

    def _open(self) -> None:
        # Never through a link, never anything but a regular file: whoever may write the log's folder (a shared
        # /var/log/toolrun, a /tmp) could otherwise delete or rotate the file away and leave a link to any file
        # (/etc/sudoers), which the server appends to with its rights, or a fifo that blocks every call.
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(self.target, flags, 0o600)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, "not a regular file")
        # Nor a file of another user (left at the path after a rotation: they would read every record and could
        # rewrite the trail), nor a second name of a file (a hard link to another file of this user).
        if st.st_uid != os.geteuid() or st.st_nlink != 1:
            os.close(fd)
            why = "a file of another user" if st.st_uid != os.geteuid() else f"a file with {st.st_nlink} names"
            raise OSError(errno.EPERM, f"{why}, not one this server made")
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._ident = fd, (st.st_dev, st.st_ino)

    def _reopen_if_rotated(self) -> None:
        try:
            st = os.lstat(self.target)
            current: tuple[int, int] | None = (st.st_dev, st.st_ino)
        except FileNotFoundError:
            current = None
        if current != self._ident:
            try:
                self._open()
            except OSError as exc:  # the record goes to the file already open (the rotated one): none is lost
                log.error("audit log %s: cannot open it again (%s): writing to the file open before", self.target, exc)

    def write(self, fields: Mapping[str, Any], message: str = "tool call") -> None:
        # The one JSON formatter of toolrun's logs (`log_format = json`): an audit line has the same
        # envelope (ts, level, logger, message) as every other JSON log line, and the record's fields.
        record = logging.LogRecord("toolrun.access.audit", logging.INFO, "", 0, message, None, None)
        record.fields = dict(fields)
        line = _FORMATTER.format(record) + "\n"
        data = line.encode("utf-8", "replace")
        try:
            with self._lock:
                if self._fd is None:
                    sys.stderr.write(line)
                    sys.stderr.flush()
                    return
                self._reopen_if_rotated()
                os.write(self._fd, data)
        except (OSError, ValueError) as exc:  # a full disk must not fail the call it records
            log.error("audit log %s: cannot write: %s", self.target, exc)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def open_audit(target: str | None) -> AuditLog | None:
    """The `audit_log` setting: empty for no audit trail, `-` for stderr, else a path."""
    if not target:
        return None
    try:
        return AuditLog(target)
    except OSError as exc:
        from ..errors import UsageError

        raise UsageError(f"audit_log {target}: cannot open it for writing ({exc.strerror or exc})") from None
