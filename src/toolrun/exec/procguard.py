"""What a serving process does to protect itself, and how a tool's escaped processes are found.

`protect_server()` runs at the start of every serving process (HTTP, stdio, each worker):

- `prctl(PR_SET_DUMPABLE, 0)`: the kernel then makes the process's /proc entries root-owned, so a
  tool running as the same user can no longer open `/proc/<server>/fd/*` (write into the
  server's pipes: forge stdio MCP results, or write into another caller's output) nor read
  `/proc/<server>/environ` (the Redis URL, the operator's secrets). It also forbids ptrace and
  core dumps by that user. A tool running as root keeps that access: hence the warning.
- the soft RLIMIT_NOFILE is raised to the hard limit, so connections, pipes and pidfds run out
  as late as the system allows.

Every exec child gets `TOOLRUN_CALL=<server token>.<n>` in its environment. A process that leaves
the tool's process group (`setsid`, `setpgid` + fork) still carries it (unless it clears its
environment), and the server finds it in /proc:

- `kill_call(pid, token)`, at a timeout or a cancelled call: SIGKILL to every descendant of the
  tool's shell (by parent pid, which also finds a descendant that cleared its environment while
  its parent lives) and to every process carrying the call's token;
- `start_watchdog()`: a small helper process that waits on a pipe from the server; when the
  server dies, however it dies (SIGKILL included), the pipe closes and the helper kills every
  process that carries this server's token.

Both stop everything they found (and the call's group) before they kill any of it, so no process runs another
command when one it waits for dies first; and both signal through a pidfd checked against the process's start
time, so a process given the id of one that exited since the scan is not reached.

Not contained (Linux without privileges we do not assume): a process that both leaves the group
and clears or rewrites its environment, then loses its parent, is out of reach; a cgroup would
hold it. docs/security.md says so.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import resource
import secrets
import signal
import subprocess
import sys
import time

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
CALL_ENV = "TOOLRUN_CALL"

_TOKEN = secrets.token_hex(8)
_SEQ = 0
_WATCHDOG_FD: int | None = None
_WATCHDOGS: list[subprocess.Popen[bytes]] = []
_STAND_DOWN = False  # at a normal exit, tell the watchdog to stand down (`toolrun call`) rather than scan (a server)


def _new_token() -> None:
    global _TOKEN, _SEQ, _WATCHDOG_FD
    if _WATCHDOG_FD is not None:  # the parent's watchdog must see its own server's death, not wait for ours
        os.close(_WATCHDOG_FD)
    _TOKEN, _SEQ, _WATCHDOG_FD = secrets.token_hex(8), 0, None
    _WATCHDOGS.clear()  # the parent's: not this process's children


os.register_at_fork(after_in_child=_new_token)  # each worker process is a server of its own


def call_token() -> str:
    """A token for one exec call of this process: `<server token>.<n>`."""
    global _SEQ
    _SEQ += 1
    return f"{_TOKEN}.{_SEQ}"


def _prctl(option: int, value: int) -> bool:
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return False


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """`sig` to this process when the thread that started it ends (its parent dies): whether the kernel took it."""
    return _prctl(PR_SET_PDEATHSIG, sig)


# What a helper process the server starts (the embedding model, the watchdog) may carry of the server's
# environment: how to find programs and Python, the locale and the time zone; never the operator's secrets.
HELPER_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "PYTHONHOME")
HELPER_PARENT = "TOOLRUN_HELPER_PARENT"  # the pid that started the helper: it exits when its parent is another


def this_python() -> str | None:
    """The running interpreter's file, to start a Python helper with (Popen's `executable`): /proc/self/exe
    reaches it even where the server's user may not search a folder above `sys.executable` (a venv built on
    an interpreter under /root). None where there is no /proc."""
    return "/proc/self/exe" if os.path.exists("/proc/self/exe") else None


def helper_env(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a helper the server starts: HELPER_ENV only, and HELPER_PARENT (this process)."""
    environ = dict(os.environ) if environ is None else environ
    env = {name: environ[name] for name in HELPER_ENV if name in environ}
    env[HELPER_PARENT] = str(os.getpid())
    return env


def protect_helper(sig: int = signal.SIGTERM) -> bool:
    """At the start of a helper process: non-dumpable (its /proc entries root-owned: no tool of the same user
    reads its environment, opens its descriptors or traces it), `sig` when the thread that started it ends,
    and whether it may go on: False when the process that started it (HELPER_PARENT) is already gone, so the
    death signal would never come (a helper started while its server stops)."""
    _prctl(PR_SET_DUMPABLE, 0)
    die_with_parent(sig)
    expected = os.environ.get(HELPER_PARENT, "")
    return not expected.isdigit() or os.getppid() == int(expected)


def protect_server(log: logging.Logger) -> None:
    """Non-dumpable, the descriptor limit raised, and a warning when serving as root."""
    if not _prctl(PR_SET_DUMPABLE, 0) and sys.platform.startswith("linux"):  # pragma: no cover
        log.warning("could not make the server non-dumpable: tools may read its /proc entries")
    raise_nofile(log)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        log.warning(
            "serving as root: every tool runs as root, can open this server's /proc entries (its pipes and its "
            "environment) and is not held by limits.processes. Run toolrun as an unprivileged user, or give "
            "tools `user:` (see docs/security.md)"
        )


def raise_nofile(log: logging.Logger | None = None) -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit; returns the (soft, hard) now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:  # pragma: no cover - a hard limit the kernel refuses
            if log is not None:
                log.warning("could not raise the open-files limit from %d to %d: %s", soft, hard, exc)
    return soft, hard


# -- finding processes -------------------------------------------------------------------------------


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _scan(root: int | None, needle: bytes, exact: bool, since: int = 0) -> dict[int, bytes]:
    """Pids descended from `root` (by parent pid) or whose environment holds `needle`
    (`TOOLRUN_CALL=<token>` exactly, or as a prefix when not `exact`), each with its start time (`_started`).

    A process started before `since` (`ticks()`, the unit of /proc/<pid>/stat's 22nd field) is not read for the
    needle: no process older than the token was given it (a jail prepared ahead is older, and found by descent).
    Its stat is still read: the descent needs every parent."""
    me = os.getpid()
    parents: dict[int, int] = {}
    started: dict[int, bytes] = {}
    marked: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - no /proc
        return {}
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        stat = _read(f"/proc/{pid}/stat")
        if stat:
            fields = stat[stat.rfind(b")") + 2 :].split()
            if len(fields) <= 19 or fields[0] == b"Z":
                continue
            parents[pid], started[pid] = int(fields[1]), fields[19]
            if int(fields[19]) < since:
                continue
        if _carries(pid, needle, exact):
            marked.add(pid)
    found = marked | _descent(root, parents) if root is not None else marked
    return {pid: started.get(pid, b"") for pid in found}


def _carries(pid: int, needle: bytes, exact: bool) -> bool:
    """Whether process `pid`'s environment holds `needle` (exactly, or as a prefix when not `exact`)."""
    return any(
        item == needle or (not exact and item.startswith(needle)) for item in _read(f"/proc/{pid}/environ").split(b"\0")
    )


def _descent(root: int, parents: dict[int, int]) -> set[int]:
    """`root` (when alive) and every process descended from it, by the parent pids of `parents`."""
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found = {root} if root in parents else set()
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _started(pid: int) -> bytes:
    """The start time of process `pid` (/proc/<pid>/stat's 22nd field, in clock ticks since boot): with the pid, what
    tells one process from a later one that was given its id."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(b")") + 2 :].split()
    return fields[19] if len(fields) > 19 else b""


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """SIGKILL (or `sig`) to process group `pgid`; one already gone (or not ours) is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_all(found: dict[int, bytes], group: int | None = None) -> None:
    """SIGKILL to each process `_scan` found, and to no other: one that exited since, whose id the kernel gave to a
    new process, is not that process. Each is held by a pidfd, then checked by its start time: once that matches,
    the pidfd is the process the scan saw, and its signals reach nothing else.

    All are stopped (SIGSTOP) before any is killed, and so is process group `group` (in one signal): killed one by one,
    a shell whose child died first (`wait $child`, or its foreground command) ran its next command before its own
    kill came (a tool that arranged the order, by the ids it got, wrote a file after its timeout every time); and a
    sandboxed tool's shell that had left the group ran its next command when the group's kill took its child, before
    bwrap's death took the shell (8 calls in 12)."""
    if group is not None:
        kill_group(group, signal.SIGSTOP)
    if not hasattr(os, "pidfd_open"):  # pragma: no cover - not Linux
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            if group is not None and sig == signal.SIGKILL:
                kill_group(group)
            for pid in found:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
        return
    held: list[int] = []
    try:
        for pid, started in found.items():
            try:
                fd = os.pidfd_open(pid)
            except OSError:  # gone
                continue
            if started and _started(pid) == started:
                held.append(fd)
            else:
                os.close(fd)
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            if group is not None and sig == signal.SIGKILL:
                kill_group(group)
            for fd in held:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    signal.pidfd_send_signal(fd, sig)
    finally:
        for fd in held:
            os.close(fd)


def ticks() -> int:
    """Now, in the unit of a process's start time in /proc (clock ticks since boot, suspend included), less one
    tick: every process started from now on has a start time of at least this."""
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * _CLK_TCK) - 1


def kill_call(pid: int, token: str, since: int = 0, rounds: int = 3) -> int:
    """SIGKILL the tool's shell `pid`, its descendants and every process carrying `token`; how many. `since`
    (`ticks()` when the token was made): older processes are not read for the token."""
    needle = f"{CALL_ENV}={token}".encode()
    killed: set[int] = set()
    for _ in range(rounds):  # a process may fork while we look: look again until nothing new turns up
        found = {p: t for p, t in _scan(pid, needle, exact=True, since=since).items() if p not in killed}
        if not found:
            break
        # The shell's whole group in one signal, and nothing killed before everything is stopped: killed one by one,
        # in a set's order, a `sleep` killed before its shell woke the shell, which ran the tool's next command
        # (`sleep 30; rm ...`) before its own kill came.
        _kill_all(found, group=pid)
        killed.update(found)
    return len(killed)


# -- the watchdog --------------------------------------------------------------------------------------

_WATCHDOG = """
import ctypes, os, signal, sys, time
ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # non-dumpable: no tool of this user opens its pipe to hold it open
fd, needle = int(sys.argv[1]), sys.argv[2].encode()
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
told = b""
try:
    while chunk := os.read(fd, 4096):
        told += chunk
except OSError:
    pass
if told == b"done":  # a `toolrun call` that ended normally: its calls are over, what left them is left alone
    sys.exit(0)
me, empty = os.getpid(), 0
for _ in range(20):
    found, parents, started = set(), {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            fields = stat[stat.rfind(b")") + 2 :].split()
            parents.setdefault(int(fields[1]), []).append(int(entry))
            started[int(entry)] = fields[19]
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\\0")
        except (OSError, IndexError, ValueError):
            continue
        if any(item.startswith(needle) for item in env):
            found.add(int(entry))
    # and their children: one in the middle of an exec shows no environment at all
    stack = list(found)
    while stack:
        for child in parents.get(stack.pop(), ()):
            if child not in found and child != me:
                found.add(child)
                stack.append(child)
    if not found:
        empty += 1
        if empty == 2:  # nothing twice, 50 ms apart: an exec under way then has ended
            break
        time.sleep(0.05)
        continue
    empty = 0
    held = []  # by pidfd, checked by start time: a process given the id of one that exited is spared
    for pid in found:
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            continue
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            same = stat[stat.rfind(b")") + 2 :].split()[19] == started.get(pid)
        except (OSError, IndexError):
            same = False
        if same:
            held.append(fd)
        else:
            os.close(fd)
    for sig in (signal.SIGSTOP, signal.SIGKILL):  # all stopped first: none runs its next command as another dies
        for fd in held:
            try:
                signal.pidfd_send_signal(fd, sig)
            except OSError:
                pass
    for fd in held:
        os.close(fd)
"""


def start_watchdog(log: logging.Logger | None = None, stand_down: bool = False) -> int | None:
    """Start the helper that kills this server's tool processes when the server dies; its pid.

    It holds the read end of a pipe whose write end only this process has (close-on-exec, so
    no tool inherits it): EOF means the server is gone. Idempotent per process. `stand_down`: at this process's
    normal exit the helper is told so and kills nothing (`toolrun call`: a call that ended normally leaves what
    left its process group alone, as documented); a server's helper kills what is left at any exit."""
    global _WATCHDOG_FD, _STAND_DOWN
    if _WATCHDOG_FD is not None:  # a server's own start after its start probe's (sandbox._probe): a server's kind
        _STAND_DOWN = _STAND_DOWN and stand_down
        return None
    if not os.path.isdir("/proc"):
        return None
    read_end, write_end = os.pipe()
    try:
        helper = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(read_end), f"{CALL_ENV}={_TOKEN}."],
            executable=this_python(),
            pass_fds=(read_end,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C to the terminal's group does not stop it before the server
            env={},
        )
    except OSError as exc:  # pragma: no cover - cannot spawn at all
        os.close(write_end)
        if log is not None:
            log.warning("could not start the process watchdog: %s", exc)
        return None
    finally:
        os.close(read_end)
    _WATCHDOG_FD, _STAND_DOWN = write_end, stand_down
    if not _WATCHDOGS:
        atexit.register(_release_watchdog)
    _WATCHDOGS.append(helper)  # kept: it runs as long as this process (a Popen collected while it runs warns)
    return helper.pid


def _release_watchdog() -> None:
    """This process exits: its watchdog does its work now (this process's calls are over) and is reaped."""
    global _WATCHDOG_FD
    stand_down()
    if _WATCHDOG_FD is not None:
        os.close(_WATCHDOG_FD)
        _WATCHDOG_FD = None
    for helper in _WATCHDOGS:
        try:
            helper.wait(2)
        except (subprocess.TimeoutExpired, OSError):  # pragma: no cover - a watchdog stuck in its scan
            pass


def stand_down() -> None:
    """A `toolrun call` ends normally (cli.main, before its os._exit; or at exit): a watchdog started to stand down
    is told so, and exits without killing anything. Nothing for a server's watchdog."""
    global _WATCHDOG_FD
    if _WATCHDOG_FD is not None and _STAND_DOWN:
        with contextlib.suppress(OSError):  # a watchdog gone (killed) is no reason to die of SIGPIPE
            write_quietly(_WATCHDOG_FD, memoryview(b"done"))
        os.close(_WATCHDOG_FD)
        _WATCHDOG_FD = None


def write_quietly(fd: int, data: memoryview) -> int:
    """`os.write` to a pipe whose reader may be gone: EPIPE, never death by SIGPIPE.

    The CLI gives SIGPIPE its default action (so `toolrun list | head` ends quietly); a tool that
    exits without reading its stdin, or a watchdog that is gone, must not kill `toolrun call` with it. The signal is
    blocked in this thread for the write, and one the write raised is taken off before it is unblocked.
    """
    if signal.getsignal(signal.SIGPIPE) != signal.SIG_DFL:
        return os.write(fd, data)
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGPIPE})
    try:
        return os.write(fd, data)
    except BrokenPipeError:
        if signal.SIGPIPE not in blocked:
            signal.sigtimedwait({signal.SIGPIPE}, 0)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
