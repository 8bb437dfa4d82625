"""Run a rendered command: `/bin/sh -c` in its own process group, time-boxed, output-capped.

Rules (spec 2.6) and the choices around them:
- the child gets stdin from /dev/null, or the JSON of the params in stdin mode; that payload is
  handed to the pipe transport, which writes it as the child reads and then closes the pipe, so
  a child that never reads stdin (or exits first) cannot deadlock the call;
- it never inherits the server's stdin, stdout or stderr (under stdio MCP they are the
  protocol stream), nor any other descriptor;
- stdout and stderr are collected as they arrive; past ``limits.output`` bytes (each) the rest
  is read and dropped, so a flooding child costs no memory, and a visible marker
  ``[toolrun: stdout truncated: kept N bytes, dropped M]`` ends the text;
- the call is over when the shell exits; a background child that still holds the pipes gets
  ``DRAIN_GRACE`` seconds (never past the deadline) to finish writing, then the whole process
  group is killed: nothing the tool started outlives its call (short of a `setsid` escape);
- on timeout (the shell has not exited by the deadline) the whole process group (children and
  grandchildren) is killed and the result is ``(-1, "", "timeout after <seconds>s")``, the
  seconds written as the shortest number (``0.5``, ``2``); cancelling the call (a client gone,
  an outer deadline) kills the group the same way;
- after the kill, the waits for the exit and for the pipes are bounded by ``KILL_WAIT``: a
  process that escaped the group with `setsid` survives (out of reach) but cannot hold the call;
- resource limits are applied by prefixing ``prlimit --cpu=... --`` (no preexec_fn, so the
  fast vfork spawn path stays on).

The exec path is hot: the process is driven by one `SubprocessProtocol` and a few futures
(no stream readers, no tasks), and on Python 3.11 a loop-agnostic pidfd child watcher replaces
the default thread-per-child watcher (3.12+ picks pidfd by itself).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVarTuple, Unpack, cast

from .models import ExecResult, ResourceLimits

# After the shell exits, how long a background grandchild may keep the pipes open.
DRAIN_GRACE = 0.2
# After SIGKILL to the group, how long to wait for the exit and for the pipes to close. Only a
# process that escaped the group (setsid) can hold a pipe past the kill.
KILL_WAIT = 1.0

_DEFAULT_LIMITS = ResourceLimits()
_Ts = TypeVarTuple("_Ts")


def format_seconds(seconds: float) -> str:
    """`2` for 2.0, `0.5` for 0.5: the shortest text that reads back as the same number."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return repr(float(seconds))


# -- the child watcher (Python 3.11) -------------------------------------------------------------


def _pidfd_watcher() -> Any:
    """A child watcher that serves every loop (the 3.12 design), or None when not needed."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return None
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # pragma: no cover - kernel without pidfd
        return None

    class PidfdWatcher(asyncio.AbstractChildWatcher):
        """Waits on a pidfd in the loop that spawned the child; no threads, no signals.

        The stdlib 3.11 PidfdChildWatcher is bound to one loop, so a second loop (another
        `asyncio.run`, another thread) would find it inactive; this one is not bound.
        """

        def __enter__(self) -> PidfdWatcher:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def is_active(self) -> bool:
            return True

        def close(self) -> None:
            return None

        def attach_loop(self, loop: Any) -> None:
            return None

        def add_child_handler(
            self,
            pid: int,
            callback: Callable[[int, int, Unpack[_Ts]], object],
            *args: *_Ts,
        ) -> None:
            loop = asyncio.get_running_loop()
            pidfd = os.pidfd_open(pid)
            loop.add_reader(pidfd, self._reap, loop, pid, pidfd, callback, args)

        def remove_child_handler(self, pid: int) -> bool:
            return True

        @staticmethod
        def _reap(
            loop: asyncio.AbstractEventLoop, pid: int, pidfd: int, callback: Callable[..., object], args: Any
        ) -> None:
            loop.remove_reader(pidfd)
            try:
                _, status = os.waitpid(pid, 0)
            except ChildProcessError:  # pragma: no cover - reaped elsewhere
                returncode = 255
            else:
                returncode = os.waitstatus_to_exitcode(status)
            os.close(pidfd)
            callback(pid, returncode, *args)

    return PidfdWatcher()


_WATCHER = _pidfd_watcher()


def _use_pidfd_watcher() -> None:
    """Install the watcher in the current policy (once; again if someone replaced the policy)."""
    if _WATCHER is None:
        return
    policy = asyncio.get_event_loop_policy()
    try:
        if policy.get_child_watcher() is not _WATCHER:
            policy.set_child_watcher(_WATCHER)
    except NotImplementedError:  # pragma: no cover - a policy without child watchers (uvloop)
        pass


# -- one call ------------------------------------------------------------------------------------


class _Sink:
    """Collects up to `cap` bytes of a stream and counts the rest."""

    __slots__ = ("cap", "dropped", "parts", "size")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap - self.size
        if len(data) <= room:
            self.parts.append(data)
            self.size += len(data)
        elif room > 0:
            self.parts.append(data[:room])
            self.size = self.cap
            self.dropped += len(data) - room
        else:
            self.dropped += len(data)

    def text(self, label: str) -> str:
        text = b"".join(self.parts).decode("utf-8", errors="replace")
        if self.dropped:
            text += f"\n[toolrun: {label} truncated: kept {self.cap} bytes, dropped {self.dropped}]\n"
        return text


class _Call(asyncio.SubprocessProtocol):
    """Collects a child's output; `exited` and `closed` resolve on exit and on EOF of both pipes."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cap: int) -> None:
        self.out = _Sink(cap)
        self.err = _Sink(cap)
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()
        self.open = 2

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        (self.out if fd == 1 else self.err).add(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd != 0:
            self.open -= 1
            if self.open == 0 and not self.closed.done():
                self.closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)


async def _within(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[None], seconds: float) -> bool:
    """Wait up to `seconds` for `fut` (never cancelling it); True when it is done."""
    if fut.done():
        return True
    if seconds <= 0:
        return False
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer = loop.call_later(seconds, wake)
    fut.add_done_callback(wake)
    try:
        await waiter
    finally:
        timer.cancel()
        fut.remove_done_callback(wake)
    return fut.done()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_PRLIMIT: str | None = None


def _prlimit() -> str:
    global _PRLIMIT
    if _PRLIMIT is None:
        _PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"
    return _PRLIMIT


def _setpriv(user: str) -> list[str]:
    """argv prefix that drops to `user` (uid, gid and its groups) before the shell starts.

    Raises PermissionError when toolrun is not root and `user` is not the current user.
    """
    import pwd

    entry = pwd.getpwnam(user)
    if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
        raise PermissionError(f"tool runs as user {user!r}, which needs toolrun to run as root")
    path = shutil.which("setpriv") or "/usr/bin/setpriv"
    return [path, f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups", "--"]


async def run(
    command: str,
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: bytes | None = None,
    limits: ResourceLimits | None = None,
    user: str | None = None,
) -> ExecResult:
    """Run `command` with /bin/sh -c and return its ExecResult (never raises for tool failures).

    Raises OSError when the process cannot start (missing cwd, missing prlimit) and ValueError
    for a NUL byte in the command or the environment.
    """
    _use_pidfd_watcher()
    limits = limits or _DEFAULT_LIMITS
    argv = ["/bin/sh", "-c", command]
    if user is not None:
        argv = [*_setpriv(user), *argv]
    extra = limits.prlimit_args()
    if extra:
        argv = [_prlimit(), *extra, "--", *argv]
    loop = asyncio.get_running_loop()
    call = _Call(loop, limits.output)
    transport, _ = await loop.subprocess_exec(
        lambda: call,
        *argv,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    pgid = transport.get_pid()
    timed_out = False
    try:
        deadline = loop.time() + timeout
        if stdin is not None:
            pipe = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
            pipe.write(stdin)  # kept by the transport and written as the child reads
            pipe.close()  # EOF once written; dropped when the child exits first
        if not await _within(loop, call.exited, timeout):
            timed_out = True
        elif not call.closed.done():
            # The shell is gone; a background child holds the pipes: give it a moment.
            await _within(loop, call.closed, min(DRAIN_GRACE, deadline - loop.time()))
    finally:
        _kill_group(pgid)
        try:
            # After SIGKILL the exit and the EOFs follow in milliseconds; what is left in the
            # pipes is still read. The bounds only matter for a process that escaped the group.
            if await _within(loop, call.exited, KILL_WAIT):
                await _within(loop, call.closed, KILL_WAIT)
        finally:
            if stdin is not None:
                pipe = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
                if pipe.get_write_buffer_size():  # only an escaped process still holds stdin
                    pipe.abort()
            transport.close()
    if timed_out:
        return ExecResult(-1, "", f"timeout after {format_seconds(timeout)}s", timed_out=True)
    rc = transport.get_returncode()
    return ExecResult(
        -1 if rc is None else rc,
        call.out.text("stdout"),
        call.err.text("stderr"),
        truncated=bool(call.out.dropped or call.err.dropped),
    )
