"""What is left of a tool's processes, read from /proc: a test proves that nothing a tool started
survives (put a unique marker in the tool's command line: see support.catalogs.unique_sleep)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from .servers import wait_until


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def pids_matching(marker: str, program: str | None = None) -> list[int]:
    """Live (non-zombie) processes whose command line contains `marker`; with `program`, only those whose
    argv[0] is it (`sleep`, not the `/bin/sh -c 'sleep 2'` above it when the `direct_exec` trick is off)."""
    found = []
    needle = marker.encode()
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        argv = _read(f"/proc/{entry}/cmdline")
        if needle in argv.replace(b"\0", b" ") and (program is None or argv.split(b"\0")[0] == program.encode()):
            found.append(int(entry))
    return found


def pids_with_env(name: str, value: str) -> list[int]:
    """Live processes whose environment holds `name=value`: every descendant of a tool whose
    catalog sets it (zombies have no environment left: see `zombies`)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and needle in _read(f"/proc/{entry}/environ").split(b"\0"):
            found.append(int(entry))
    return found


def proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a process, or None when it no longer exists."""
    raw = _read(f"/proc/{pid}/stat")
    if not raw:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[1])


def zombies(among: Iterator[int] | list[int] | set[int] | None = None) -> list[tuple[int, int]]:
    """(pid, parent pid) of zombies, among `among` or the whole system."""
    pids = among if among is not None else [int(e) for e in os.listdir("/proc") if e.isdigit()]
    result = []
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None and stat[0] == "Z":
            result.append((pid, stat[1]))
    return result


def status_kib(pid: int, field: str) -> int:
    for line in _read(f"/proc/{pid}/status").decode().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise LookupError(f"{field} of pid {pid}")


def gone(pids: list[int] | set[int], timeout: float) -> list[tuple[int, str, int]]:
    """Wait up to `timeout` for `pids` to vanish (zombies reparented to init are reaped by it);
    return what is left as (pid, state, parent pid)."""

    def left() -> list[tuple[int, str, int]]:
        return [(p, s[0], s[1]) for p in pids if (s := proc_stat(p)) is not None]

    with contextlib.suppress(TimeoutError):
        wait_until(lambda: not left(), timeout, "processes to exit", interval=0.05)
    return left()
