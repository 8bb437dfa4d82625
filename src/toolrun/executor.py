"""Run a rendered command: `/bin/sh -c` in its own process group, time-boxed, output-capped.

Rules (spec 2.6) and the choices around them:
- the child gets stdin from /dev/null, or the JSON of the params in stdin mode (written while
  the output is read, so a child that never reads stdin cannot deadlock us);
- it never inherits the server's stdout (under stdio MCP that is the protocol stream);
- stdout and stderr are read incrementally; past `limits.output` bytes the rest is dropped
  and a visible marker says so;
- on timeout the whole process group (children and grandchildren) is killed and the result is
  ``(-1, "", "timeout after <seconds>s")``; after a normal exit any process the tool left
  behind in its group is killed too, so nothing outlives its call;
- resource limits are applied by prefixing ``prlimit --cpu=... --`` (no preexec_fn).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import warnings
from collections.abc import Mapping

from .models import ExecResult, ResourceLimits

CHUNK = 64 * 1024
# After the shell exits, how long a background grandchild may keep the pipes open.
DRAIN_GRACE = 0.2

_watcher_loops: set[int] = set()


def _use_pidfd_watcher() -> None:
    """On 3.11 the default child watcher starts a thread per child; pidfd is measurably faster."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return
    loop = asyncio.get_running_loop()
    if id(loop) in _watcher_loops:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            watcher = asyncio.PidfdChildWatcher()
            watcher.attach_loop(loop)
            asyncio.set_child_watcher(watcher)
        except Exception:  # pragma: no cover - kernels without pidfd
            return
    _watcher_loops.add(id(loop))


def format_seconds(seconds: float) -> str:
    return f"{seconds:g}"


class _Sink:
    """Collects up to `cap` bytes of a stream and counts the rest."""

    __slots__ = ("cap", "parts", "size", "dropped")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.dropped = 0

    async def pump(self, stream: asyncio.StreamReader) -> None:
        while True:
            chunk = await stream.read(CHUNK)
            if not chunk:
                return
            room = self.cap - self.size
            if room > 0:
                kept = chunk[:room]
                self.parts.append(kept)
                self.size += len(kept)
                self.dropped += len(chunk) - len(kept)
            else:
                self.dropped += len(chunk)

    def text(self, label: str) -> str:
        text = b"".join(self.parts).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[toolrun: {label} truncated: kept {self.cap} bytes, dropped {self.dropped}]\n"
        return text


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_PRLIMIT: str | None = None


def _prlimit() -> str:
    global _PRLIMIT
    if _PRLIMIT is None:
        _PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
    return _PRLIMIT


async def run(
    command: str,
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: bytes | None = None,
    limits: ResourceLimits | None = None,
) -> ExecResult:
    """Run `command` with /bin/sh -c and return its ExecResult (never raises for tool failures)."""
    _use_pidfd_watcher()
    limits = limits or ResourceLimits()
    argv = ["/bin/sh", "-c", command]
    extra = limits.prlimit_args()
    if extra:
        argv = [_prlimit(), *extra, "--", *argv]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env),
        cwd=cwd,
        start_new_session=True,
        close_fds=True,
    )
    out, err = _Sink(limits.output), _Sink(limits.output)
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        asyncio.ensure_future(out.pump(proc.stdout)),
        asyncio.ensure_future(err.pump(proc.stderr)),
    ]
    feeder = asyncio.ensure_future(_feed(proc, stdin)) if stdin is not None else None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
        if not timed_out:
            # The shell is gone; give a background child a moment to release the pipes.
            remaining = max(0.0, min(DRAIN_GRACE, deadline - loop.time()))
            done, pending = await asyncio.wait(readers, timeout=remaining)
            if pending and loop.time() >= deadline:
                timed_out = True
    finally:
        _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
        # Readers finish once every holder of the pipes is dead.
        await asyncio.wait(readers, timeout=1.0)
        for task in readers:
            task.cancel()
        if feeder is not None:
            feeder.cancel()
    if timed_out:
        return ExecResult(-1, "", f"timeout after {format_seconds(timeout)}s", timed_out=True)
    rc = proc.returncode if proc.returncode is not None else -1
    return ExecResult(
        rc, out.text("stdout"), err.text("stderr"), truncated=bool(out.dropped or err.dropped)
    )


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(data)
        await proc.stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        try:
            proc.stdin.close()
        except (BrokenPipeError, ConnectionResetError):  # pragma: no cover
            pass
