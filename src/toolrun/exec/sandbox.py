"""Sandboxed exec and curl tools: bubblewrap (`bwrap`) around the tool's shell, with a seccomp filter.

A tool with `sandbox:` runs as `bwrap <jail> -- /bin/sh -c <command>`. The jail (docs/security.md):

- a new mount namespace whose root is an empty tmpfs, made read-only once set up; in it, read-only:
  /usr and /etc (with /bin, /sbin and /lib* as the host has them: links into /usr, or bound), the
  tool's `cwd` and the profile's `readable` paths; read-write: the profile's `writable` paths and a
  private /tmp (a tmpfs of `tmp_size`, gone after the call); /dev holds null, zero, full, random and
  urandom only; /proc is the sandbox's own (it shows the sandbox's processes only);
- nothing of toolrun's own (config, data, cache dirs: the key store, the state file; the config file,
  the audit log): where a `readable` path or the `cwd` contains one, it is covered by an empty
  read-only tmpfs (a directory) or /dev/null (a file); a `writable` path that holds one fails the
  call (`clash`); when the tool runs as root, /etc's secrets (shadow, gshadow, SSH host keys,
  /etc/ssl/private), which root could read without any capability, are covered too;
- private PID, IPC, UTS and cgroup namespaces, and a private network namespace (nothing in it but
  a loopback interface) unless `network: host`; the session toolrun starts every call in (no
  terminal to type into); no new privileges (bwrap sets it); no capabilities (`--cap-drop ALL`
  when toolrun is root); `--die-with-parent`: the sandbox dies with the server;
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
import glob
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import SandboxUnavailable
from ..models import Sandbox
from . import seccomp

if TYPE_CHECKING:
    from ..settings import Settings

ENGINE = "bwrap"
DEFAULT = Sandbox(profile="default", network="none")
SYSTEM_READ_ONLY = ("/usr", "/etc")
# On a merged-/usr system these are links into /usr (made as links in the jail); else they are bound.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
DEVICES = ("null", "zero", "full", "random", "urandom")
# What root could read in /etc with no capability at all: hidden when the tool runs as root.
ETC_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssl/private")
ETC_SECRET_GLOBS = ("/etc/ssh/ssh_host_*_key",)
SECCOMP_FD, STATUS_FD = 3, 4  # the descriptors bwrap reads its filter from and writes its status to

_EXTRA_PRIVATE: set[str] = set()  # the dirs and audit log of the settings this process loaded


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


def _probe(path: str) -> str:
    """Run `/bin/true` in the default jail once; '' when it works, else why not (bwrap's own words)."""
    try:
        seccomp.program()
    except ValueError as exc:  # an architecture the filter does not know: no sandbox without it
        return str(exc)
    launch = Launch(path, jail_args(DEFAULT, None, None, ()), ["/bin/true"], renumbered=False)
    try:
        done = subprocess.run(
            launch.argv, pass_fds=launch.fds, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        launch.close()
        return f"bwrap could not start: {exc}"
    launch.started()
    failure = launch.failure(done.returncode, done.stderr.decode(errors="replace"))
    return failure or ("" if done.returncode == 0 else f"the default sandbox exited with {done.returncode}")


# -- the jail: bwrap's arguments for one profile ---------------------------------------------------------


_PRIVATE_ENV = (
    "TOOLRUN_HOME",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "SVC_CONFIG",
    "SVC_AUDIT_LOG",
)


def private_paths(environ: Mapping[str, str] | None = None, settings: Settings | None = None) -> tuple[str, ...]:
    """toolrun's own files and folders, never visible in a sandbox: config, data (key store, state file) and
    cache dirs, the config file, the audit log. `settings` adds its audit log and dirs for good."""
    environ = os.environ if environ is None else environ
    if settings is not None:
        found = [str(p) for p in settings.dirs.values()]
        if settings.audit_log and settings.audit_log != "-":
            found.append(os.path.abspath(settings.audit_log))
        _EXTRA_PRIVATE.update(found)
    return _private(tuple(environ.get(name) for name in _PRIVATE_ENV), frozenset(_EXTRA_PRIVATE))


@functools.lru_cache(maxsize=64)
def _private(values: tuple[str | None, ...], extra: frozenset[str]) -> tuple[str, ...]:
    from ..settings import paths

    environ = {name: value for name, value in zip(_PRIVATE_ENV, values, strict=True) if value is not None}
    found = {str(p) for p in paths(environ).values()} | extra
    found.update(
        os.path.abspath(environ[name]) for name in ("SVC_CONFIG", "SVC_AUDIT_LOG") if environ.get(name, "-") != "-"
    )
    return tuple(sorted(found))


@functools.lru_cache(maxsize=256)
def _real(path: str) -> str:
    return os.path.realpath(path)


def _inside(path: str, roots: Iterable[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _system_args() -> list[str]:
    args: list[str] = []
    for link in SYSTEM_LINKS:
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    for path in SYSTEM_READ_ONLY:
        args += ["--ro-bind", path, path]
    for name in DEVICES:
        args += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd", "--symlink", "/tmp", "/dev/shm", "--proc", "/proc"]
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{fd}", f"/dev/{name}"]
    return args


def _etc_secrets() -> list[str]:
    found = [p for p in ETC_SECRETS if os.path.lexists(p)]
    return found + sorted(p for pattern in ETC_SECRET_GLOBS for p in glob.glob(pattern))


def _masks(bound: list[str], hidden: Iterable[str]) -> list[str]:
    """Arguments covering each hidden path that exists inside a bound one: a read-only empty tmpfs, or /dev/null."""
    args: list[str] = []
    for path in sorted({_real(p) for p in hidden}):
        if not _inside(path, bound) or not os.path.lexists(path):
            continue
        if os.path.isdir(path):
            args += ["--perms", "0000", "--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    return args


def jail_args(box: Sandbox, cwd: str | None, user: str | None, private: tuple[str, ...]) -> tuple[str, ...]:
    """bwrap's options (everything before `--seccomp`) for `box`, a tool's `cwd` and the user it runs as.

    The masks are worked out at each call: a folder of toolrun's that appears later (the key store, made at the
    first `toolrun keys create`) is hidden from the next call on."""
    base, bound, secrets = _jail_base(box, cwd, user)
    return (*base, *_masks(bound, (*private, *secrets)), "--remount-ro", "/", "--chdir", cwd or "/tmp")


@functools.lru_cache(maxsize=1024)
def _jail_base(box: Sandbox, cwd: str | None, user: str | None) -> tuple[tuple[str, ...], list[str], tuple[str, ...]]:
    """The options up to the masks, the real paths bound, and the /etc secrets to hide (when the tool is root)."""
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if box.network != "host":
        args.append("--unshare-net")
    # No --new-session: toolrun starts every call in a session of its own already, with no terminal; a second
    # setsid costs a scheduler autogroup (about 3 ms a call on a busy machine, bench/README.md).
    # --as-pid-1: the shell is the namespace's init (its exit ends every process left), one process less to start.
    args += ["--die-with-parent", "--as-pid-1"]
    root = user is None and os.geteuid() == 0
    if root:
        args += ["--cap-drop", "ALL"]
    args += _system_args()
    if box.tmp_size is not None:
        args += ["--size", str(box.tmp_size)]
    args += ["--tmpfs", "/tmp"]
    binds = [(p, "--ro-bind-try") for p in box.readable] + [(p, "--bind") for p in box.writable]
    if cwd is not None:
        binds.append((cwd, "--ro-bind"))
    binds.sort(key=lambda pair: (pair[0].rstrip("/").count("/"), pair[0]))  # a parent before what is inside it
    for path, flag in binds:
        args += [flag, path, path]
    bound = [os.path.realpath(p) for p in (*SYSTEM_READ_ONLY, *(p for p, _ in binds))]
    resolv = os.path.realpath("/etc/resolv.conf")  # often a link into /run (systemd-resolved): DNS needs it
    if box.network == "host" and not _inside(resolv, bound):
        args += ["--ro-bind-try", resolv, resolv]
    return tuple(args), bound, tuple(_etc_secrets()) if root else ()


@functools.lru_cache(maxsize=1024)
def clash(box: Sandbox, cwd: str | None, private: tuple[str, ...]) -> str | None:
    """Why `box` cannot be set up safely: a writable path that holds (or lies in) toolrun's own files, or any bound
    path inside them. A mask would not do there: the tool could rename a folder above it and plant files where
    toolrun looks for its keys."""
    own = [os.path.realpath(p) for p in private]
    for path in box.writable:
        real = os.path.realpath(path)
        for mine in own:
            if _inside(mine, [real]) or _inside(real, [mine]):
                return f"its writable path {path} holds toolrun's own {mine} (keys, state, logs): give a narrower one"
    for path in (*box.readable, *((cwd,) if cwd else ())):
        real = os.path.realpath(path)
        for mine in own:
            if _inside(real, [mine]):
                return f"its path {path} is inside toolrun's own {mine} (keys, state, logs)"
    return None


class Launch:
    """One sandboxed start: the argv, and the two pipes bwrap reads its filter from and writes its status to.

    `fds` are the child's ends (3 and 4 in a child started by posix_spawn, else their own numbers); call
    `started()` once the child has them, `close()` once it has exited (or never started), then `check()`.
    """

    __slots__ = ("argv", "fds", "said", "status")

    fds: tuple[int, ...]

    def __init__(self, bwrap: str, jail: tuple[str, ...], argv: list[str], renumbered: bool = True) -> None:
        filter_r, filter_w = _pipe()
        try:
            os.write(filter_w, seccomp.program())  # a few hundred bytes: the pipe holds them
            status_r, status_w = _pipe()
        except BaseException:
            os.close(filter_r)
            raise
        finally:
            os.close(filter_w)
        self.fds = (filter_r, status_w)
        self.status = status_r
        self.said = b""
        numbers = (SECCOMP_FD, STATUS_FD) if renumbered else self.fds
        self.argv = [bwrap, *jail, "--seccomp", str(numbers[0]), "--json-status-fd", str(numbers[1]), "--", *argv]

    def started(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = ()

    def close(self) -> None:
        """Keep what bwrap wrote on its status descriptor (its writer has exited), and close everything."""
        self.started()
        if self.status < 0:
            return
        os.set_blocking(self.status, False)
        try:
            while chunk := os.read(self.status, 4096):
                self.said += chunk
        except BlockingIOError:
            pass
        finally:
            os.close(self.status)
            self.status = -1

    def failure(self, returncode: int, stderr: str) -> str | None:
        """Why bwrap could not set the sandbox up (its message), or None when the command ran."""
        self.close()
        if returncode == 0 or any("exit-code" in _json(doc) for doc in self.said.split(b"\n")):
            return None
        said = [line for line in stderr.splitlines() if line.startswith("bwrap:")]
        return said[-1] if said else f"bwrap exited with {returncode} before the command started"

    def check(self, returncode: int, stderr: str) -> None:
        """Raise SandboxUnavailable when the command never ran because the sandbox could not be set up."""
        why = self.failure(returncode, stderr)
        if why is not None:
            raise refusal("", f"bwrap could not set it up here ({why})")


class NoLaunch:
    """What `executor.run` holds for a call without a sandbox: no descriptors, nothing to check."""

    fds: tuple[int, ...] = ()

    def started(self) -> None:
        pass

    def close(self) -> None:
        pass

    def check(self, returncode: int, stderr: str) -> None:
        pass


NO_LAUNCH = NoLaunch()


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are numbered 5 or more: moved onto 3 and 4 in the child, neither may be 3 or 4 here."""
    import fcntl

    ends = os.pipe()
    if min(ends) > 4:
        return ends
    try:
        return fcntl.fcntl(ends[0], fcntl.F_DUPFD_CLOEXEC, 5), fcntl.fcntl(ends[1], fcntl.F_DUPFD_CLOEXEC, 5)
    finally:
        for fd in ends:
            os.close(fd)


def _json(doc: bytes) -> dict[str, Any]:
    try:
        value = json.loads(doc)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def prepare(box: Sandbox, cwd: str | None, user: str | None, argv: list[str], key: str = "") -> Launch:
    """The Launch of `argv` in `box`; SandboxUnavailable when bwrap is missing (or known not to work here)."""
    found = engine()
    if not found.ok or found.path is None:
        raise SandboxUnavailable(_refusal(key, found.problem))
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(2, "No such file or directory", cwd)
    for path in box.writable:
        if not os.path.exists(path):
            raise SandboxUnavailable(_refusal(key, f"its sandbox binds {path}, which does not exist here"))
    try:
        seccomp.program()
    except ValueError as exc:
        raise SandboxUnavailable(_refusal(key, str(exc))) from None
    private = private_paths()
    why = clash(box, cwd, private)
    if why is not None:
        raise SandboxUnavailable(_refusal(key, why))
    from .spawn import uses_posix_spawn

    return Launch(found.path, jail_args(box, cwd, user, private), argv, uses_posix_spawn())


def _refusal(key: str, why: str) -> str:
    who = f"tool {key}" if key else "this tool"
    return f"{who} runs in a sandbox, and {why}; it was not run"


def refusal(key: str, why: str) -> SandboxUnavailable:
    return SandboxUnavailable(_refusal(key, why))


# -- what the doors show ---------------------------------------------------------------------------------


def describe(box: Sandbox, user: str | None = None) -> dict[str, Any]:
    """The profile as the tool entry, --dry-run and describe show it, and whether this host can enforce it."""
    found = engine(probe=True)
    shown: dict[str, Any] = {
        "profile": box.profile,
        "network": box.network or "none",
        "readable": list(box.readable),
        "writable": list(box.writable),
    }
    if box.tmp_size is not None:
        shown["tmp_size"] = box.tmp_size
    shown["enforced"] = found.ok
    if not found.ok:
        shown["reason"] = found.problem
    return shown


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
    """A profile path as bwrap binds it: absolute, from the declaring catalog file's folder, `~` expanded."""
    return str((base / os.path.expanduser(path)).resolve())
