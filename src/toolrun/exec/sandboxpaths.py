"""The paths a sandbox binds: opened at each call without following links, checked by identity, bound by descriptor.

A profile's paths are names the catalog gave at load. Between the load and a call, a tool that may write a folder
can turn another tool's bound path into a symbolic link (to `/`, to toolrun's data folder); bwrap, binding by name,
would follow it. So at each call, and never from a cache:

- each bound path (`readable`, `writable`, the `cwd`) is opened with `openat2(RESOLVE_NO_SYMLINKS)` (or, on a
  kernel without it, a walk of `O_PATH | O_NOFOLLOW` opens, one component at a time): a link anywhere in it fails
  the call;
- the opened object is checked by device and inode, not by name, against toolrun's own files and folders (the
  config, data and cache folders, the config file, the audit log, the catalog and env files): a bound path that is
  one of them, or lies inside one, fails the call; so does a `writable` path that holds one; a `readable` path or
  `cwd` that holds one, and each folder between it and toolrun's file, is shown as a copy without it (`_View`);
- bwrap binds the descriptor (`--ro-bind-fd`, `--bind-fd`). bwrap 0.8 turns that descriptor back into the object's
  current name (realpath of /proc/self/fd/N) and mounts the name, so a name swapped in that window could still be
  mounted instead: the tool's shell, before anything else, compares each bound path with a second descriptor of the
  checked object (`[ /proc/self/fd/N -ef PATH ]`: device and inode), closes those descriptors, and refuses to run
  (exit 125, reported as SandboxUnavailable) when one differs.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shlex
import stat
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from ..errors import SandboxUnavailable

SYS_OPENAT2 = 437  # the same number on every architecture (the generic syscall table)
RESOLVE_NO_SYMLINKS = 0x04
AT_FDCWD = -100
# In the child (posix_spawn renumbers the extra descriptors from 3 on): the check's channel (3: the shell writes
# `ok` there once every bound path checked out, then closes it; a tool cannot write there), the shell's check
# descriptors (4 to 9: dash's redirections take one digit, and the shell closes them before the command), then
# bwrap's filter and status descriptors, then the descriptors bwrap binds.
CHANNEL_FD = 3
FIRST_FD = 4
MAX_BOUND = 6  # bound paths a call may have (readable, writable and the cwd together): check descriptors 4 to 9

Ident = tuple[int, int]
Who = tuple[int, frozenset[int]]  # who a call runs as: user id, group ids
# A folder of catalog or env files, as an earlier call found it (see Own._add_folder): (device, inode, change
# time (ctime), real path, the files asked for) -> (their identities, the folders above them, those not made yet).
_SCANNED: dict[
    tuple[int, int, int, str, tuple[str, ...]],
    tuple[dict[Ident, str], dict[Ident, list[tuple[str, int, bool]]], dict[Ident, str], set[Ident]],
] = {}
# A folder's entries as an earlier call listed them (see _entries): (device, inode, change time) -> (name,
# device, inode, kind) of each, kind "l" (a link: its target), "d" or "f".
_LISTED: dict[tuple[int, int, int], list[tuple[str, Ident, str, str]]] = {}
# Whether a folder's catalog or env files include a link (see _links_out): (device, inode, change time, real path,
# the files asked for) -> the answer.
_LINKS: dict[tuple[int, int, int, str, tuple[str, ...]], bool] = {}
MAX_SHOWN = 32  # entries a call may show of the folders that hold toolrun's files (each is one bind, bench/sandbox.py)


class _OpenHow(ctypes.Structure):
    _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64))


_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.syscall.restype = ctypes.c_long
_HAS_OPENAT2 = [True]  # False once the kernel answered ENOSYS


def open_nofollow(path: str) -> int:
    """An O_PATH descriptor of the absolute, normalized `path`, reached without following any symbolic link.

    OSError: ELOOP when a component is a link, ENOENT when something is missing, EINVAL for a path that is not
    absolute and normalized (or holds a NUL byte)."""
    raw = os.fsencode(path)
    if not path.startswith("/") or os.path.normpath(path) != path or b"\0" in raw:
        raise OSError(errno.EINVAL, "not an absolute, normalized path", path)
    if _HAS_OPENAT2[0]:
        how = _OpenHow(os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS)
        fd = _LIBC.syscall(SYS_OPENAT2, AT_FDCWD, raw, ctypes.byref(how), ctypes.sizeof(how))
        if fd >= 0:
            return int(fd)
        err = ctypes.get_errno()
        if err not in (errno.ENOSYS, errno.EPERM):  # EPERM: a seccomp filter that does not know openat2
            raise OSError(err, os.strerror(err), path)
        _HAS_OPENAT2[0] = False
    return _walk(path)


def _walk(path: str) -> int:
    """`open_nofollow` without openat2: one O_PATH | O_NOFOLLOW open per component, a link refused."""
    fd = os.open("/", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in path.split("/")[1:]:
            if not part:
                continue
            nxt = os.open(part, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
            if stat.S_ISLNK(os.fstat(fd).st_mode):
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        return fd
    except BaseException:
        os.close(fd)
        raise


def _ancestry(fd: int, path: str) -> list[Ident]:
    """Device and inode of every folder above the object of `fd` (which `path` named), nearest first, up to /."""
    found: list[Ident] = []
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        here = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    else:
        here = open_nofollow(os.path.dirname(path))
    try:
        while True:
            st = os.fstat(here)
            ident = (st.st_dev, st.st_ino)
            if found and found[-1] == ident:  # `..` of / is / itself
                return found
            found.append(ident)
            up = os.open("..", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=here)
            os.close(here)
            here = up
    finally:
        os.close(here)


@dataclass
class Own:
    """toolrun's own files and folders at this call: each one's identity, and the folders above each."""

    objects: dict[Ident, str] = field(default_factory=dict)  # identity -> its real path
    above: dict[Ident, list[tuple[str, int, bool]]] = field(default_factory=dict)  # folder -> (path, depth, dir?)
    # A folder -> one of toolrun's own not made yet that would lie inside it (a writable path there could make it),
    # or a catalog folder's next catalog file.
    future: dict[Ident, str] = field(default_factory=dict)
    # Every folder that holds one of them, at any depth: a sandbox shows such a folder as a copy of its other entries.
    holders: set[Ident] = field(default_factory=set)
    catalog_folders: set[Ident] = field(default_factory=set)  # folders the server loads every *.yaml / *.yml of
    linked: bool = False  # one of them is a link: where it leads is not this folder's to say (no cache)

    @classmethod
    def of(
        cls,
        private: Iterable[str],
        files: Iterable[str] = (),
        near: set[Ident] | None = None,
        folders_loaded: Iterable[str] = (),
    ) -> Own:
        """`private` (toolrun's folders and files), and `files` (the catalog and env files: many, files only) where
        they can matter: in a folder that is, or lies inside, one of the `near` identities (the bound paths'; None:
        look at every one)."""
        own = cls()
        for path in folders_loaded:  # catalog folders: no writable path may add a catalog file to one
            if os.path.isdir(path):
                own._add_future(os.path.join(path, "*.yaml"))
                idents = _real_folder(path)[1]  # the folder, and those above it: shown as copies without catalogs
                own.catalog_folders.add(idents[0])
                own.holders.update(idents)
        folders: dict[str, tuple[str, list[Ident]]] = {}  # a folder's name -> its real path and the idents above
        for path in private:
            own._add(path, folders)
        by_folder: dict[str, list[str]] = {}
        for path in files:  # absolute paths (sandbox.hide): the folder is what is before the last slash
            by_folder.setdefault(path.rpartition("/")[0] or "/", []).append(path)
        for folder, paths in by_folder.items():
            if folder not in folders:
                folders[folder] = _real_folder(folder)
            if near is None or near.intersection(folders[folder][1]) or _links_out(folders[folder][0], paths):
                own._add_folder(folder, paths, folders, near)
        return own

    def _add_folder(
        self, folder: str, paths: list[str], folders: dict[str, tuple[str, list[Ident]]], near: set[Ident] | None
    ) -> None:
        """`_add` each of `paths` (all in `folder`), or what an earlier call found there when the folder has not
        changed since (the same device, inode and change time, not changed in the second before that scan: a file
        made, removed or renamed in it changes its time; no cache by name). The change time (ctime), not the
        modification time: the owner sets the latter at will (`touch -d`; `rsync -a`, `cp -a`, `tar x` put a
        folder's time back after renaming new files into it), while setting it changes the former. A folder where
        one of `paths` is a link is scanned at each call: where the link leads can change elsewhere."""
        real_folder = folders[folder][0]
        try:
            st = os.stat(real_folder)
        except OSError:
            st = None
        key = None if st is None else (st.st_dev, st.st_ino, st.st_ctime_ns, real_folder, tuple(paths))
        found = _SCANNED.get(key) if key is not None else None
        if found is None:
            scan = Own()
            for path in paths:
                scan._add(path, folders)  # every folder above: the cache serves any `near`
            found = (scan.objects, scan.above, scan.future, scan.holders)
            # not changed within the last second, and no link: a link's target (a `current` link swapped in another
            # folder, as secrets agents rotate) changes with no change to this folder
            if key is not None and not scan.linked and time.time_ns() - key[2] > 1_000_000_000:
                if len(_SCANNED) >= 64:
                    _SCANNED.pop(next(iter(_SCANNED)))
                _SCANNED[key] = found
        objects, above_found, future, holders = found
        self.objects.update(objects)
        self.holders.update(holders)
        for ident, entries in above_found.items():
            if near is None or ident in near:
                self.above.setdefault(ident, []).extend(entries)
        for ident, name in future.items():
            self.future.setdefault(ident, name)

    def _add(self, path: str, folders: dict[str, tuple[str, list[Ident]]], near: set[Ident] | None = None) -> None:
        """Record `path` (its identity, and under each folder above it: only the `near` ones, when given, which
        are all that a call's checks and covers look up). One lstat for a file that is not a link (a catalog folder
        of 200 files costs a call about 0.3 ms, not 6)."""
        name = os.path.abspath(path)
        try:
            st = os.lstat(name)
            link = stat.S_ISLNK(st.st_mode)
            if link:
                self.linked = True
                st = os.stat(name)
        except OSError:
            self._add_future(path)  # not made yet: nothing to hide, but no writable path may make it
            return
        real = os.path.realpath(name) if link else name
        folder, base = os.path.split(real)
        if folder not in folders:
            folders[folder] = _real_folder(folder)
        real_folder, above = folders[folder]
        real = os.path.join(real_folder, base)
        self.objects[(st.st_dev, st.st_ino)] = real
        is_dir = stat.S_ISDIR(st.st_mode)
        self.holders.update(above)
        for depth, ident in enumerate(above, 1):
            if near is None or ident in near:
                self.above.setdefault(ident, []).append((real, depth, is_dir))

    def _add_future(self, path: str) -> None:
        """Every existing folder above `path`, which is not made yet: a tool that may write one of them could make
        toolrun's folder or file there first (a config file the server then reads, a key store it then trusts)."""
        name = os.path.abspath(path)
        here = os.path.dirname(name)
        while here != "/" and not os.path.isdir(here):
            here = os.path.dirname(here)
        for ident in _real_folder(here)[1]:
            self.future.setdefault(ident, name)


def _links_out(real_folder: str, paths: list[str]) -> bool:
    """Whether one of `paths` (all in `real_folder`) is a symbolic link: it may lead into a bound folder, wherever
    its own folder lies, and where it leads can change with no change to its folder (a `current` link swapped
    elsewhere, as secrets agents rotate). The same answer as an earlier call's while the folder has not changed
    (device, inode, change time: making a path a link changes it)."""
    try:
        st = os.stat(real_folder)
    except OSError:
        return False
    key = (st.st_dev, st.st_ino, st.st_ctime_ns, real_folder, tuple(paths))
    found = _LINKS.get(key)
    if found is None:
        found = any(os.path.islink(path) for path in paths)
        if time.time_ns() - st.st_ctime_ns > 1_000_000_000:  # not changed within the last second
            if len(_LINKS) >= 64:
                with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # calls in other threads too
                    _LINKS.pop(next(iter(_LINKS)))
            _LINKS[key] = found
    return found


def _real_folder(folder: str) -> tuple[str, list[Ident]]:
    """`folder`'s real path, and the identities of it and every folder above it, nearest first."""
    real = os.path.realpath(folder)
    idents: list[Ident] = []
    here = real
    while True:
        try:
            st = os.stat(here)
        except OSError:
            break
        idents.append((st.st_dev, st.st_ino))
        if here == "/":
            break
        here = os.path.dirname(here)
    return real, idents


@dataclass
class Binds:
    """The checked paths of one call: bwrap's (dest, flag, descriptor number) triples, the covers, the descriptors."""

    args: list[tuple[str, str, int]] = field(default_factory=list)  # bound paths the shell checks (verify)
    verify: list[tuple[str, int]] = field(default_factory=list)  # (bound path, the number of its second descriptor)
    paths: list[str] = field(default_factory=list)
    masks: list[tuple[str, bool]] = field(default_factory=list)  # covers of toolrun's files directly in /etc, /usr
    views: list[str] = field(default_factory=list)  # bwrap's options showing folders that hold toolrun's files
    checks: list[int] = field(default_factory=list)  # the shell's descriptors: 4, 5... in the child
    idents: list[Ident] = field(default_factory=list)  # the bound objects' device and inode (a pooled jail's key)
    fds: list[int] = field(default_factory=list)  # bwrap's: after its filter and status descriptors

    @property
    def base(self) -> int:
        """The lowest number a descriptor handed to the child may have here (spawn._actions: no source may be
        the target of an earlier one): above every number the child's get."""
        return FIRST_FD + 2 * len(self.fds) + 2

    def close(self) -> None:
        for fd in (*self.checks, *self.fds):
            os.close(fd)
        self.checks, self.fds = [], []


_FLAGS = {"readable": "--ro-bind-fd", "writable": "--bind-fd", "cwd": "--ro-bind-fd"}


@dataclass
class _Opened:
    path: str
    kind: str
    fd: int
    ident: Ident
    ancestry: list[Ident]
    is_file: bool = False


def open_binds(
    readable: Iterable[str],
    writable: Iterable[str],
    cwd: str | None,
    private: Iterable[str],
    renumbered: bool,
    files: Iterable[str] = (),
    catalogs: Iterable[str] = (),
    system: Iterable[str] = (),
    who: Who | None = None,
) -> Binds:
    """Open and check every path `box` binds (see the module's doc) against toolrun's `private` folders and files and
    the catalog and env `files` (and the catalog folders loaded, `catalogs`: no writable path may be or hold one);
    SandboxUnavailable (the reason, to go after "runs in a sandbox, and") when one
    cannot be bound safely, FileNotFoundError for a missing `cwd`. `system`: the host folders every sandbox shows
    whole (/usr, /etc): the folders inside them that hold toolrun's files are shown as copies (`_View`). `who`:
    the user id and group ids the call runs as (a copy grants them what the host folder grants them; None: the
    host folder's mode as it is)."""
    wanted = [(p, "readable") for p in readable] + [(p, "writable") for p in writable]
    if cwd is not None:
        wanted.append((cwd, "cwd"))
    opened: list[_Opened] = []
    roots: list[_Opened] = []
    try:
        for path, kind in wanted:
            item = _open_one(path, kind)
            if item is not None:
                opened.append(item)
        for path in system:
            item = _open_one(path, "system")
            if item is not None:
                roots.append(item)
        # A catalog or env file matters where it lies under a bound folder, or is a bound file itself.
        near = None if any(i.is_file for i in opened) else {i.ident for i in (*opened, *roots)}
        own = Own.of(private, files, near, catalogs)
        for item in opened:
            _check(item.path, item.kind, item.ident, item.ancestry, own)
        return _binds(opened, own, renumbered, roots, who)
    except BaseException:
        for item in opened:
            if item.fd >= 0:
                os.close(item.fd)
        raise
    finally:
        for item in roots:
            os.close(item.fd)


def _open_one(path: str, kind: str) -> _Opened | None:
    try:
        fd = open_nofollow(path)
    except OSError as exc:
        if exc.errno == errno.ENOENT and kind in ("readable", "system"):
            return None  # a readable path missing here is left out, as ever
        if exc.errno == errno.ENOENT and kind == "cwd":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path) from None
        raise SandboxUnavailable(_why_not_opened(path, kind, exc)) from None
    try:
        st = os.fstat(fd)
        ident = (st.st_dev, st.st_ino)
        ancestry = _ancestry(fd, path) if kind != "system" else []
    except BaseException:
        os.close(fd)
        raise
    return _Opened(path, kind, fd, ident, ancestry, not stat.S_ISDIR(st.st_mode))


def _why_not_opened(path: str, kind: str, exc: OSError) -> str:
    name = "its working directory" if kind == "cwd" else f"its {kind} path"
    if exc.errno == errno.ENOENT:
        return f"its sandbox binds {path}, which does not exist here"
    if exc.errno == errno.ELOOP:
        return (
            f"{name} {path!r} is, or passes through, a symbolic link now: a sandbox binds no link (what a link "
            "points to can change between the check and the bind); give the real path in the catalog"
        )
    if exc.errno == errno.EINVAL:
        return f"{name} {path!r} is not an absolute, normalized path"
    return f"{name} {path} cannot be opened here ({exc.strerror})"


def _check(path: str, kind: str, ident: Ident, ancestry: list[Ident], own: Own) -> None:
    name = "its working directory" if kind == "cwd" else f"its {kind} path"
    mine = own.objects.get(ident)
    if mine is None:
        mine = next((own.objects[a] for a in ancestry if a in own.objects), None)
    if mine is not None:
        raise SandboxUnavailable(f"{name} {path} is, or is inside, toolrun's own {mine} (keys, state, logs, catalog)")
    if kind == "writable" and ident in own.above:
        held = own.above[ident][0][0]
        raise SandboxUnavailable(
            f"its writable path {path} holds toolrun's own {held} (keys, state, logs, catalog): give a narrower one"
        )
    if kind == "writable" and ident in own.future:
        raise SandboxUnavailable(
            f"its writable path {path} would hold toolrun's own {own.future[ident]}, not made yet (config, keys, "
            "state, logs, catalog): a tool there could make it first; give a narrower one"
        )


def _binds(opened: list[_Opened], own: Own, renumbered: bool, roots: list[_Opened], who: Who | None = None) -> Binds:
    """bwrap's binds of the `opened` paths (a parent before what lies inside it); a `readable` path or the cwd that
    holds toolrun's files, and a folder of a system `roots` one that does, is shown as a copy (`_view`). The cwd is
    bound only when no other bound path shows it already (a writable cwd stays writable)."""
    shown = {item.ident for item in opened if item.kind != "cwd"}
    kept = [i for i in opened if i.kind != "cwd" or (i.ident not in shown and not shown.intersection(i.ancestry))]
    for item in opened:
        if item not in kept:
            os.close(item.fd)
            item.fd = -1
    kept.sort(key=lambda i: (i.path.rstrip("/").count("/"), i.path))
    if len(kept) > MAX_BOUND:
        raise SandboxUnavailable(
            f"its sandbox binds {len(kept)} paths (readable, writable and the cwd together): at most {MAX_BOUND}; "
            "bind a common parent folder instead"
        )
    if kept and not renumbered:
        raise SandboxUnavailable(
            "this host's C library has no posix_spawn with closefrom, which a sandbox with bound paths needs"
        )
    copied = [i for i in kept if i.kind != "writable" and not i.is_file and i.ident in own.holders]
    plain = [i for i in kept if i not in copied]
    view = _View(own, FIRST_FD + 2 * len(plain) + 2, who)
    try:
        for root in roots:
            view.system(root)
        for item in copied:
            view.copy(item.fd, item.path, None)
            view.idents.append(item.ident)
            view.paths.append(item.path)
    except BaseException:
        view.close()
        raise
    finally:
        for item in copied:
            os.close(item.fd)
            item.fd = -1
    binds = Binds(masks=view.masks, views=view.args, paths=view.paths)
    found = [item.fd for item in plain] + view.fds
    try:
        base = FIRST_FD + 2 * len(found) + 2
        for index, item in enumerate(plain):
            binds.checks.append(fcntl.fcntl(item.fd, fcntl.F_DUPFD_CLOEXEC, base))
            binds.args.append((item.path, _FLAGS[item.kind], FIRST_FD + len(plain) + 2 + index))
            binds.verify.append((item.path, FIRST_FD + index))
            binds.paths.append(item.path)
            binds.idents.append(item.ident)
        for fd in found:
            binds.fds.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, base))
    except BaseException:
        binds.close()
        raise
    finally:
        for fd in found:
            os.close(fd)
        for item in plain:
            item.fd = -1
    binds.idents += view.idents
    return binds


class _View:
    """bwrap's options showing folders that hold toolrun's files as copies: a folder of the jail's own (an empty
    tmpfs), in which each entry but toolrun's (its catalog and env files, its folders) is bound by descriptor (a
    link is made anew, pointing where the host's does), and each entry holding one of toolrun's files is such a copy
    in turn. Nothing in a copy is a host folder's entry: an operator who renames a new catalog file over the old one
    (an editor's save, `sed -i`) changes no name the jail shows, so the call sees neither the old file nor the new.
    `first`: the number bwrap's first entry descriptor has in the child."""

    def __init__(self, own: Own, first: int, who: Who | None = None) -> None:
        self.own, self.first, self.who = own, first, who
        # toolrun's files by name too (`dest` is a real path: bound paths hold no link): a file renamed over one of
        # them between Own's look and the listing is another inode under its name
        self.names = {*own.objects.values(), *own.future.values()}
        self.args: list[str] = []
        self.fds: list[int] = []
        self.idents: list[Ident] = []
        self.paths: list[str] = []
        self.masks: list[tuple[str, bool]] = []
        self.left = MAX_SHOWN

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def system(self, root: _Opened) -> None:
        """The folders of `root` (/etc, /usr: shown whole, at their own names) that hold toolrun's files, as copies
        (their entries bound by name: only root may change a system folder); toolrun's files directly in `root`
        are covered (a mount over the name)."""
        if root.ident not in self.own.holders:
            return
        done: set[str] = set()
        for real, depth, is_dir in self.own.above.get(root.ident, ()):
            name = real.split("/")[-depth]
            if depth == 1:
                self.masks.append((real, is_dir))
            elif name not in done:
                done.add(name)
                try:
                    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=root.fd)
                except OSError as exc:
                    raise SandboxUnavailable(
                        f"{root.path}/{name} holds toolrun's own {real} and cannot be opened here ({exc.strerror})"
                    ) from None
                try:
                    self.copy(fd, f"{root.path}/{name}", f"{root.path}/{name}")
                finally:
                    os.close(fd)

    def copy(self, fd: int, dest: str, source: str | None) -> None:
        """Show the folder of `fd` at `dest` as a copy; `source`: its name, to bind its entries by (None: by
        descriptor)."""
        st = os.fstat(fd)
        catalog_folder = (st.st_dev, st.st_ino) in self.own.catalog_folders
        mode = stat.S_IMODE(st.st_mode) & 0o777 if self.who is None else _granted(st, self.who, fd)
        self.args += ["--perms", f"{mode:04o}", "--tmpfs", dest]
        if self.who is not None and not mode & 0o100:  # the call's user may not enter the host folder: nor the copy
            self.args += ["--remount-ro", dest]
            return
        try:
            listed = _entries(fd, st)
        except OSError as exc:
            raise SandboxUnavailable(
                f"{dest} holds toolrun's own files (catalog, env files), and a sandbox shows such a folder as a copy "
                f"of its other entries, but it cannot be listed here ({exc.strerror})"
            ) from None
        for name, ident, kind, target in listed:
            where = f"{dest.rstrip('/')}/{name}"
            if (
                ident in self.own.objects
                or where in self.names
                or (catalog_folder and name.endswith((".yaml", ".yml")))
            ):
                continue  # toolrun's own (by identity, or by name: renamed into place since Own looked), or a catalog
                # file the next load reads
            self.left -= 1  # links too: not mounts, but each is bwrap's arguments (its target up to 4 KiB)
            if self.left < 0:
                raise SandboxUnavailable(
                    f"{dest} holds toolrun's own files (catalog, env files) beside more than {MAX_SHOWN} other "
                    "entries, and a sandbox shows such a folder as a copy of at most that many: keep catalog and env "
                    "files in a folder of their own"
                )
            if kind == "l":
                self.args += ["--symlink", target, where]
                continue
            if kind == "d" and ident in self.own.holders:
                sub = _open_entry(fd, name, ident, dest)
                try:
                    self.copy(sub, where, None if source is None else f"{source}/{name}")
                finally:
                    os.close(sub)
            elif source is not None:
                self.args += ["--ro-bind", f"{source}/{name}", where]
                self.idents.append(ident)
            else:
                self.fds.append(_open_entry(fd, name, ident, dest))
                self.args += ["--ro-bind-fd", str(self.first + len(self.fds) - 1), where]
                self.idents.append(ident)
        self.args += ["--remount-ro", dest]


def _granted(st: os.stat_result, who: Who, fd: int | None = None) -> int:
    """The mode of a copy of the folder of `st` for a call running as `who` (user id, group ids): the jail's tmpfs
    belongs to the call's user, so each class gets the bits the host folder grants that user (its owner's, its
    group's or others', or what its access ACL grants: `fd`, the folder's descriptor), and no more: a folder of
    root's with mode 0711 is not listed, one with mode 0700 not entered, one whose ACL gives the user `--x` not
    listed."""
    uid, gids = who
    acl = _acl(fd) if fd is not None else None
    if acl is not None:
        return _acl_bits(acl, st, uid, gids) * 0o111
    if uid == st.st_uid:
        bits = (st.st_mode >> 6) & 7
    elif st.st_gid in gids:
        bits = (st.st_mode >> 3) & 7
    else:
        bits = st.st_mode & 7
    return bits * 0o111


_ACL_USER_OBJ, _ACL_USER, _ACL_GROUP_OBJ, _ACL_GROUP, _ACL_MASK, _ACL_OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20


def _acl(fd: int) -> list[tuple[int, int, int]] | None:
    """The folder's POSIX access ACL as (tag, permissions, id) entries; None when it has none (or the file system
    keeps none). One it cannot read or parse is refused: a copy never guesses what the host grants."""
    try:
        raw = os.getxattr(f"/proc/self/fd/{fd}", "system.posix_acl_access")
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            return None
        raise SandboxUnavailable(
            f"the access ACL of a folder to show as a copy cannot be read ({exc.strerror})"
        ) from None
    if len(raw) < 4 or (len(raw) - 4) % 8 or struct.unpack_from("<I", raw)[0] != 2:
        raise SandboxUnavailable("the access ACL of a folder to show as a copy is not one this host writes")
    return [struct.unpack_from("<HHI", raw, at) for at in range(4, len(raw), 8)]


def _acl_bits(acl: list[tuple[int, int, int]], st: os.stat_result, uid: int, gids: frozenset[int]) -> int:
    """What `acl` grants the user `uid` with the groups `gids`, as the kernel checks it (posix_acl_permission): the
    owner's entry, else a named user's, else the group entries that match (none of them granting is nothing),
    else others'; a named user's and the group entries within the mask."""
    mask = next((perm for tag, perm, _ in acl if tag == _ACL_MASK), 7)
    if uid == st.st_uid:
        return next((perm for tag, perm, _ in acl if tag == _ACL_USER_OBJ), 0) & 7
    named = [perm for tag, perm, ident in acl if tag == _ACL_USER and ident == uid]
    if named:
        return named[0] & mask & 7
    groups = [
        perm
        for tag, perm, ident in acl
        if (tag == _ACL_GROUP_OBJ and st.st_gid in gids) or (tag == _ACL_GROUP and ident in gids)
    ]
    if groups:
        bits = 0
        for perm in groups:
            bits |= perm
        return bits & mask & 7
    return next((perm for tag, perm, _ in acl if tag == _ACL_OTHER), 0) & 7


def _open_entry(folder: int, name: str, ident: Ident, dest: str) -> int:
    """An O_PATH descriptor of `name` in `folder`, which must still be the object listed (`ident`)."""
    try:
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except OSError as exc:
        raise SandboxUnavailable(f"{dest}/{name} changed while the sandbox was set up ({exc.strerror})") from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != ident:
        os.close(fd)
        raise SandboxUnavailable(f"{dest}/{name} changed while the sandbox was set up")
    return fd


def _entries(fd: int, st: os.stat_result) -> list[tuple[str, Ident, str, str]]:
    """(name, identity, kind: "l" a link, "d" a folder, "f" anything else; a link's target) of each entry of the
    folder of `fd`, sorted; the same as an earlier call found when the folder has not changed since (its device,
    inode and change time, not changed in the second before that listing: see Own._add_folder, why not the
    modification time)."""
    key = (st.st_dev, st.st_ino, st.st_ctime_ns)
    found = _LISTED.get(key)
    if found is not None:
        return found
    listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
    found = []
    try:
        with os.scandir(listing) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                ident = (info.st_dev, info.st_ino)
                if stat.S_ISLNK(info.st_mode):
                    found.append((entry.name, ident, "l", os.readlink(entry.name, dir_fd=listing)))
                else:
                    found.append((entry.name, ident, "d" if stat.S_ISDIR(info.st_mode) else "f", ""))
    finally:
        os.close(listing)
    found.sort()
    if time.time_ns() - st.st_ctime_ns > 1_000_000_000:  # not changed within the last second
        if len(_LISTED) >= 64:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # calls in other threads list too
                _LISTED.pop(next(iter(_LISTED)))
        _LISTED[key] = found
    return found


def checked(binds: Binds, said: str = "ok", keep: bool = False) -> str:
    """The shell's first words in a sandbox: check that each bound path is the object that was checked (see the
    module's doc), then say `said` on the check's own channel (CHANNEL_FD) and close it (unless `keep`: a jail
    prepared ahead says `ok` there later) and the check descriptors. The server believes the command started only
    when the channel said `ok`: a tool cannot write there (it is closed before the tool's command runs), so a tool
    that prints MOVED and exits 125 is still a tool that ran."""
    tests = " && ".join(f"[ /proc/self/fd/{n} -ef {shlex.quote(path)} ]" for path, n in binds.verify)
    check = f"if ! {{ {tests}; }}; then echo '{MOVED}' >&2; exit 125; fi; " if tests else ""
    closes = " ".join([*([] if keep else [f"{CHANNEL_FD}>&-"]), *(f"{n}<&-" for _, n in binds.verify)])
    return f"{check}echo {said} >&{CHANNEL_FD}; " + (f"exec {closes}; " if closes else "")


def verified(command: str, binds: Binds) -> str:
    """`command` after `checked` (the channel says `ok` just before the command runs), on a line of its own: the
    shell parses a whole line before it runs any of it, so a command that does not parse, on the check's line,
    would keep the check from saying `ok` and pass the tool's own failure off as a sandbox that never started."""
    return f"{checked(binds)}\n{command}"


MOVED = "toolrun: a bound path changed while the sandbox was set up"
