"""Sandboxed exec and curl tools: bubblewrap (`bwrap`) around the tool's shell, with a seccomp filter.

A tool with `sandbox:` runs as `bwrap <jail> -- /bin/sh -c <command>`. The jail (docs/security.md):

- a new mount namespace whose root is an empty tmpfs, made read-only once set up; in it, read-only:
  /usr and /etc (with /bin, /sbin and /lib* as the host has them: links into /usr, or bound), the
  tool's `cwd` and the profile's `readable` paths; read-write: the profile's `writable` paths and a
  private /tmp (a tmpfs of `tmp_size`, 64 MiB by default, gone after the call); /dev holds null, zero, full, random and
  urandom only; /proc is the sandbox's own (it shows the sandbox's processes only);
- nothing of toolrun's own (config, data, cache dirs: the key store, the state file; the config file,
  the audit log; the catalog and env files): the paths a profile binds are opened at each call without
  following links, checked by device and inode, and bound by descriptor (sandboxpaths.py); a folder that holds
  one of toolrun's, in a `readable` path or the `cwd` or in /etc and /usr (a catalog in /etc/toolrun), is shown as a
  copy (a tmpfs of the jail's own holding binds of its other entries: a file renamed over one of toolrun's on the
  host changes nothing the jail shows; sandboxpaths._View); a bound path inside one, or a
  `writable` path that holds one (or where one not made yet would be made), fails the call;
- never root: a root server's tool without `user:` runs as SANDBOX_USER (`unshare --setgid --setuid`, or setpriv,
  before bwrap, which then makes an unprivileged user namespace); `user: root` is refused. /proc is read-only as a
  whole (bwrap 0.8 leaves /proc/sys writable) and PROC_HIDDEN are covered;
- private PID, IPC, UTS and cgroup namespaces, and a private network namespace (nothing in it but
  a loopback interface) unless `network: host`; the session toolrun starts every call in (no
  terminal to type into); no new privileges (bwrap sets it); `--die-with-parent`: the sandbox dies
  with the server;
- the seccomp filter of seccomp.py;
- the tool's shell is the PID namespace's first process (`--as-pid-1`): when it exits, or the call
  is killed at its timeout, the kernel kills every process left in the namespace, setsid and
  double-forked daemons included. Nothing a sandboxed tool starts outlives its call.

Fail closed: a sandboxed tool never runs without its sandbox. No `bwrap` on PATH: the call raises
SandboxUnavailable before anything starts. bwrap that cannot set the jail up (user namespaces
disabled, seccomp missing, a `writable` path that does not exist) exits before the command starts;
its status descriptor (`--json-status-fd`) then carries no exit code, and the call raises
SandboxUnavailable with bwrap's own message. `engine(probe=True)` runs the default jail once per
process (validate-catalog, serve, /readyz, describe) so the reason shows before any call.

Cost (bench/sandbox.py): bwrap starting at all is most of it; each flag here was measured, the
dearer choices were left out where a cheaper one gives the same guarantee: /dev is five bound
nodes, not `--dev` (a tmpfs and a devpts mount); /dev/shm a link into the private /tmp; no
`--new-session` (a second session means a second scheduler autogroup); no bwrap init process.
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shutil
import stat
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SandboxUnavailable
from ..models import Sandbox
from . import procguard, seccomp
from .sandboxpaths import FIRST_FD, MOVED, Binds, open_binds, verified

if TYPE_CHECKING:
    import pwd

    from ..settings import Settings

ENGINE = "bwrap"
DEFAULT = Sandbox(profile="default", network="none")
SYSTEM_READ_ONLY = ("/usr", "/etc")
# On a merged-/usr system these are links into /usr (made as links in the jail); else they are bound.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# The jail's /proc is read-only as a whole (every kernel knob); these show the host's boot arguments or kernel state
# and are covered (reading them fails). /proc/self/mountinfo stays: it names only paths bound at their own names.
PROC_HIDDEN = (
    "/proc/cmdline",
    "/proc/kcore",
    "/proc/keys",
    "/proc/key-users",
    "/proc/kallsyms",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/latency_stats",
)
DEFAULT_TMP_SIZE = 64 * 1024 * 1024  # the private /tmp, unless the profile says `tmp_size` (it counts as memory)
# A root server's sandboxed tool without `user:` runs as this user (never as root: root in a jail could still write
# host sysctls, read root-only files, plant setuid-root programs, and is not bound by `limits.processes`).
SANDBOX_USER = "nobody"
SECCOMP_FD = FIRST_FD  # bwrap's filter descriptor in the child, then its status one: after the check descriptors

_EXTRA_PRIVATE: set[str] = set()  # the dirs and audit log of the settings this process loaded
HIDDEN_FILES: set[str] = set()  # the catalog files and env files this process loaded
_CATALOG_PATHS: set[str] = set()  # the catalog files and folders this process loads from (`own_catalogs`)


# -- the engine: is bwrap here, and does it work -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Engine:
    """bwrap on this host: its path, and why a sandbox cannot be enforced here ('' when it can)."""

    path: str | None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem


# bwrap path -> (the probe's problem, '' when the default jail works; when it ran). A success is kept; a failure is
# trusted for RETRY_AFTER seconds only, so a host that is fixed (bwrap reinstalled, user namespaces enabled)
# serves again without a restart: /readyz and the next calls find out.
_PROBED: dict[str, tuple[str, float]] = {}
RETRY_AFTER = 10.0


@functools.lru_cache(maxsize=16)
def _which(path_env: str | None) -> str | None:
    found = shutil.which(ENGINE, path=path_env)
    return os.path.abspath(found) if found else None  # posix_spawn (which numbers the descriptors) needs it absolute


def engine(probe: bool = False) -> Engine:
    """Where bwrap is (on this process's PATH) and, with `probe`, whether the default jail starts here."""
    path = _which(os.environ.get("PATH"))
    if path is None:
        return Engine(None, "bwrap (bubblewrap) is not installed here: not found on PATH")
    problem, at = _PROBED.get(path, ("", 0.0))
    if problem and time.monotonic() - at > RETRY_AFTER:
        del _PROBED[path]  # stale: a call tries bwrap itself (and fails with its reason), a probe runs it again
        problem = ""
    if probe and path not in _PROBED:
        problem = _probe(path)
        _PROBED[path] = (problem, time.monotonic())
    return Engine(path, problem)


PROBE_TIMEOUT = 30.0


def _probe(path: str) -> str:
    """Run `/bin/true` in the default jail once; '' when it works, else why not (bwrap's own words).

    The probe never outlives this process: it gets a parent-death signal before bwrap starts (setpriv
    `--pdeathsig`, then a shell that gives up when its parent is no longer this process: one that died before the
    signal was set), runs in a process group of its own, and that whole group is killed at PROBE_TIMEOUT."""
    try:
        seccomp.program()
    except ValueError as exc:  # an architecture the filter does not know: no sandbox without it
        return str(exc)
    drop = ids(None)
    prefix = _parent_guard(_setpriv_drop(*drop) if drop is not None else [])
    launch = Launch(path, jail_args(DEFAULT, None, Binds()), ["/bin/true"], False, None, drop, prefix)
    # The probe carries this process's token and has its watchdog (procguard): a server killed while bwrap sets the
    # probe's jail up leaves bwrap's child waiting for its parent forever, in a session of its own, unless the
    # watchdog finds it. A watchdog started here stands down at a normal exit, as `toolrun call`'s does.
    procguard.start_watchdog(stand_down=True)
    try:
        proc = subprocess.Popen(
            launch.argv,
            env=_probe_env(),
            pass_fds=launch.fds,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        launch.close()
        return f"bwrap could not start: {exc}"
    launch.started()
    try:
        _, err = proc.communicate(timeout=PROBE_TIMEOUT)
    except BaseException as exc:  # a timeout, or this thread interrupted: nothing of the probe is left behind
        _kill_group(proc.pid)
        proc.communicate()
        launch.close()
        if isinstance(exc, subprocess.TimeoutExpired):
            return f"bwrap did not finish setting up the default sandbox in {PROBE_TIMEOUT:g} s"
        raise
    failure = launch.failure(proc.returncode, err.decode(errors="replace"))
    return failure or ("" if proc.returncode == 0 else f"the default sandbox exited with {proc.returncode}")


def _probe_env() -> dict[str, str]:
    """The probe's environment: where programs are, the locale, and this process's token (its watchdog finds it by
    that); never the server's own variables (the operator's secrets), which any process of the probe's user could
    read in /proc while it runs (setpriv, the shell and bwrap are not made non-dumpable)."""
    env = {name: os.environ[name] for name in ("PATH", "LANG", "LC_ALL", "LC_CTYPE") if name in os.environ}
    return {**env, procguard.CALL_ENV: procguard.call_token()}


def _parent_guard(options: list[str]) -> tuple[str, ...]:
    """An argv prefix that dies with this process: setpriv (with `options`: a user to drop to) sets the
    parent-death signal, and the shell after it execs the rest only while its parent is still this process (a signal
    set after the parent died would never come)."""
    guard = 'test "$PPID" = "$0" && exec "$@"; exit 125'
    return (_setpriv(), *options, "--pdeathsig=KILL", "--", "/bin/sh", "-c", guard, str(os.getpid()))


def _kill_group(pgid: int) -> None:
    import signal

    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


# -- the jail: bwrap's arguments for one profile ---------------------------------------------------------


_PRIVATE_ENV = (
    "TOOLRUN_HOME",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "SVC_CONFIG",
    "SVC_AUDIT_LOG",
    "SVC_REDIS_URL",
)


def private_paths(environ: Mapping[str, str] | None = None, settings: Settings | None = None) -> tuple[str, ...]:
    """toolrun's own files and folders, never visible in a sandbox: config, data (key store, state file) and
    cache dirs, the config file, the audit log (the catalog files and env files loaded are `hide`'s). `settings`
    adds its audit log and dirs for good."""
    environ = os.environ if environ is None else environ
    if settings is not None:
        found = [str(p) for p in settings.dirs.values()]
        if settings.audit_log and settings.audit_log != "-":
            found.append(os.path.abspath(settings.audit_log))
        if (socket := redis_socket(settings.redis_url)) is not None:
            found.append(socket)
        _EXTRA_PRIVATE.update(found)
    return _private(tuple(environ.get(name) for name in _PRIVATE_ENV), frozenset(_EXTRA_PRIVATE))


def own_catalogs(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Record the catalog files and folders this process loads from: a catalog folder loads every *.yaml in it, so a
    `writable` path that is or holds one fails the call (a tool there could add a catalog file whose tools have no
    sandbox). Its catalog files themselves are `hide`'s."""
    _CATALOG_PATHS.update(os.path.abspath(path) for path in paths if str(path))


def hide(paths: Iterable[str]) -> None:
    """Add files no sandbox may see or write (the catalog files and env files a load read): each at its name and,
    when that is a link, where it leads (the file itself)."""
    for path in paths:
        if path:
            HIDDEN_FILES.update((os.path.abspath(path), os.path.realpath(path)))


@functools.lru_cache(maxsize=64)
def _private(values: tuple[str | None, ...], extra: frozenset[str]) -> tuple[str, ...]:
    from ..settings import paths

    environ = {name: value for name, value in zip(_PRIVATE_ENV, values, strict=True) if value is not None}
    found = {str(p) for p in paths(environ).values()} | extra
    found.update(
        os.path.abspath(environ[name]) for name in ("SVC_CONFIG", "SVC_AUDIT_LOG") if environ.get(name, "-") != "-"
    )
    if (socket := redis_socket(environ.get("SVC_REDIS_URL"))) is not None:
        found.add(socket)
    return tuple(sorted(found))


def redis_socket(url: str | None) -> str | None:
    """The socket file of a `unix://` redis_url: toolrun's key store, jobs and state answer there, to whoever can
    connect (a tool that binds its folder), so it is toolrun's own like the key store's file."""
    if not url or not url.lower().startswith("unix:"):
        return None
    from urllib.parse import urlsplit

    path = urlsplit(url).path
    return os.path.abspath(path) if path else None


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def refused_path(path: str, cwd: bool = False) -> str | None:
    """Why a profile may not bind `path` at all ('' -> None): `/` or a parent of the jail's own /proc, /tmp and
    /dev would lay the host's over them, and the host's /proc holds every host process. `cwd`: `path` is the
    tool's working directory (bound read-only like a readable path)."""
    clean = os.path.normpath(path)
    if clean in ("/", "/tmp", "/dev") or _inside(clean, ["/proc"]):
        if cwd:
            return (
                f"its working directory {path}: it would lay the host's {clean} over the sandbox's own /proc, /tmp "
                "or /dev (leave `cwd:` out: a sandboxed tool starts in its private /tmp)"
            )
        return f"{path} would lay the host's {clean} over the sandbox's own /proc, /tmp or /dev"
    if _inside(clean, ["/dev"]):  # bound over the jail's own nodes (bwrap's error, or a /dev/null it cannot open)
        where = f"its working directory {path}" if cwd else path
        return (
            f"{where}: it is in /dev, and the sandbox's /dev is its own (null, zero, full, random, urandom, and shm, "
            "a link to its private /tmp): no path of the host's /dev is bound in a sandbox"
        )
    return None


@functools.lru_cache(maxsize=1)
def _system_args() -> tuple[str, ...]:
    """The host's system folders, five device nodes, and the jail's own /proc with its kernel knobs read-only.
    (The host's layout of /bin and /lib, not a decision about a path a tool could change.)"""
    args: list[str] = []
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in SYSTEM_READ_ONLY:
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc"]
    # bwrap covers /proc/sys and a few others read-only only where access(W_OK) succeeds (never for /proc/sys):
    # the whole /proc read-only (every knob, now and later), and what shows the host's boot or kernel covered.
    for path in PROC_HIDDEN:
        if os.path.lexists(path):
            args += ["--ro-bind", "/dev/null", path]
    args += ["--remount-ro", "/proc"]
    return tuple(args)


# The jail's /dev: DEVICES and these links (what bwrap's own --dev makes, less the terminal ones).
DEV_LINKS = (
    ("fd", "/proc/self/fd"),
    ("shm", "/tmp"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
)
DEV_FOLDER = "/dev/toolrun-jail-dev"  # a root server's /dev for jails, made once: one bind instead of five


def _device_args() -> list[str]:
    """The jail's /dev. A root server binds one folder it made of the five device nodes and the links
    (DEV_FOLDER: root's, 0755, nothing else in it, checked at each call), which costs a jail about 1 ms of CPU
    less than binding each node (bench/README.md); the jail's user cannot write there (the folder and nodes are
    root's, and root is not mapped in the jail's user namespace). Otherwise, or where that folder cannot be made or
    is not exactly that, each node is bound from the host's /dev and the links are made in the jail."""
    if os.geteuid() == 0 and _device_folder():
        return ["--dev-bind", DEV_FOLDER, "/dev"]
    args: list[str] = []
    for name in DEVICES:
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    for name, target in DEV_LINKS:
        args += ["--symlink", target, f"/dev/{name}"]
    return args


_DEV_UNMADE: set[str] = set()  # DEV_FOLDER names this process could not make (no mknod here): not tried again


def _device_folder() -> bool:
    """DEV_FOLDER is there and exactly as it should be (made now when it is not there at all)."""
    try:
        return _device_folder_ok()
    except FileNotFoundError:
        pass
    except OSError:
        return False
    if DEV_FOLDER in _DEV_UNMADE:
        return False
    try:
        _make_device_folder()
        return _device_folder_ok()
    except OSError:
        _DEV_UNMADE.add(DEV_FOLDER)
        return False


def _device_folder_ok() -> bool:
    info = os.lstat(DEV_FOLDER)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or stat.S_IMODE(info.st_mode) != 0o755:
        return False
    wanted = _device_numbers()
    links = dict(DEV_LINKS)
    with os.scandir(DEV_FOLDER) as entries:
        found = {entry.name: entry.stat(follow_symlinks=False) for entry in entries}
    if set(found) != set(wanted) | set(links):
        return False
    for name, entry in found.items():
        if name in links:
            if not stat.S_ISLNK(entry.st_mode) or os.readlink(f"{DEV_FOLDER}/{name}") != links[name]:
                return False
        elif (entry.st_mode, entry.st_rdev, entry.st_uid) != (stat.S_IFCHR | 0o666, wanted[name], 0):
            return False
    return True


@functools.cache
def _device_numbers() -> dict[str, int]:
    """The device numbers of DEVICES, read once per process: the kernel's own (null is 1:3 on every Linux), not
    a name a tool could change; the folder's entries are still compared with them at each call."""
    return {name: os.stat(f"/dev/{name}").st_rdev for name in DEVICES}


def _make_device_folder() -> None:
    """Make DEV_FOLDER under a temporary name, then rename it into place (another server may make it meanwhile)."""
    if os.statvfs("/dev").f_flag & os.ST_NODEV:
        raise OSError("device nodes do not work in /dev here")
    import tempfile

    made = tempfile.mkdtemp(prefix=".toolrun-jail-dev.", dir="/dev")
    try:
        for name in DEVICES:
            os.mknod(f"{made}/{name}", 0o600 | stat.S_IFCHR, os.stat(f"/dev/{name}").st_rdev)
            os.chmod(f"{made}/{name}", 0o666)
        for name, target in DEV_LINKS:
            os.symlink(target, f"{made}/{name}")
        os.chmod(made, 0o755)
        os.rename(made, DEV_FOLDER)
    except OSError:
        shutil.rmtree(made, ignore_errors=True)
        if not os.path.lexists(DEV_FOLDER):
            raise


def _base_args(box: Sandbox) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if box.network != "host":
        args.append("--unshare-net")
    # No --new-session: toolrun starts every call in a session of its own already, with no terminal; a second
    # setsid costs a scheduler autogroup (about 3 ms a call on a busy machine, bench/README.md).
    # --as-pid-1: the shell is the namespace's init (its exit ends every process left), one process less to start.
    args += ["--die-with-parent", "--as-pid-1", *_device_args(), *_system_args()]
    args += ["--size", str(box.tmp_size if box.tmp_size is not None else DEFAULT_TMP_SIZE), "--tmpfs", "/tmp"]
    return args


def jail_args(box: Sandbox, cwd: str | None, binds: Binds) -> tuple[str, ...]:
    """bwrap's options (everything before `--seccomp`) for `box` and a tool's `cwd`, with the paths of `binds`
    (opened and checked at this call) bound by descriptor."""
    args = [*_base_args(box), *binds.views]  # folders that hold toolrun's files, as copies, before what lies inside
    for path, flag, number in binds.args:
        args += [flag, str(number), path]
    if box.network == "host":
        resolv = os.path.realpath("/etc/resolv.conf")  # often a link into /run (systemd-resolved): DNS needs it
        if not _inside(resolv, ["/etc", *binds.paths]):
            args += ["--ro-bind-try", resolv, resolv]
    for path, is_dir in binds.masks:  # toolrun's files directly in /etc or /usr (docs/security.md: what remains)
        cover = ["--perms", "0000", "--tmpfs", path, "--remount-ro", path]
        args += cover if is_dir else ["--ro-bind", "/dev/null", path]
    return (*args, "--remount-ro", "/", "--chdir", cwd or "/tmp")


def _system_roots() -> tuple[str, ...]:
    """The host folders every sandbox shows at their own names: /usr, /etc, and /bin, /lib... where not links."""
    return (*SYSTEM_READ_ONLY, *(p for p in SYSTEM_LINKS if not os.path.islink(p) and os.path.isdir(p)))


class Launch:
    """One sandboxed start: the argv, the two pipes bwrap reads its filter from and writes its status to, and (in a
    child started by posix_spawn) the check's channel, on which the shell says `ok` just before the command runs.

    `fds` are the child's ends (3, 4, 5... in a child started by posix_spawn, else their own numbers); call
    `started()` once the child has them, `close()` once it has exited (or never started), then `check()`.
    """

    __slots__ = ("argv", "binds", "channel", "fds", "heard", "owner", "said", "status", "uses_channel")

    owner: tuple[int, int] | None

    fds: tuple[int, ...]

    def __init__(
        self,
        bwrap: str,
        jail: tuple[str, ...],
        argv: list[str],
        renumbered: bool = True,
        binds: Binds | None = None,
        owner: tuple[int, int] | None = None,
        prefix: tuple[str, ...] = (),
        no_network: bool = False,
    ) -> None:
        self.binds = binds or Binds()
        try:
            filter_r, filter_w = _pipe(self.binds.base)
        except BaseException:
            self.binds.close()
            raise
        channel: tuple[int, ...] = ()
        try:
            os.write(filter_w, seccomp.program(no_network=no_network))  # a few hundred bytes: the pipe holds them
            status_r, status_w = _pipe(self.binds.base)
            if renumbered:  # the channel is descriptor 3 in the child (its number in the shell's words)
                try:
                    channel = _pipe(self.binds.base)
                except BaseException:
                    os.close(status_r)
                    os.close(status_w)
                    raise
        except BaseException:
            os.close(filter_r)
            self.binds.close()
            raise
        finally:
            os.close(filter_w)
        # In the child: the check's channel (3), the shell's check descriptors (4...), bwrap's filter and status,
        # the bound paths'.
        self.fds = (*channel[1:], *self.binds.checks, filter_r, status_w, *self.binds.fds)
        self.binds.checks, self.binds.fds = [], []  # closed with the others, by started()
        self.status = status_r
        self.channel = channel[0] if channel else -1
        self.uses_channel = bool(channel)
        self.said = b""
        self.heard = b""  # what the shell said on the check's channel
        self.owner = owner  # (uid, gid) the call runs as: its output pipes are handed to it (/dev/stdout works)
        first = SECCOMP_FD + len(self.binds.args)  # after the shell's check descriptors
        numbers = (first, first + 1) if renumbered else (filter_r, status_w)
        self.argv = [*prefix, bwrap, *jail, "--seccomp", str(numbers[0]), "--json-status-fd", str(numbers[1])]
        self.argv += ["--", *argv]

    def started(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = ()

    def close(self) -> None:
        """Keep what bwrap wrote on its status descriptor and the shell on the check's channel (their writers have
        exited), and close everything."""
        self.started()
        if self.status >= 0:
            self.said += _drain(self.status)
            self.status = -1
        if self.channel >= 0:
            self.heard += _drain(self.channel)
            self.channel = -1

    def failure(self, returncode: int, stderr: str) -> str | None:
        """Why bwrap could not set the sandbox up (its message), or None when the command ran."""
        self.close()
        ran = any("exit-code" in _json(doc) for doc in self.said.split(b"\n"))  # the shell started (and ended)
        if self.uses_channel:
            if b"ok\n" in self.heard:
                return None
            if b"ready\n" in self.heard:  # a jail prepared ahead (sandboxpool.py) that never ran the call
                return "the sandbox prepared for the call did not run it"
            if ran:  # the shell exited before it said ok: a bound path was not the object checked
                return MOVED
        elif returncode == 0 or ran:
            return None
        said = [line for line in stderr.splitlines() if line.startswith("bwrap:") or line == MOVED]
        return said[-1] if said else f"bwrap exited with {returncode} before the command started"

    def check(self, returncode: int, stderr: str) -> None:
        """Raise SandboxUnavailable when the command never ran because the sandbox could not be set up."""
        why = self.failure(returncode, stderr)
        if why is not None:
            raise refusal("", f"bwrap could not set it up here ({why})")


class NoLaunch:
    """What `executor.run` holds for a call without a sandbox: no descriptors, nothing to check."""

    fds: tuple[int, ...] = ()
    owner: tuple[int, int] | None = None

    def started(self) -> None:
        pass

    def close(self) -> None:
        pass

    def check(self, returncode: int, stderr: str) -> None:
        pass


NO_LAUNCH = NoLaunch()


def _pipe(lowest: int = 5) -> tuple[int, int]:
    """A pipe whose ends are numbered `lowest` or more: every extra descriptor is moved onto 3, 4... in the child,
    so none may have a number below those targets here (spawn._actions)."""
    import fcntl

    ends = os.pipe()
    if min(ends) >= lowest:
        return ends
    try:
        return (
            fcntl.fcntl(ends[0], fcntl.F_DUPFD_CLOEXEC, lowest),
            fcntl.fcntl(ends[1], fcntl.F_DUPFD_CLOEXEC, lowest),
        )
    finally:
        for fd in ends:
            os.close(fd)


def _drain(fd: int) -> bytes:
    """What is left in the pipe `fd` (its writers are gone, or it is read as it stands), and close it."""
    got = b""
    os.set_blocking(fd, False)
    try:
        while chunk := os.read(fd, 4096):
            got += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return got


def _json(doc: bytes) -> dict[str, Any]:
    try:
        value = json.loads(doc)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class Plan:
    """What a sandboxed start of one call needs, checked at this call: bwrap, its options for the profile (bound
    paths by descriptor, `binds`, opened and checked now), the user to drop to and the argv prefix that does it."""

    bwrap: str
    jail: tuple[str, ...]
    binds: Binds
    drop: tuple[int, int] | None
    prefix: tuple[str, ...]
    no_network: bool
    renumbered: bool


# The tool's environment outside its jail: prlimit, setpriv, unshare and bwrap start it, outside every namespace and
# before the filter (as root under a root server), and the C library's loader of each acts on LD_PRELOAD,
# LD_LIBRARY_PATH, GCONV_PATH and the like (a library a tool wrote in its writable path ran as root). So they get
# each of the tool's names under this prefix, and the jail's first shell gives the tool its own names back.
OUTSIDE_PREFIX = "TOOLRUN_JAILED_"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The words that give the names back go before the command in one argument (`sh -c`), which the kernel takes up to
# 128 KiB (MAX_ARG_STRLEN): past GIVEN_INLINE they travel in variables of their own, GIVEN_PREFIX<n>, each at most
# that long (a tool with thousands of variables, a wide passthrough, started outside a jail as before).
GIVEN_PREFIX = "TOOLRUN_GIVEN_"
GIVEN_INLINE = 64 * 1024
# The variables the shell sets itself as it starts (dash): it reads none of the tool's values for them. They travel
# under their own names (no loader reads them), so that the tool's shell sets them as it does without a sandbox.
SHELL_SET = frozenset({"IFS", "OPTIND", "PPID", "PWD"})


def jail_env(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """The environment to spawn a jail with (every name the shell can export carried as OUTSIDE_PREFIX + name, which
    no loader reads), and the words that give the jail's first shell the tool's names back ('' when none), to put
    before the command on its first line (a command that does not parse still fails as the tool's own, and its line
    numbers are as before)."""
    outside: dict[str, str] = {}
    names: list[str] = []
    for name, value in env.items():
        if _ENV_NAME.match(name) and name not in SHELL_SET:
            outside[OUTSIDE_PREFIX + name] = value
            names.append(name)
        else:  # no loader or C library variable: those are all names
            outside[name] = value
    if not names:
        return outside, ""
    # X before TOOLRUN_JAILED_X (shorter first): X reads its carried value before the tool's own TOOLRUN_JAILED_X
    # replaces it; a carried name that is also one of the tool's keeps the value given to it, and is not unset.
    names.sort(key=len)
    chunks: list[str] = []
    while names:
        part: list[str] = []
        size = 0
        while names and (not part or size + 3 * len(names[0]) + 40 <= GIVEN_INLINE):
            part.append(names.pop(0))
            size += 3 * len(part[-1]) + 40
        given = " ".join(f'{name}="${OUTSIDE_PREFIX}{name}"' for name in part)
        carried = [OUTSIDE_PREFIX + name for name in part if OUTSIDE_PREFIX + name not in env]
        chunks.append(f"export {given}" + (f"; unset {' '.join(carried)}; " if carried else "; "))
    if len(chunks) == 1:
        return outside, "".join(chunks)
    # Too long for the command's argument: each part in a variable, all expanded before any name is given back.
    tag = f"{GIVEN_PREFIX}{secrets.token_hex(4)}_"
    held = [f"{tag}{n}" for n in range(len(chunks))]
    outside.update(zip(held, chunks, strict=True))
    return outside, f'eval "{"".join("$" + name for name in held)}"; unset {" ".join(held)}; '


def prepare(
    box: Sandbox, cwd: str | None, user: str | None, argv: list[str], key: str = "", inner: list[str] | None = None
) -> Launch:
    """The Launch of `argv` in `box`; SandboxUnavailable when bwrap is missing (or known not to work here), or when
    a bound path cannot be bound safely at this call (sandboxpaths.py). `inner`: a prefix run in the sandbox
    before `argv` (prlimit of the process limit, which counts the sandbox user namespace's processes there)."""
    p = plan(box, cwd, user, key)
    if p.renumbered:  # the shell checks the bound paths and says ok on the check's channel (fd 3) before the command
        argv = [*(inner or []), *argv[:2], verified(argv[2], p.binds), *argv[3:]]
    else:
        argv = [*(inner or []), *argv]
    return Launch(p.bwrap, p.jail, argv, p.renumbered, p.binds, p.drop, p.prefix, p.no_network)


def plan(box: Sandbox, cwd: str | None, user: str | None, key: str = "") -> Plan:
    """The Plan of a call in `box` (see `prepare` for what it refuses)."""
    found = engine()
    if not found.ok or found.path is None:
        raise SandboxUnavailable(_refusal(key, found.problem))
    try:
        seccomp.program()
    except ValueError as exc:
        raise SandboxUnavailable(_refusal(key, str(exc))) from None
    for path in (*box.readable, *box.writable, *((cwd,) if cwd else ())):
        why = refused_path(path, cwd=path == cwd)
        if why is not None:
            raise SandboxUnavailable(_refusal(key, f"its sandbox may not bind {why}"))
    drop = ids(user)
    from .spawn import uses_posix_spawn

    renumbered = uses_posix_spawn()
    try:
        binds = open_binds(
            box.readable,
            box.writable,
            cwd,
            private_paths(),
            renumbered,
            HIDDEN_FILES,
            tuple(_CATALOG_PATHS),
            _system_roots(),
            _who(drop),
        )
    except SandboxUnavailable as exc:
        raise SandboxUnavailable(_refusal(key, str(exc))) from None
    except FileNotFoundError:  # the cwd: a sandbox that cannot be set up, its path for the server's log only
        raise SandboxUnavailable(_refusal(key, f"its working directory {cwd} does not exist here")) from None
    prefix = tuple(_drop_argv(*drop)) if drop is not None and user is None else ()
    no_network = box.network != "host"  # the filter refuses the socket families no network namespace covers
    return Plan(found.path, jail_args(box, cwd, binds), binds, drop, prefix, no_network, renumbered)


def _who(drop: tuple[int, int] | None) -> tuple[int, frozenset[int]]:
    """The user id and group ids a sandboxed call runs as: the server's own (its groups kept), or SANDBOX_USER's or
    a `user:`'s (`drop`): its uid and primary group only, the groups cleared (executor._setpriv(sandboxed=True):
    --clear-groups). A copy's mode is reckoned from these (sandboxpaths._granted): a supplementary group the call
    does not hold grants it nothing."""
    if drop is None:
        return os.geteuid(), frozenset((os.getegid(), *os.getgroups()))
    return drop[0], frozenset((drop[1],))


def ids(user: str | None) -> tuple[int, int] | None:
    """(uid, gid) a sandboxed call runs as when that is not the server's own: `user`'s, or SANDBOX_USER's for a root
    server's tool without `user:`. A sandbox never holds root: `user: root` is refused (SandboxUnavailable)."""
    import pwd

    if user is None and os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam(user or SANDBOX_USER)
    except KeyError:
        if user is not None:
            raise
        return (65534, 65534)  # no `nobody` in this passwd: its customary ids
    why = _holds_root(entry)
    if why is not None:
        raise SandboxUnavailable(
            _refusal("", f"it names user {user} ({why}): a sandbox never holds root; remove `user:` or the sandbox")
        )
    return (entry.pw_uid, entry.pw_gid)


def holds_root(user: str) -> str | None:
    """Why `user` would hold root in a sandbox: uid 0, or root's group (group 0) as its own or among its groups
    (the call takes them all); None when it would not, or no such user exists here."""
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return None
    return _holds_root(entry)


def _holds_root(entry: pwd.struct_passwd) -> str | None:
    """`holds_root` of a user's entry (the one lookup `ids` made at this call, not a second one)."""
    import grp

    if entry.pw_uid == 0:
        return "uid 0"
    try:
        members = grp.getgrgid(0).gr_mem
    except KeyError:
        members = []
    if entry.pw_gid == 0 or entry.pw_name in members:
        return "in group 0, root's group"
    return None


def _drop_argv(uid: int, gid: int) -> list[str]:
    """The argv prefix that drops a root server's call to `uid` and `gid` before bwrap: util-linux's `unshare
    --setgid --setuid`, which unshares nothing here, clears the groups, sets the gid, then the uid (every one of
    real, effective and saved; no capability is left), as `setpriv --reuid --regid --clear-groups` does, with no
    user lookup and one library less: about 0.6 ms of CPU less per call (bench/README.md). bwrap sets the
    parent-death signal itself (--die-with-parent), and a jail prepared ahead exits when its server's end of its
    input closes. Where unshare cannot (util-linux before 2.35), setpriv, with the parent-death signal."""
    unshare = _unshare()
    if unshare is not None:
        return [unshare, "--setgid", str(gid), "--setuid", str(uid), "--"]
    return [_setpriv(), *_setpriv_drop(uid, gid), "--pdeathsig=KILL", "--"]


def _setpriv_drop(uid: int, gid: int) -> list[str]:
    return [f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


@functools.cache
def _setpriv() -> str:
    return shutil.which("setpriv") or "/usr/bin/setpriv"


@functools.cache
def _unshare() -> str | None:
    """util-linux's unshare where it has --setuid and --setgid (asked once per process), else None."""
    found = shutil.which("unshare")
    if found is None:
        return None
    try:
        done = subprocess.run([found, "--help"], capture_output=True, timeout=10, env={}, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if b"--setuid" in done.stdout and b"--setgid" in done.stdout else None


def _refusal(key: str, why: str) -> str:
    who = f"tool {key}" if key else "this tool"
    return f"{who} runs in a sandbox, and {why}; it was not run"


def refusal(key: str, why: str) -> SandboxUnavailable:
    return SandboxUnavailable(_refusal(key, why))


# -- what the doors show ---------------------------------------------------------------------------------


def describe(box: Sandbox, user: str | None = None) -> dict[str, Any]:
    """The profile as the tool entry, --dry-run and describe show it, and whether this host can enforce it."""
    return box.entry(host_problem())


def host_problem() -> str:
    """Why this host cannot enforce a sandbox now ('' when it can): asked live, never kept with a tool's entry."""
    return engine(probe=True).problem


def describe_text(shown: Mapping[str, Any]) -> str:
    """One line: `default (network none; writable /srv/out; enforced here)`."""
    parts = [f"network {shown['network']}"]
    for name in ("readable", "writable"):
        if shown.get(name):
            parts.append(f"{name} {', '.join(shown[name])}")
    if shown.get("tmp_size"):
        parts.append(f"/tmp {shown['tmp_size']} bytes")
    parts.append("enforced here" if shown.get("enforced") else f"NOT enforceable here: {shown.get('reason', '')}")
    return f"{shown['profile']} ({'; '.join(parts)})"


def load_problem(tools: Iterable[Any], probe: bool = True) -> str | None:
    """At load (validate-catalog, serve) and in /readyz: why the catalog's sandboxed tools cannot run here."""
    keys = [t.key for t in tools if getattr(t, "sandbox", None) is not None]
    if not keys:
        return None
    found = engine(probe=probe)
    if found.ok:
        return None
    shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return f"{len(keys)} sandboxed tool(s) cannot run on this host ({shown}): {found.problem}"


def resolve_path(path: str, base: Path) -> str:
    """A profile path as bwrap binds it: absolute, from the declaring catalog file's folder (itself resolved), `~`
    expanded, `.` and `..` taken away by name. Links in the path itself are left as they are, never followed at
    load: a tool that may write a folder could turn another tool's path there into a link to anywhere before a
    load, and the call binds no link (sandboxpaths.py refuses it)."""
    return os.path.normpath(os.path.join(base.resolve(), os.path.expanduser(path)))
