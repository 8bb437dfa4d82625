"""Run a rendered command: `/bin/sh -c` in its own process group, time-boxed, output-capped.

Rules (spec 2.6) and the choices around them:
- the child gets stdin from /dev/null, or the JSON of the params in stdin mode; that payload is
  written to a non-blocking pipe by a loop writer callback as the child reads it, and the pipe is
  closed once it is all written (or the child is gone), so a child that never reads stdin (or
  exits first) cannot deadlock the call;
- it never inherits the server's stdin, stdout or stderr (under stdio MCP they are the
  protocol stream), nor any other descriptor;
- stdout and stderr are collected as they arrive; past ``limits.output`` bytes (each) the first
  and the last half of the cap are kept and the middle is read and dropped, so a flooding child
  costs no memory and the error at the end survives; a visible marker
  ``[toolrun: stdout truncated: kept the first N and the last N bytes, dropped M in between]``
  stands where the bytes were dropped;
- the call is over when the shell exits; a background child that still holds the pipes gets
  ``DRAIN_GRACE`` seconds (never past the deadline) to finish writing, then the whole process
  group is killed: nothing the tool started outlives its call, short of a process that left the
  group (`setsid`), which a call that ends normally leaves alone (a tool may start a daemon);
- on timeout (the shell has not exited by the deadline) the whole process group (children and
  grandchildren) is killed, and so is every descendant that left the group (`setsid`, `setpgid`)
  and every process carrying the call's `TOOLRUN_CALL` token (procguard.kill_call); the result
  is ``(-1, "", "timeout after <seconds>s")``, the
  seconds written as the shortest number (``0.5``, ``2``); cancelling the call (a client gone,
  an outer deadline) kills the group the same way;
- after the kill, the waits for the exit and for the pipes are bounded by ``KILL_WAIT``: a
  process that escaped the group and every search (see procguard) cannot hold the call;
- resource limits are applied by prefixing ``prlimit --cpu=... --`` (no preexec_fn, so the
  fast vfork spawn path stays on).

The exec path is hot. The child is started by `spawn.start` (posix_spawn with closefrom, or
`subprocess.Popen` for a tool with a `cwd`: the same descriptors, session, signals and errors) onto
pipes this module owns; the loop reads them with callbacks of one epoll shared by every child
(`spawn.Watcher`) and learns of the exit from a pidfd (Linux 5.3+; elsewhere a worker thread
waits). No asyncio subprocess transport, protocol or task is involved: they cost about 350 us of
CPU per call, more than the spawn itself. With the `exit_first` speedup the pipes are not watched
at first: a quick tool's output and EOFs are read when its pidfd reports the exit (one wake-up of
the loop instead of up to three, 4 epoll_ctl calls less); a child still running `QUIET_START` after
its start gets its pipes watched (one timer per loop for all of them: `QuietPipes`), and a job's
child (whose output is shown live) from the start.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import shutil
import signal
import subprocess
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from .. import speedups
from ..models import ExecResult, ResourceLimits, Sandbox
from . import directexec, pidcache, procguard, sandboxpool, spawn
from . import sandbox as _sandboxing
from .outputsink import OutputSink

# After the shell exits, how long a background grandchild may keep the pipes open.
DRAIN_GRACE = 0.2
# After SIGKILL to the group, how long to wait for the exit and for the pipes to close. Only a
# process that escaped the group (setsid) can hold a pipe past the kill.
KILL_WAIT = 1.0

_DEFAULT_LIMITS = ResourceLimits()
# Exec a one-word-list command's program directly instead of `/bin/sh -c` when nothing observable changes
# (directexec.py says when); the `direct_exec` speedup (speedups.py); tests turn it off to compare both ways.
DIRECT_EXEC = speedups.on("direct_exec")


def format_seconds(seconds: float) -> str:
    """`2` for 2.0, `0.5` for 0.5: the shortest text that reads back as the same number."""
    if float(seconds).is_integer():
        return str(int(seconds))
    return repr(float(seconds))


# -- one call ------------------------------------------------------------------------------------


# Set by a job's runner (jobs.py): told the output sinks of the process it starts, to show its output so far.
OUTPUT_WATCH: contextvars.ContextVar[Callable[[Any, Any], None] | None] = contextvars.ContextVar(
    "toolrun_output_watch", default=None
)

# A pipe holds 64 KiB (Linux's default): one read takes all there is, from a buffer below the mmap threshold.
_READ_SIZE = 64 * 1024
# At the exit, at most this many reads of each pipe at once; what a grandchild still writes is read as it comes.
_REAP_READS = 4
# The `exit_first` speedup: a child's pipes are first left alone, and read once it has exited (the pidfd's one
# event), so a quick tool wakes the loop once instead of once for its output, once for the EOFs and once for its
# exit. A child still running QUIET_START seconds after its start gets its pipes watched (64 KiB of output or more
# waits that long for a reader); a job's child, whose output is shown as it comes, is watched from the start.
EXIT_FIRST = speedups.on("exit_first")
QUIET_START = 0.02
HAS_PIDFD = hasattr(os, "pidfd_open") and speedups.on("pidfd")  # else a worker thread waits


class QuietPipes:
    """The children of a loop whose pipes are not watched yet (`exit_first`), by start time, and the one timer that
    starts watching the pipes of those still running QUIET_START after their start (one timer for all of them,
    none per call). It holds no reference to its loop (nor to the timer's handle, which does): a loop that is
    done goes, and its watcher's epoll is closed with it."""

    __slots__ = ("armed", "children", "loop", "pid")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)
        self.pid = pidcache.pid()
        self.children: dict[_Child, float] = {}  # in start order
        self.armed = False

    def add(self, child: _Child) -> None:
        loop = child.loop
        self.children[child] = loop.time()
        if not self.armed:
            self.armed = True
            loop.call_later(QUIET_START, self._sweep)

    def _sweep(self) -> None:
        self.armed = False
        loop = self.loop()
        if loop is None:  # pragma: no cover - the loop runs this callback
            return
        due = loop.time() - QUIET_START
        for child, started in list(self.children.items()):
            if started > due:  # this one and every later one: not yet
                self.armed = True
                loop.call_at(started + QUIET_START, self._sweep)
                return
            child.watch_pipes()  # takes it out of `children`


_QUIET: QuietPipes | None = None


def quiet_pipes(loop: asyncio.AbstractEventLoop) -> QuietPipes:
    """This loop's QuietPipes (one per loop and process; a new loop or a forked worker makes its own)."""
    global _QUIET
    found = _QUIET
    if found is None or found.loop() is not loop or found.pid != pidcache.pid():
        found = _QUIET = QuietPipes(loop)
    return found


class _Child:
    """One running child: its stdout and stderr read by callbacks of the loop, its stdin fed the same way.

    `exited` is set when the child has exited (reaped by `release`, after its group's last kill), `closed` at EOF
    on both pipes; `wake()` resolves the future the call is waiting on (`waiter`), when both are set, or from a timer.
    """

    __slots__ = (
        "closed",
        "err",
        "exited",
        "loop",
        "out",
        "pending",
        "pid",
        "proc",
        "quiet",
        "readers",
        "released",
        "status",
        "stdin",
        "unreaped",
        "waiter",
        "watch",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop, cap: int) -> None:
        self.loop = loop
        self.watch: spawn.Watcher | spawn.LoopWatcher  # set once the child has started
        self.out = OutputSink(cap)
        self.err = OutputSink(cap)
        self.exited = False
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None
        self.pid = 0
        self.status: int | None = None  # the exit code, or -signal
        self.proc: subprocess.Popen[bytes] | None = None
        self.readers: dict[int, OutputSink] = {}
        self.stdin: int | None = None
        self.pending = memoryview(b"")
        self.quiet: QuietPipes | None = None  # its pipes are not watched yet: read at its exit, or from QUIET_START
        self.unreaped = False  # exited, its status known, reaped by `release` (after its group's last kill)
        self.released = False  # `release` ran: a child that exits after it is reaped at once

    def adopt(self, jail: sandboxpool.Jail, stdin: bytes) -> int:
        """Take a jail prepared ahead as this call's child (sandboxpool.py): read its stdout and stderr, feed it
        `stdin` (the call's message, then the call's own stdin); returns its pid (its process group)."""
        self.pid = jail.pid
        self.watch = watch = spawn.watcher(self.loop)
        for fd, sink in ((jail.out, self.out), (jail.err, self.err)):
            os.set_blocking(fd, False)
            self.readers[fd] = sink
            watch.add(fd, self._readable)
        os.set_blocking(jail.stdin, False)
        self.stdin, self.pending = jail.stdin, memoryview(stdin)
        self._writable()
        self._watch_exit()
        return self.pid

    async def start(
        self,
        argv: list[str],
        env: Mapping[str, str],
        cwd: str | None,
        stdin: bytes | None,
        direct: tuple[str, list[str], dict[str, str]] | None = None,
        threaded: bool = False,
        extra: tuple[int, ...] = (),
        owner: tuple[int, int] | None = None,
        quiet: bool = False,
    ) -> int:
        """Spawn the child in a new session (its pid is its process group); returns the pid. `owner`: the (uid,
        gid) the child drops to, given its pipes (so it can reopen them: /dev/stdout, /dev/stderr). `quiet`: its
        pipes are not watched until `watch_pipes` (the `exit_first` speedup)."""
        opened: list[int] = []  # closed again if anything below fails (EMFILE, a missing cwd, ...)
        try:
            out_r, out_w = os.pipe()
            opened += (out_r, out_w)
            err_r, err_w = os.pipe()
            opened += (err_r, err_w)
            in_r, in_w = -1, -1
            if stdin is not None:
                in_r, in_w = os.pipe()
                opened += (in_r, in_w)
            if owner is not None and os.geteuid() == 0:
                for fd in (out_w, err_w, *((in_r,) if in_r >= 0 else ())):
                    os.fchown(fd, *owner)
            job = (argv, env, cwd, None if in_r < 0 else in_r, out_w, err_w, direct, extra)
            if threaded:
                started = _spawner().submit(spawn.start_command, *job)
                try:
                    self.pid, self.proc = await asyncio.wrap_future(started)
                except asyncio.CancelledError:
                    _abandon(started)  # the child may be starting right now: it must not outlive the call
                    raise
            else:
                self.pid, self.proc = spawn.start_command(*job)
        except BaseException:
            for fd in opened:
                os.close(fd)
            raise
        for fd in (out_w, err_w, in_r):  # the child's ends: it has its own copies now
            if fd >= 0:
                os.close(fd)
        self.watch = watch = spawn.watcher(self.loop)  # made after the spawn: a failed start leaves no epoll behind
        readable = self._readable
        for fd, sink in ((out_r, self.out), (err_r, self.err)):
            os.set_blocking(fd, False)
            self.readers[fd] = sink
            if not quiet:
                watch.add(fd, readable)
        if quiet:
            self.quiet = quiet_pipes(self.loop)
            self.quiet.add(self)
        if stdin is not None:
            os.set_blocking(in_w, False)
            self.stdin, self.pending = in_w, memoryview(stdin)
            self._writable()
        self._watch_exit()
        return self.pid

    def _watch_exit(self) -> None:
        if HAS_PIDFD:
            try:
                pidfd = os.pidfd_open(self.pid)
            except OSError:  # pragma: no cover - kernel without pidfd (before 5.3)
                pass
            else:
                self.watch.add(pidfd, self._reap)
                return
        # Without a pidfd (the `pidfd` speedup off, an old kernel): a thread waits for the exit without reaping it,
        # and the loop takes the status (`_status`), as from a pidfd.
        waited = self.loop.run_in_executor(None, os.waitid, os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        waited.add_done_callback(self._thread_saw_exit)

    def _thread_saw_exit(self, waited: asyncio.Future[Any]) -> None:
        if waited.cancelled():  # pragma: no cover - the loop closed first
            return
        if waited.exception() is None:
            self._status()
        self._exited()

    def _wait(self) -> None:
        """Reap the child (it has exited, or this blocks until it does)."""
        if self.proc is not None:
            self.status = self.proc.wait()
            return
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)

    def watch_pipes(self) -> None:
        """Read the pipes as data comes from now on (they were left alone: `quiet`)."""
        quiet = self.quiet
        if quiet is not None:
            self.quiet = None
            quiet.children.pop(self, None)
            for fd in self.readers:
                self.watch.add(fd, self._readable)

    def _status(self) -> None:
        """The exit status of the child, which has exited, left unreaped until `release`: its pid is its process
        group's id, and the group is killed after the drain; reaped now, with the group empty (its background process
        left it, `setsid cmd &`), the id would be free for the next process started on the machine (another call's
        session leader), and that kill would reach it (red team 10)."""
        if self.released:  # its call is over (it was killed and took long to die): nothing kills its group again
            self._wait()
            return
        info = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        if info is None:  # pragma: no cover - only with WNOHANG
            raise ChildProcessError(f"no exit of process {self.pid} to report")
        self.unreaped = True
        killed = info.si_code in (os.CLD_KILLED, os.CLD_DUMPED)
        self.status = -info.si_status if killed else info.si_status

    def _reap(self, pidfd: int) -> None:
        self.watch.remove(pidfd)
        os.close(pidfd)
        self._status()  # it has exited: its status now, reaped by `release`
        for fd in list(self.readers):  # what is in the pipes, and the EOFs: usually there already, not yet reported
            for _ in range(_REAP_READS):  # bounded: a grandchild may still be writing
                if fd not in self.readers or not self._readable(fd):
                    break
        self.watch_pipes()  # a grandchild holds them: read them during the drain grace
        self._exited()

    def _exited(self) -> None:
        if not self.exited:
            self.exited = True
            self.wake(done_only=True)

    def wake(self, done_only: bool = False) -> None:
        """Resolve the waiter: always from a timer; from the child's events once it has exited."""
        waiter = self.waiter
        if waiter is not None and not waiter.done() and (not done_only or self.exited):
            waiter.set_result(None)

    async def wait(self, seconds: float) -> None:
        """Until the child has exited (and, if it had exited already, closed its pipes), or `seconds` pass."""
        if (self.exited and self.closed) or seconds <= 0:
            return
        self.waiter = self.loop.create_future()
        timer = self.loop.call_later(seconds, self.wake)
        try:
            await self.waiter
        finally:
            timer.cancel()
            self.waiter = None

    def _readable(self, fd: int) -> bool:
        """Read what `fd` has; whether that was data (not nothing yet, not EOF)."""
        try:
            data = os.read(fd, _READ_SIZE)
        except BlockingIOError:
            return False
        except OSError:
            data = b""
        if data:
            self.readers[fd].add(data)
            return True
        self._close_reader(fd)
        if not self.readers and not self.closed:
            self.closed = True
            self.wake(done_only=True)
        return False

    def _close_reader(self, fd: int) -> None:
        self.watch.remove(fd)
        os.close(fd)
        del self.readers[fd]

    def _writable(self, fd: int = -1) -> None:
        """Feed stdin as the child reads it; close it once written (EOF), or when the child is gone."""
        assert self.stdin is not None
        try:
            while self.pending:
                self.pending = self.pending[procguard.write_quietly(self.stdin, self.pending) :]
        except BlockingIOError:
            if fd < 0:  # the first attempt, from start(): wait for room from now on
                self.watch.add(self.stdin, self._writable, writable=True)
            return
        except OSError:  # EPIPE: the child closed stdin or exited without reading it all
            pass
        self._close_stdin()

    def _close_stdin(self) -> None:
        if self.stdin is not None:
            self.watch.remove(self.stdin)
            os.close(self.stdin)
            self.stdin = None
            self.pending = memoryview(b"")

    def release(self) -> None:
        """Stop reading and writing (only a process that escaped the group can still hold the pipes), and reap the
        child, after its group's last kill."""
        if self.quiet is not None:
            self.quiet.children.pop(self, None)
            self.quiet = None
        self._close_stdin()
        for fd in list(self.readers):
            self._close_reader(fd)
        self.released = True
        if self.unreaped:
            self.unreaped = False
            if self.proc is not None:
                self.proc.wait()
            else:
                os.waitpid(self.pid, 0)

    @property
    def returncode(self) -> int:
        return -1 if self.status is None else self.status


# A spawn blocks its thread until the child has exec'd (vfork): 1-3 ms of wall time on a small loaded
# machine, during which a loop that spawns inline serves nothing, so a burst of calls starts its children
# one after the other (200 `sleep 1` at once in one process: p99 1.5-1.8 s). In a burst (THREADED_FROM
# calls or more running in this process) the spawn goes to a few threads (ctypes and Popen release the
# GIL) and the children start side by side (the same 200: p99 1.2-1.3 s). The handoff costs CPU (the
# GIL changes hands: 100-400 us a call, measured at 16 calls per process), so below the threshold, in
# steady traffic, a call spawns inline; a sandboxed call's start (the drop program, then bwrap: 3-8 ms at load)
# always goes to the threads, as a jail prepared ahead does (sandboxpool.py).
SPAWN_THREADS = 4
THREADED_FROM = 64 if speedups.on("threaded_spawn") else 1 << 62  # off: always inline
_SPAWNER: tuple[int, ThreadPoolExecutor] | None = None
_RUNNING = 0


def _spawner() -> ThreadPoolExecutor:
    global _SPAWNER
    if _SPAWNER is None or _SPAWNER[0] != pidcache.pid():  # a forked worker makes its own threads
        _SPAWNER = (pidcache.pid(), ThreadPoolExecutor(SPAWN_THREADS, thread_name_prefix="toolrun-spawn"))
    return _SPAWNER[1]


_KILLER: tuple[int, ThreadPoolExecutor] | None = None


def _killer() -> ThreadPoolExecutor:
    global _KILLER
    if _KILLER is None or _KILLER[0] != pidcache.pid():  # a forked worker makes its own threads
        _KILLER = (pidcache.pid(), ThreadPoolExecutor(2, thread_name_prefix="toolrun-kill"))
    return _KILLER[1]


async def _kill_call(pgid: int, token: str, since: int) -> None:
    """procguard.kill_call in a thread of its own: its scans of /proc read two files of every process of the host
    (about 30 us each here: tens of milliseconds on a busy host), which the loop's other calls must not wait for.
    Awaited to its end even when the call is cancelled again meanwhile: the shell is reaped only after it."""
    done = asyncio.get_running_loop().run_in_executor(_killer(), procguard.kill_call, pgid, token, since)
    cancelled = False
    while not done.done():
        try:
            await asyncio.shield(done)
        except asyncio.CancelledError:
            cancelled = True
    done.result()
    if cancelled:
        raise asyncio.CancelledError


def _abandon(started: Future[tuple[int, subprocess.Popen[bytes] | None]]) -> None:
    """A call cancelled while its child was being started: wait for the start (milliseconds), kill, reap."""
    try:
        pid, proc = started.result()
    except BaseException:  # never started (cancelled in the queue, or failed)
        return
    procguard.kill_group(pid)
    if proc is not None:
        proc.wait()
    else:
        os.waitpid(pid, 0)


@functools.cache
def _prlimit() -> str:
    return shutil.which("prlimit") or "/usr/bin/prlimit"


def _setpriv(user: str, sandboxed: bool = False) -> list[str]:
    """argv prefix that drops to `user` before the shell starts: its uid and gid, and its supplementary groups
    unless `sandboxed` (a sandbox gives a tool its user's uid and primary gid only: a group like `shadow` would
    open files the sandbox shows).

    Raises PermissionError when toolrun is not root and `user` is not the current user.
    """
    import pwd

    entry = pwd.getpwnam(user)
    if os.geteuid() != 0 and entry.pw_uid != os.geteuid():
        raise PermissionError(f"tool runs as user {user!r}, which needs toolrun to run as root")
    path = shutil.which("setpriv") or "/usr/bin/setpriv"
    groups = "--clear-groups" if sandboxed else "--init-groups"
    return [path, f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", groups, "--"]


def _watched() -> None:
    """The watchdog that kills this process's calls when it dies (a server starts it at once; `toolrun call` here,
    for every exec call): a process killed while bwrap starts, before bwrap set its parent-death signal, would leave
    a jail half made, and a tool without a sandbox (a `user:` tool of a root `toolrun call`) would run on, in a
    session of its own, past its timeout. At a normal exit it stands down: what left a finished call's process group
    (a daemon a tool started on purpose) is left alone, and nothing is scanned."""
    procguard.start_watchdog(stand_down=True)


def _as_user(
    user: str, sandboxed: bool, command: str, argv: list[str], env: Mapping[str, str]
) -> tuple[list[str], Mapping[str, str]]:
    """`argv` run as `user` (setpriv, as root), and the environment to spawn it with. Without a sandbox, setpriv (and
    prlimit before it) get the tool's names as sandbox.jail_env carries them, and its shell gives them back: their
    loaders never act on the tool's LD_PRELOAD (a library in a folder the tool's user may write)."""
    if not sandboxed:
        env, given = _sandboxing.jail_env(env)
        argv = ["/bin/sh", "-c", given + command] if given else argv
    return [*_setpriv(user, sandboxed), *argv], env


async def run(
    command: str,
    *,
    timeout: float,
    env: Mapping[str, str],
    cwd: str | None = None,
    stdin: bytes | None = None,
    limits: ResourceLimits | None = None,
    user: str | None = None,
    sandbox: Sandbox | None = None,
) -> ExecResult:
    """Run `command` with /bin/sh -c and return its ExecResult (never raises for tool failures).

    With a `sandbox`, the shell runs in it (sandbox.py), or not at all: SandboxUnavailable.

    When the shell would only exec one program, that program is started directly, with the exact
    argv and environment the shell would give it (directexec.py).

    Raises OSError when the process cannot start (missing cwd, missing prlimit) and ValueError
    for a NUL byte in the command or the environment.
    """
    limits = limits or _DEFAULT_LIMITS
    # The call's token, over any TOOLRUN_CALL of the tool's own: the tool's shell gets it back with its names
    # (sandbox.jail_env), and the programs outside its shell carry it too (added again below).
    token, since = procguard.call_token(), procguard.ticks()
    env = {**env, procguard.CALL_ENV: token}
    argv = ["/bin/sh", "-c", command]
    launch: _sandboxing.Launch | _sandboxing.NoLaunch = _sandboxing.NO_LAUNCH
    extra = limits.prlimit_args()
    jail = None
    _watched()
    if sandbox is not None and sandboxpool.ENABLED:  # a jail prepared ahead; every limit is set in it
        jail = await sandboxpool.take(sandbox, cwd, user, tuple(_setpriv(user, True)) if user is not None else ())
        launch, extra, cwd, user = jail.launch, [], None, None
    elif sandbox is not None:  # bwrap starts the shell, in `cwd`; setpriv and prlimit go before bwrap
        # but the process limit inside it: RLIMIT_NPROC set before bwrap counts every process of the user on the
        # host (every sandboxed call of a root server runs as `nobody`: one call's processes starved the others);
        # set in the sandbox's own user namespace, it counts the call's own processes.
        inner = [arg for arg in extra if arg.startswith("--nproc=")]
        extra = [arg for arg in extra if arg not in inner]
        # The tool's environment reaches its shell in the jail only: never the loaders of the programs outside it.
        env, given = _sandboxing.jail_env(env)
        argv = ["/bin/sh", "-c", given + command] if given else argv
        launch = _sandboxing.prepare(sandbox, cwd, user, argv, inner=[_prlimit(), *inner, "--"] if inner else [])
        argv, cwd = launch.argv, None
    if user is not None:
        argv, env = _as_user(user, sandbox is not None, command, argv, env)
    if extra:
        argv = [_prlimit(), *extra, "--", *argv]
    loop = asyncio.get_running_loop()
    child = _Child(loop, limits.output)
    watch = OUTPUT_WATCH.get()
    if watch is not None:
        watch(child.out, child.err)
    env = {**env, procguard.CALL_ENV: token}
    # One simple command of plain words, no prefix: the program itself, not a shell that only execs it.
    direct = directexec.plan(command, env, cwd) if len(argv) == 3 and DIRECT_EXEC and jail is None else None
    global _RUNNING
    _RUNNING += 1
    try:
        if jail is not None:
            told = sandboxpool.message(command, env, limits.prlimit_args(), stdin is not None)
            pgid = child.adopt(jail, told + (stdin or b""))
        else:
            pgid = await child.start(
                argv,
                env,
                cwd,
                stdin,
                direct,
                threaded=_RUNNING >= THREADED_FROM or sandbox is not None,  # a jail's start: 3-8 ms at load
                extra=launch.fds,
                owner=launch.owner,
                quiet=EXIT_FIRST and HAS_PIDFD and watch is None,
            )
    except BaseException:
        _RUNNING -= 1
        launch.close()
        sandboxpool.finished(jail)
        raise
    launch.started()
    timed_out = True  # until the shell is seen to exit in time (a cancelled call counts as timed out here)
    try:
        deadline = loop.time() + timeout
        await child.wait(timeout)
        if child.exited:
            timed_out = False
            if not child.closed:
                # The shell is gone; a background child holds the pipes: give it a moment.
                await child.wait(min(DRAIN_GRACE, deadline - loop.time()))
    finally:
        try:
            if timed_out:
                # Everything the tool started dies: descendants that left the group (setsid, setpgid) and
                # orphans that still carry the call's token, found in /proc. A cancel during it (raised after it)
                # still reaps the shell and closes the call's descriptors below.
                procguard.kill_group(pgid, signal.SIGSTOP)  # at once: its turn in the kill's thread may be late
                try:
                    await _kill_call(pgid, token, since)
                finally:
                    procguard.kill_group(pgid)
            else:
                procguard.kill_group(pgid)
            # After SIGKILL the exit and the EOFs follow in milliseconds; what is left in the
            # pipes is still read. The bounds only matter for a process that escaped the group.
            if not child.exited:
                await child.wait(KILL_WAIT)
            if child.exited and not child.closed:
                await child.wait(KILL_WAIT)
        finally:
            child.release()
            _RUNNING -= 1
            launch.close()
            sandboxpool.finished(jail)
    if timed_out:
        return ExecResult(-1, "", f"timeout after {format_seconds(timeout)}s", timed_out=True)
    launch.check(child.returncode, child.err.text("stderr"))
    dropped = child.out.dropped + child.err.dropped
    return ExecResult(
        child.returncode,
        child.out.text("stdout"),
        child.err.text("stderr"),
        truncated=dropped > 0,
        bytes_kept=child.out.kept + child.err.kept,
        bytes_dropped=dropped,
    )
