"""File modes of the SQLite engine: the data folder and its state files are private to the user toolrun runs as.

`toolrun.db` (users, groups, key prefixes and hashes) and `state.db` (MCP session ids and their
owners, the values fn tools keep per session, rate-limit windows, jobs) live in the data folder. The folder
is made 0700 and each state file 0600 before SQLite opens it (SQLite gives its `-wal` and `-shm`
files the mode of the database file), whatever the umask.

A folder or file left wider by an earlier version (or by hand) is narrowed the first time a process
opens the folder, with one warning line naming what changed: group and other permission bits are
cleared, nothing else. Only entries owned by this process's user are touched, and symlinks are
never followed.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

log = logging.getLogger("toolrun.state")

_SWEPT: set[Path] = set()


def private_file(path: Path) -> Path:
    """`path` made ready for SQLite: its folder private (see `private_dir`), the file created 0600 if missing."""
    private_dir(path.parent)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        pass  # narrowed by the sweep of its folder (when it was wider)
    else:
        os.close(fd)
    return path


def private_dir(directory: Path) -> None:
    """Create `directory` (0700) if missing; the first time in this process, narrow it and its files."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = directory.absolute()
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    narrowed = [f"{name} {old:04o} -> {new:04o}" for name, old, new in narrow(directory)]
    if narrowed:
        log.warning(
            "state files were readable by other local users; narrowed in %s: %s", directory, ", ".join(narrowed)
        )


def narrow(directory: Path) -> list[tuple[str, int, int]]:
    """Clear the group and other bits of `directory` and of what it holds (one level): (name, old, new) each."""
    changed: list[tuple[str, int, int]] = []
    entries = [(directory, f"{directory.name}/")]
    try:
        entries += [(directory / name, name) for name in sorted(os.listdir(directory))]
    except OSError:
        pass
    uid = os.geteuid()
    for path, name in entries:
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(info.st_mode) or info.st_uid != uid:
            continue
        old = stat.S_IMODE(info.st_mode)
        new = old & ~0o077
        if old != new:
            try:
                os.chmod(path, new)
            except OSError as exc:
                log.warning("could not narrow the mode of %s: %s", path, exc.strerror or exc)
                continue
            changed.append((name, old, new))
    return changed
