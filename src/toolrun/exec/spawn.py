"""Starting a tool's process and watching its descriptors: the hot part of the exec path.

`start(argv, env, cwd, stdin_fd, stdout_fd, stderr_fd)` starts `argv` in a new session with those
three descriptors as its 0, 1 and 2 and no other descriptor, and returns its pid (and the Popen
object when Popen started it). Two ways, one behaviour:

- glibc 2.34 or later, no `cwd`: `posix_spawn(3)` through ctypes, with the file actions dup2 x 3 and
  `closefrom(3)` (every other descriptor closed, as Popen's `close_fds`), the attributes SETSID and
  SETSIGDEF (SIGPIPE and SIGXFSZ back to their default action, as Popen's `restore_signals`). About
  60-100 us of the server's CPU less per call than `subprocess.Popen`, which does the same work in
  Python before its vfork. The errors are Popen's: OSError(errno, strerror, argv[0]) when the
  program cannot start, ValueError("embedded null byte") and ValueError("illegal environment
  variable name") for what no process can be given.
- anything else (a `cwd`, another C library, an older glibc): `subprocess.Popen`.

`Watcher` tells a loop's callbacks when a descriptor is readable or writable: one epoll of its own
holds every child's pipes and pidfd and is itself one reader of the event loop, so registering a
pipe is one C call instead of asyncio's selector bookkeeping (a key, a handle, a lookup that
raises KeyError), and one loop callback serves every child's events of an iteration.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import weakref
from asyncio import AbstractEventLoop
from collections.abc import Callable, Mapping
from typing import Any

from .. import speedups
from . import pidcache

# -- posix_spawn through ctypes ------------------------------------------------------------------

_POSIX_SPAWN_SETSIGDEF = 0x04
_POSIX_SPAWN_SETSID = 0x80
_STRUCT = 1024  # posix_spawn_file_actions_t is 80 bytes and posix_spawnattr_t 336 on glibc: room to spare


class _Libc:
    """glibc's posix_spawn with closefrom, or None when this C library does not have it."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.spawn = libc.posix_spawn
        self.spawn.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, *([ctypes.c_void_p] * 4)]
        self.fa_init = libc.posix_spawn_file_actions_init
        self.fa_destroy = libc.posix_spawn_file_actions_destroy
        self.fa_dup2 = libc.posix_spawn_file_actions_adddup2
        self.fa_closefrom = libc.posix_spawn_file_actions_addclosefrom_np  # glibc 2.34
        self.setdefault = libc.posix_spawnattr_setsigdefault
        self.init_attr = libc.posix_spawnattr_init
        self.set_flags = libc.posix_spawnattr_setflags
        if sys.byteorder != "little":
            raise OSError("sigset_t layout unknown")
        self.attrs: dict[tuple[bool, bool], ctypes.Array[ctypes.c_char]] = {}
        # glibc's two internal signals (32 and 33): its posix_spawn leaves them ignored in the child unless they are
        # in the sigdefault set, where Popen's child (an exec) keeps this process's own disposition: ignored stays
        # ignored, anything else is the default. Neither can become ignored once it is not (glibc never ignores them
        # and Python cannot touch them), so a process that ignores neither decides once; one started ignoring them
        # (by GNU make, or any parent that uses posix_spawn) looks at /proc before each spawn, since glibc may
        # install a handler for 33 (set*id in a threaded process) later.
        self.fixed: ctypes.Array[ctypes.c_char] | None = None
        state = _internal_ignored()
        if state == (False, False):
            self.fixed = self.attr_for(state)

    def attr(self) -> ctypes.Array[ctypes.c_char]:
        return self.fixed if self.fixed is not None else self.attr_for(_internal_ignored())

    def attr_for(self, ignored: tuple[bool, bool]) -> ctypes.Array[ctypes.c_char]:
        """The spawn attributes: a new session, and SIGPIPE, SIGXFSZ (Popen's restore_signals) and the internal
        signals this process does not ignore back to their default action."""
        attr = self.attrs.get(ignored)
        if attr is not None:
            return attr
        attr = ctypes.create_string_buffer(_STRUCT)
        # sigaddset refuses the internal two: the bits are set here (sigset_t is a little-endian bit array).
        sigset = bytearray(_STRUCT)
        internal = (s for s, ign in zip((32, 33), ignored, strict=True) if not ign)
        for signum in (signal.SIGPIPE, signal.SIGXFSZ, *internal):
            sigset[(signum - 1) // 8] |= 1 << ((signum - 1) % 8)
        ok = self.init_attr(attr) == 0
        ok = ok and self.setdefault(attr, ctypes.create_string_buffer(bytes(sigset))) == 0
        flags = ctypes.c_short(_POSIX_SPAWN_SETSID | _POSIX_SPAWN_SETSIGDEF)
        if not (ok and self.set_flags(attr, flags) == 0):
            raise OSError("posix_spawnattr setup failed")
        self.attrs[ignored] = attr
        return attr


def _internal_ignored() -> tuple[bool, bool]:
    """Whether this process ignores signals 32 and 33 (from /proc: Python cannot ask about glibc's own signals)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("SigIgn:"):
                    mask = int(line.split()[1], 16)
                    return bool(mask >> 31 & 1), bool(mask >> 32 & 1)
    except (OSError, ValueError):
        pass
    return True, True  # unknown: leave them to glibc


def _load() -> _Libc | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        import platform

        name, version = platform.libc_ver()
        if name != "glibc" or tuple(int(p) for p in version.split(".")[:2]) < (2, 34):
            return None
        return _Libc()
    except (OSError, AttributeError, ValueError):  # no such symbol, no libc to load
        return None


# glibc's posix_spawn with closefrom when this C library has it: a sandbox's bound paths, handed to bwrap as
# descriptors 3, 4..., need it whatever the switch says; the `posix_spawn` switch chooses only how the rest start
_LOADED = _load()
LIBC = _LOADED if speedups.on("posix_spawn") else None  # None: subprocess.Popen
# The stdin of every child started without one; opened once (close-on-exec, read-write as Popen's DEVNULL),
# shared by forked workers (it is /dev/null: nothing to share).
_DEVNULL = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC) if _LOADED is not None else -1


def _encode(value: str) -> bytes:
    data = os.fsencode(value)
    if b"\0" in data:
        raise ValueError("embedded null byte")
    return data


# `NAME=value` bytes of the environment variables children get, by (name, value): a tool's environment is the
# same at every call but for the call's token, so each variable is encoded and checked once. Emptied when full.
_ENV_ITEMS: dict[tuple[str, str], bytes] = {}
_ENV_ITEMS_MAX = 4096
# File actions (dup2 x 3, closefrom) by the three descriptors they move, built once: the pipes' descriptor
# numbers come back call after call. Never freed while cached (a spawn in another thread may be reading one),
# so the cache stops growing at its cap and the rest are built and destroyed per call.
_ACTIONS: dict[tuple[int, ...], ctypes.Array[ctypes.c_char]] = {}
_ACTIONS_MAX = 256


def _env_item(key: str, value: str) -> bytes:
    item = _ENV_ITEMS.get((key, value))
    if item is None:
        name = _encode(key)
        if b"=" in name:
            raise ValueError("illegal environment variable name")
        item = name + b"=" + _encode(value)
        if len(_ENV_ITEMS) >= _ENV_ITEMS_MAX:
            _ENV_ITEMS.clear()
        _ENV_ITEMS[key, value] = item
    return item


def _actions(libc: _Libc, fds: tuple[int, ...]) -> ctypes.Array[ctypes.c_char]:
    """posix_spawn_file_actions_t: `fds` dup2'd onto 0, 1, 2 (and 3, 4... for extra ones), then every other
    descriptor closed."""
    actions = ctypes.create_string_buffer(_STRUCT)
    if libc.fa_init(actions) != 0:  # pragma: no cover - it only zeroes the struct
        raise OSError("posix_spawn_file_actions_init failed")
    try:
        for target, fd in enumerate(fds):
            if libc.fa_dup2(actions, fd, target) != 0:  # pragma: no cover - ENOMEM
                raise MemoryError
        if libc.fa_closefrom(actions, len(fds)) != 0:  # pragma: no cover - ENOMEM
            raise MemoryError
    except BaseException:  # pragma: no cover - ENOMEM
        libc.fa_destroy(actions)
        raise
    return actions


def _posix_spawn(libc: _Libc, path: str, argv: list[str], env: Mapping[str, str], fds: tuple[int, ...]) -> int:
    file = _encode(path)
    args = [_encode(a) for a in argv]
    items = [_env_item(key, value) for key, value in env.items()]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args)
    c_env = (ctypes.c_char_p * (len(items) + 1))(*items)
    actions = _ACTIONS.get(fds)
    owned = None  # built for this call only: destroyed after it
    if actions is None:
        actions = _actions(libc, fds)
        if len(_ACTIONS) >= _ACTIONS_MAX or _ACTIONS.setdefault(fds, actions) is not actions:
            owned = actions  # the cache is full, or another thread cached the same one meanwhile
    try:
        pid = ctypes.c_int()
        err = libc.spawn(ctypes.byref(pid), file, actions, libc.attr(), c_argv, c_env)
    finally:
        if owned is not None:
            libc.fa_destroy(owned)
    if err:
        raise OSError(err, os.strerror(err), path)  # what Popen raises (FileNotFoundError, PermissionError, ...)
    return pid.value


def start(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str | None,
    stdin: int | None,
    stdout: int,
    stderr: int,
    executable: str | None = None,
    extra: tuple[int, ...] = (),
) -> tuple[int, subprocess.Popen[bytes] | None]:
    """Start `argv` (the file `executable`, else argv[0]) in a new session; `stdin` None is /dev/null.
    `extra` descriptors are passed too: as 3, 4... with posix_spawn, else under their own numbers.
    (pid, the Popen object or None)."""
    libc = _LOADED if extra else LIBC
    path = executable or argv[0]
    if (
        libc is not None
        and cwd is None
        and os.path.isabs(path)
        and min(stdout, stderr, 3 if stdin is None else stdin, *extra) > 2
    ):
        fds = (_DEVNULL if stdin is None else stdin, stdout, stderr, *extra)
        return _posix_spawn(libc, path, argv, env, fds), None
    proc = subprocess.Popen(
        argv,
        executable=executable,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=cwd,
        start_new_session=True,
        pass_fds=extra,
    )
    return proc.pid, proc


def start_command(
    argv: list[str],
    env: Mapping[str, str],
    cwd: str | None,
    stdin: int | None,
    stdout: int,
    stderr: int,
    direct: tuple[str, list[str], dict[str, str]] | None,
    extra: tuple[int, ...] = (),
) -> tuple[int, subprocess.Popen[bytes] | None]:
    """`start` the program of `direct` (file, argv, env: see directexec) if given and it starts, else `argv`."""
    if extra:
        return start(argv, env, cwd, stdin, stdout, stderr, extra=extra)
    if direct is not None:
        try:
            return start(direct[1], direct[2], cwd, stdin, stdout, stderr, executable=direct[0])
        except OSError:  # a script without #!, a file gone meanwhile: the shell runs it, with its errors
            pass
    return start(argv, env, cwd, stdin, stdout, stderr)


def uses_posix_spawn() -> bool:
    """Whether descriptors can be handed on renumbered (3, 4...): what a sandbox's bound paths need."""
    return _LOADED is not None


# -- watching descriptors ------------------------------------------------------------------------


class Watcher:
    """Readiness callbacks for the descriptors of a loop's children, through one epoll of their own."""

    def __init__(self, loop: AbstractEventLoop) -> None:
        self.pid = pidcache.pid()
        self.epoll = select.epoll()  # close-on-exec
        self.callbacks: dict[int, Callable[[int], object]] = {}
        # No reference to the loop: the loop's entry in _WATCHERS (and this epoll) goes when the loop does.
        loop.add_reader(self.epoll.fileno(), self._ready)

    def add(self, fd: int, callback: Callable[[int], object], writable: bool = False) -> None:
        self.callbacks[fd] = callback
        self.epoll.register(fd, select.EPOLLOUT if writable else select.EPOLLIN)

    def remove(self, fd: int) -> None:
        if self.callbacks.pop(fd, None) is not None:
            self.epoll.unregister(fd)

    def _ready(self) -> None:
        callbacks = self.callbacks
        for fd, _ in self.epoll.poll(0):
            callback = callbacks.get(fd)
            if callback is not None:  # not removed by an earlier callback of this round
                callback(fd)


class LoopWatcher:
    """The same with the loop's own add_reader / add_writer (no epoll: not Linux)."""

    def __init__(self, loop: AbstractEventLoop) -> None:
        self.pid = pidcache.pid()
        self.loop = weakref.ref(loop)
        self.writers: set[int] = set()

    def add(self, fd: int, callback: Callable[[int], object], writable: bool = False) -> None:
        loop = self.loop()
        assert loop is not None
        if writable:
            self.writers.add(fd)
            loop.add_writer(fd, callback, fd)
        else:
            loop.add_reader(fd, callback, fd)

    def remove(self, fd: int) -> None:
        loop = self.loop()
        if loop is None:
            return
        if fd in self.writers:
            self.writers.discard(fd)
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)


_WATCHERS: weakref.WeakKeyDictionary[AbstractEventLoop, Any] = weakref.WeakKeyDictionary()


def watcher(loop: AbstractEventLoop) -> Watcher | LoopWatcher:
    """This loop's watcher (made on first use; a forked process makes its own)."""
    found = _WATCHERS.get(loop)
    if found is None or found.pid != pidcache.pid():
        found = _WATCHERS[loop] = Watcher(loop) if hasattr(select, "epoll") else LoopWatcher(loop)
    return found
