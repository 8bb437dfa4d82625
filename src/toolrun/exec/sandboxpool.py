"""Jails prepared ahead (the `jail_pool` speedup): a sandboxed call takes a jail bwrap set up before the call came.

Making the namespaces is most of what a sandbox costs a call (bench/sandbox.py), and it does not depend on the call:
only on the profile. So, per profile that was called recently, a few jails are started ahead, each used exactly once:

- a jail is bwrap started for the profile as a call would start it (the same options, the same user, the paths
  opened and checked as sandboxpaths.py says, bound by descriptor); its command is a small shell, the waiter, that
  checks the bound paths (sandboxpaths.checked), says `ready` on the check's own channel (descriptor 3), then reads
  one message on its stdin: the call's words (its environment, limits, and the command), framed by a random line;
- a call plans its jail as if it started one (sandbox.plan: every check at this call, nothing cached by name) and
  takes a prepared jail only when that jail's digest is the plan's: the digest covers bwrap's whole set-up (the
  options, the bound paths' device and inode, the covers over toolrun's own files, the user, the filter), so a
  reload, a catalog change, a changed file or folder never runs a call in a jail prepared for something else; a
  jail whose digest no call asks for is simply left to be reaped;
- the waiter runs the message only if it arrived whole (the framing line at both ends) and parses as one shell list
  (else it exits: nothing ran); the message says `ok` on the channel, closes it, and the waiter becomes the call's
  shell, the jail's first process: it forgets its own variables and evaluates the call's command as `sh -c` would
  (with limits, it `exec`s prlimit and a new shell instead); nothing else listens in the jail, so the tool has no
  one to talk to;
- the call reads the jail's stdout and stderr, feeds its stdin, times it out and kills it as a plain sandboxed call
  (executor.py): the jail's process group is bwrap's, its PID namespace ends with its first process;
- a profile gets jails only once it was called twice within IDLE seconds (a one-call `toolrun call` starts no jail
  ahead), at most PER_PROFILE at a time, and loses them IDLE seconds after
  its last call; at most MAX_PROFILES profiles have jails; a jail older than IDLE is never used. Each jail dies with
  this process (bwrap --die-with-parent, setpriv --pdeathsig for a `user:`; a waiter whose input ends exits), and
  an exiting interpreter kills them all;
- every jail starts in one of the pool's starter threads, never on an event loop's thread (a start holds its thread
  until the drop program has exec'd: 3-8 ms on a loaded machine, during which a loop would answer nothing): the
  refill after a call, and the jail a call starts when none is ready (the call awaits it; a call cancelled
  meanwhile has its jail killed once started). The pool's lock covers its books and the refill's plan, never a
  start.

Nothing is shared between calls: each jail has its own namespaces, /tmp, pipes and processes, and serves one call.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import hashlib
import os
import re
import secrets
import shlex
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from .. import speedups
from ..errors import SandboxUnavailable
from ..models import Sandbox
from . import pidcache, procguard, spawn
from . import sandbox as _sandbox
from .sandboxpaths import checked

ENABLED = speedups.on("jail_pool")
PER_PROFILE = 2  # jails kept ready per profile
IDLE = 15.0  # seconds: a profile not called this long loses its jails; no jail older than this is used
MAX_PROFILES = 8  # profiles that keep jails (the least recently called one loses them first)

# The waiter: reads the frame line, then lines up to the same line again, and evaluates them as one list.
WAITER = (
    'IFS= read -r end || exit 124; s=; while IFS= read -r l; do [ "$l" = "$end" ] && break; s="$s$l\n"; done; '
    '[ "$l" = "$end" ] || exit 124; eval "$s"; exit 124'
)  # the message ends in an exec: a waiter still there after it did not run the call
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Jail:
    """One jail prepared ahead: bwrap's pid (its process group), the parent's ends of its stdin, stdout and stderr,
    and its Launch (bwrap's status, the check's channel)."""

    __slots__ = ("after", "born", "digest", "err", "launch", "out", "pid", "stdin")

    def __init__(self, digest: str, pid: int, stdin: int, out: int, err: int, launch: _sandbox.Launch) -> None:
        self.digest, self.pid, self.stdin, self.out, self.err, self.launch = digest, pid, stdin, out, err, launch
        self.born = time.monotonic()
        self.after: Refill | None = None  # the refill to schedule once its call is over (`finished`)

    def alive(self) -> bool:
        """Not known to be gone: the waiter has not closed the channel (it holds it until it runs the call)."""
        launch = self.launch
        if launch.channel < 0:
            return False
        try:
            while chunk := os.read(launch.channel, 64):
                launch.heard += chunk
        except BlockingIOError:
            return True
        return False  # EOF: the waiter exited (a bound path moved, bwrap failed, killed)

    def discard(self) -> None:
        """Kill the jail and everything in it, close its descriptors; reaped now or at the next pool operation."""
        procguard.kill_group(self.pid)
        for fd in (self.stdin, self.out, self.err):
            os.close(fd)
        self.launch.close()
        _DYING.append(self.pid)


@dataclass(slots=True)
class Refill:
    """What refilling a profile's jails after a call needs: the digest they are for (`wanted`), what `sandbox.plan`
    takes to plan each again (the call's profile, cwd, user and tool key, and the setpriv of a tool's `user:`), and
    `spare`, a plan checked at that call that no jail was started with: the first new jail takes its descriptors,
    else `close` closes them."""

    wanted: str
    box: Sandbox
    cwd: str | None
    user: str | None
    user_prefix: tuple[str, ...]
    key: str
    spare: _sandbox.Plan | None

    def plan(self) -> _sandbox.Plan:
        """The spare plan (once), else one made now."""
        found, self.spare = self.spare, None
        return found or _sandbox.plan(self.box, self.cwd, self.user, self.key)

    def close(self) -> None:
        if self.spare is not None:
            self.spare.binds.close()
            self.spare = None


class _Pool:
    def __init__(self) -> None:
        self.pid = pidcache.pid()
        self.jails: dict[str, list[Jail]] = {}
        self.called: OrderedDict[str, float] = OrderedDict()  # digest -> when a call last asked for it
        self.latest: dict[tuple[object, ...], str] = {}  # (profile, cwd, user) -> the digest its last call had
        self.starting: dict[str, int] = {}  # digest -> jails a refill is starting right now (not in `jails` yet)
        self.timer: asyncio.TimerHandle | None = None
        self.timer_loop: asyncio.AbstractEventLoop | None = None


_POOL: _Pool | None = None
_DYING: list[int] = []  # killed jails not reaped yet
_LOCK = threading.RLock()  # loops in other threads (a job's runner) and the starter threads call too
# Jails start in these threads, never on a loop's thread: a start blocks its thread until the drop program has
# exec'd (posix_spawn's vfork, 3-8 ms on a loaded machine), and the loop serves nothing meanwhile. The lock is not
# held across a start. The threads live as long as the process: a parent-death signal (bwrap --die-with-parent,
# setpriv --pdeathsig) fires when the *thread* that started the jail ends, so a starter thread must never exit
# while its jails may serve a call (a ThreadPoolExecutor's threads end only at shutdown).
STARTERS = 2
_STARTER: tuple[int, ThreadPoolExecutor] | None = None


def _starter() -> ThreadPoolExecutor:
    global _STARTER
    if _STARTER is None or _STARTER[0] != pidcache.pid():  # a forked worker makes its own threads
        _STARTER = (pidcache.pid(), ThreadPoolExecutor(STARTERS, thread_name_prefix="toolrun-jail"))
    return _STARTER[1]


def _pool() -> _Pool:
    global _POOL
    if _POOL is None or _POOL.pid != pidcache.pid():  # a forked worker: its parent's jails are not its children
        _POOL = _Pool()
    return _POOL


def digest(p: _sandbox.Plan, user_prefix: tuple[str, ...]) -> str:
    """What a jail is prepared for: bwrap's whole set-up, the bound and covered objects' identities, who it runs as."""
    shape = (p.bwrap, p.prefix, user_prefix, p.jail, tuple(p.binds.idents), _covered(p.jail), p.drop, p.no_network)
    return hashlib.sha256(repr(shape).encode()).hexdigest()


def _covered(jail: tuple[str, ...]) -> tuple[tuple[int, int] | None, ...]:
    """The device and inode of each host object a jail covers (toolrun's own files and folders in a bound path or
    /etc). A cover is a mount over the object's name: a file replaced there (written anew and renamed over the old
    one, as editors do) takes the cover away in every jail made before, so a jail serves only the objects it covered."""
    found: list[tuple[int, int] | None] = []
    for index, arg in enumerate(jail[:-2]):
        if (arg == "--ro-bind" and jail[index + 1] == "/dev/null") or arg == "--tmpfs":
            if jail[index + 2 if arg == "--ro-bind" else index + 1].startswith("/proc/"):
                continue  # a cover in the jail's own /proc, a fresh one each jail: no host object under it
            try:
                st = os.lstat(jail[index + 2] if arg == "--ro-bind" else jail[index + 1])
            except OSError:
                found.append(None)
                continue
            found.append((st.st_dev, st.st_ino))
    return tuple(found)


async def take(box: Sandbox, cwd: str | None, user: str | None, user_prefix: tuple[str, ...], key: str = "") -> Jail:
    """A jail for a call of `box` (in `cwd`, as `user`; `user_prefix`: the setpriv of a tool's `user:`): one
    prepared ahead for exactly this plan, else one started now, in a starter thread (the loop serves other calls
    meanwhile); the profile's jails are refilled after this call. SandboxUnavailable (and OSError) as
    sandbox.prepare raises them."""
    with _LOCK:
        found, plan, wanted, again = _take(box, cwd, user, user_prefix, key)
    spare: _sandbox.Plan | None = plan  # checked now: the first refill's, when no jail was started with it
    if found is None:
        spare = None  # its descriptors go to the jail
        found = await _start_off_loop(plan, wanted, user_prefix)
    if again:
        found.after = Refill(wanted, box, cwd, user, user_prefix, key, spare)
    elif spare is not None:
        spare.binds.close()
    return found


def _take(
    box: Sandbox, cwd: str | None, user: str | None, user_prefix: tuple[str, ...], key: str
) -> tuple[Jail | None, _sandbox.Plan, str, bool]:
    """(a ready jail or None, the call's plan, its digest, whether the profile was called recently)."""
    pool = _pool()
    _reap_dying()
    plan = _sandbox.plan(box, cwd, user, key)
    wanted = digest(plan, user_prefix)
    _forget_older(pool, (box, cwd, user, user_prefix), wanted)
    now = time.monotonic()
    again = now - pool.called.get(wanted, -IDLE) < IDLE  # called before, recently: worth jails ahead
    pool.called[wanted] = now
    pool.called.move_to_end(wanted)
    found = None
    waiting = pool.jails.get(wanted, [])
    while waiting and found is None:
        jail = waiting.pop(0)
        if now - jail.born < IDLE and jail.alive():
            found = jail
        else:
            jail.discard()
    return found, plan, wanted, again


async def _start_off_loop(plan: _sandbox.Plan, wanted: str, user_prefix: tuple[str, ...]) -> Jail:
    """`_start` in a starter thread; a call cancelled meanwhile leaves no jail behind."""
    started = _starter().submit(_start, plan, wanted, user_prefix)
    try:
        return await asyncio.wrap_future(started)
    except asyncio.CancelledError:
        started.add_done_callback(functools.partial(_discard_started, plan))
        raise


def _discard_started(plan: _sandbox.Plan, started: Future[Jail]) -> None:
    if started.cancelled():  # cancelled in the starter's queue: `_start` never took the plan's descriptors
        plan.binds.close()
        return
    if started.exception() is not None:
        return
    with _LOCK:
        started.result().discard()


def finished(jail: Jail | None) -> None:
    """The call that took `jail` (None: no jail) is over: refill its profile's jails now (not while the call runs:
    making a jail takes CPU the call's own processes would wait for), and reap idle ones later."""
    if jail is None:
        return
    after, jail.after = jail.after, None
    if after is None:
        return
    with _LOCK:
        _schedule(_pool(), after)


def _forget_older(pool: _Pool, profile: tuple[object, ...], wanted: str) -> None:
    """A profile whose set-up changed (a folder replaced, a file to cover, a reload): its older jails are killed."""
    older = pool.latest.get(profile)
    pool.latest[profile] = wanted
    if older is not None and older != wanted:
        pool.called.pop(older, None)
        for jail in pool.jails.pop(older, []):
            jail.discard()


def _schedule(pool: _Pool, order: Refill) -> None:
    """Refill `order.wanted`'s jails in a starter thread, and reap idle ones later on the loop."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        order.close()
        return
    try:
        _starter().submit(_fill, order)
    except RuntimeError:  # the interpreter is exiting: no new thread work
        order.close()
        return
    if pool.timer is None or pool.timer_loop is not loop or loop.is_closed():
        pool.timer_loop = loop
        pool.timer = loop.call_later(IDLE / 3, _tick)


def _fill(order: Refill) -> None:
    """Start jails for `order.wanted` (in a starter thread) until PER_PROFILE wait or are being started. The lock is
    held for the pool's books and the plan (planning reads the hidden files and the scans' cache, which the loop's
    threads change), never across a start."""
    wanted = order.wanted
    try:
        while True:
            with _LOCK:
                pool = _pool()
                _trim(pool)
                if wanted not in pool.called or _counted(pool, wanted) >= PER_PROFILE:
                    return
                plan = order.plan()
                if digest(plan, order.user_prefix) != wanted:  # the profile or its paths changed since: none
                    plan.binds.close()
                    return
                pool.starting[wanted] = pool.starting.get(wanted, 0) + 1
            try:
                jail = _start(plan, wanted, order.user_prefix)
            finally:
                with _LOCK:
                    pool.starting[wanted] -= 1
                    if not pool.starting[wanted]:
                        del pool.starting[wanted]
            with _LOCK:
                if _pool() is pool and wanted in pool.called:  # still wanted: not reaped, closed or forgotten
                    pool.jails.setdefault(wanted, []).append(jail)
                else:
                    jail.discard()
    except (OSError, SandboxUnavailable):
        return  # the next call meets the same problem itself, and reports it
    finally:
        order.close()


def _counted(pool: _Pool, wanted: str) -> int:
    return len(pool.jails.get(wanted, ())) + pool.starting.get(wanted, 0)


def _trim(pool: _Pool) -> None:
    """Drop the jails of profiles not called for IDLE seconds, and of the least recently called past MAX_PROFILES."""
    now = time.monotonic()
    while pool.called:
        oldest, when = next(iter(pool.called.items()))
        if now - when < IDLE and len(pool.called) <= MAX_PROFILES:
            break
        del pool.called[oldest]
        for profile in [p for p, d in pool.latest.items() if d == oldest]:
            del pool.latest[profile]
        for jail in pool.jails.pop(oldest, []):
            jail.discard()
    for jails in pool.jails.values():  # a jail too old to be used
        for jail in [j for j in jails if now - j.born >= IDLE]:
            jails.remove(jail)
            jail.discard()
    _reap_dying()


def _tick() -> None:
    with _LOCK:
        pool = _pool()
        pool.timer = None
        _trim(pool)
        if pool.called or _DYING:
            loop = asyncio.get_running_loop()
            pool.timer_loop, pool.timer = loop, loop.call_later(IDLE / 3, _tick)


def _reap_dying() -> None:
    for pid in list(_DYING):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _DYING.remove(pid)


def _start(plan: _sandbox.Plan, wanted: str, user_prefix: tuple[str, ...]) -> Jail:
    """Start a jail for `plan` (its descriptors go to the jail)."""
    prefix = _guarded(plan.prefix or user_prefix)
    argv = ["/bin/sh", "-c", checked(plan.binds, "ready", keep=True) + WAITER]
    launch = _sandbox.Launch(plan.bwrap, plan.jail, argv, True, plan.binds, plan.drop, prefix, plan.no_network)
    opened: list[int] = []
    try:
        in_r, in_w = os.pipe()
        opened += (in_r, in_w)
        out_r, out_w = os.pipe()
        opened += (out_r, out_w)
        err_r, err_w = os.pipe()
        opened += (err_r, err_w)
        if plan.drop is not None and os.geteuid() == 0:  # the call's user may reopen them (/dev/stdout)
            for fd in (in_r, out_w, err_w):
                os.fchown(fd, *plan.drop)
        # The server's token (procguard), all the environment: a server killed before bwrap set its parent-death
        # signal leaves bwrap's child waiting forever in its set-up (bwrap died writing its status to the server);
        # the server's watchdog finds it, as every process of its calls, by the token.
        pid, _ = spawn.start(launch.argv, _jail_env(), None, in_r, out_w, err_w, extra=launch.fds)
    except BaseException:
        for fd in opened:
            os.close(fd)
        launch.close()
        raise
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    launch.started()
    os.set_blocking(launch.channel, False)
    return Jail(wanted, pid, in_w, out_r, err_r, launch)


def _jail_env() -> dict[str, str]:
    """A waiting jail's whole environment: the server's token (`TOOLRUN_CALL=<server token>.<n>`), by which the
    server's watchdog finds it (procguard); the call's own environment comes with its message."""
    return {procguard.CALL_ENV: procguard.call_token()}


def _guarded(prefix: tuple[str, ...]) -> tuple[str, ...]:
    """The jail's argv prefix, a setpriv (a tool's `user:`) with the parent-death signal set before bwrap starts.
    Without a setpriv (no prefix, or a root server's drop to nobody by unshare) nothing is added: bwrap sets its own
    at once (--die-with-parent), and a waiter whose server is gone reads the end of its stdin (the server held the
    only writer) and exits before anything ran."""
    if prefix and os.path.basename(prefix[0]) == "setpriv" and "--pdeathsig=KILL" not in prefix:
        return (*prefix[:-1], "--pdeathsig=KILL", "--")
    return prefix


def message(command: str, env: Mapping[str, str], limits: list[str], stdin: bool) -> bytes:
    """What a call tells its jail's waiter: its environment, its limits (prlimit, applied in the jail) and its
    command, framed by a random line that occurs nowhere in it. `stdin`: the call's stdin follows the message on
    the same pipe (else the command's stdin is /dev/null).

    The waiter (`/bin/sh`, started with the server's token only, `_jail_env`, which the call's own replaces, and PWD)
    exports the call's environment, forgets its own variables and becomes the tool's shell: it evaluates the
    command itself, as `/bin/sh -c` would (the same shell, the same options, line numbers from 1), then exits with
    its status. Starting a second shell for it cost a jail about 0.6 ms of CPU (bench/README.md). With limits,
    prlimit has to start the tool's shell (`exec prlimit ... /bin/sh -c`); where a name is one the shell cannot
    export, env(1) sets exactly the call's environment and starts it. Either gets the tool's names as
    sandbox.jail_env carries them, and the tool's shell gives them back: a tool's LD_PRELOAD (a library it wrote in
    its writable path) never loads into the prlimit that sets its limits."""
    words = ["echo ok >&3", "exec 3>&-" + ("" if stdin else " </dev/null")]
    if not limits and all(_NAME.match(name) for name in env):
        if env:  # the names the shell sets itself as it starts keep its own values, as in `sh -c` (SHELL_SET)
            named = (name if name in _sandbox.SHELL_SET else f"{name}={shlex.quote(v)}" for name, v in env.items())
            words.append("export " + " ".join(named))
        own = [name for name in ("end", "s", "l") if name not in env]  # the waiter's, unless the tool's own
        words += [*(["unset " + " ".join(own)] if own else []), f"eval {shlex.quote(command)}", "exit"]
    else:  # prlimit (or env) starts the tool's shell: its loader never sees the tool's names (sandbox.jail_env)
        carried, given = _sandbox.jail_env(env)
        run = [*([_prlimit(), *limits, "--"] if limits else []), "/bin/sh", "-c", given + command]
        if all(_NAME.match(name) for name in carried):
            if carried:
                words.append("export " + " ".join(f"{name}={shlex.quote(v)}" for name, v in carried.items()))
        else:
            run = ["/usr/bin/env", "-i", *(f"{name}={value}" for name, value in carried.items()), *run]
        words.append("exec " + " ".join(shlex.quote(a) for a in run))
    script = "; ".join(words)
    frame = secrets.token_hex(8)
    while frame in script:  # pragma: no cover - 64 random bits
        frame = secrets.token_hex(8)
    return f"{frame}\n{script}\n{frame}\n".encode()


def _prlimit() -> str:
    return shutil.which("prlimit") or "/usr/bin/prlimit"


@atexit.register
def close_all() -> None:
    """Kill every jail prepared ahead (an exiting interpreter; tests)."""
    with _LOCK:
        _close_all()


def _close_all() -> None:
    pool = _POOL
    if pool is None or pool.pid != pidcache.pid():
        return
    pool.called.clear()
    pool.latest.clear()
    for jails in pool.jails.values():
        for jail in jails:
            jail.discard()
    pool.jails.clear()
    _reap_dying()


def prepared() -> dict[str, int]:
    """How many jails wait, per digest (tests, diagnostics)."""
    with _LOCK:
        return {d: len(j) for d, j in _pool().jails.items() if j}
