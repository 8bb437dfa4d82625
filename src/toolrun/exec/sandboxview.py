"""What a user is told about a sandbox, beside what sandbox.py enforces.

- `withheld(box, cwd)`: what a profile keeps from its tool, in words (the network, the files outside what
  it binds, writing outside /tmp and its writable paths, the host's processes, toolrun's own files);
- `note(key, box, cwd)`: the line a failed sandboxed call carries, so that "No such file", "Read-only file
  system" or "Couldn't connect" reads as the sandbox's doing: on the CLI's stderr, in the `Toolrun-Sandbox`
  response header of POST /tools/{key} (`header_value`), and in the UI's result;
- `profile_problems(tools)`: the tools whose profile cannot work on this host whatever the call (a `writable`
  path that does not exist, a path that holds toolrun's own files), which `serve` logs at start and /readyz
  reports; their calls fail with SandboxUnavailable (HTTP 503, a short message; the log has the paths).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from ..errors import SandboxUnavailable
from ..models import Sandbox
from . import sandbox
from .sandboxpaths import open_binds

HEADER = b"toolrun-sandbox"


def withheld(box: Sandbox, cwd: str | None = None) -> str:
    """What `box` withholds from its tool, as one phrase list."""
    parts = []
    if box.network != "host":
        parts.append("the network (no connection leaves the sandbox)")
    seen = [*sandbox.SYSTEM_READ_ONLY, *(["its cwd"] if cwd else []), *box.readable, *box.writable]
    parts.append(f"every file outside {', '.join(seen)} and a private /tmp")
    parts.append("writing outside /tmp" + (f" and {', '.join(box.writable)}" if box.writable else ""))
    parts.append("the host's processes")
    parts.append("toolrun's own files")
    return "; ".join(parts)


def note(key: str, box: Sandbox, cwd: str | None = None) -> str:
    """The line a failed sandboxed call carries."""
    return f"note: {key} ran in sandbox profile {box.profile!r}, which withholds {withheld(box, cwd)}"


def header_value(box: Sandbox, cwd: str | None = None) -> bytes:
    """The `Toolrun-Sandbox` header of a failed sandboxed call: `profile=<name>; withholds=<words>`, each
    percent-encoded where it is not printable ASCII (a path may be anything)."""
    safe = " ,;:/()'.-_"
    return f"profile={quote(box.profile, safe=safe)}; withholds={quote(withheld(box, cwd), safe=safe)}".encode()


def profile_problems(tools: Iterable[Any]) -> list[str]:
    """`<tool key>: <why>` for each sandboxed tool whose paths cannot be bound here, whatever the call (one that does
    not exist, holds toolrun's own files or a catalog file, ...): each opened and checked as a call would
    (sandboxpaths.open_binds), then closed. A missing `cwd` is no sandbox problem: the call says so itself."""
    private = sandbox.private_paths()
    seen: dict[tuple[Any, ...], str | None] = {}
    found = []
    for tool in tools:
        box = getattr(tool, "sandbox", None)
        if box is None:
            continue
        paths = (box.readable, box.writable, tool.cwd)
        if paths not in seen:
            seen[paths] = _why_unbound(box, tool.cwd, private)
        why = seen[paths]
        if why is not None:
            found.append(f"{tool.key}: {why}")
    return found


def _why_unbound(box: Sandbox, cwd: str | None, private: tuple[str, ...]) -> str | None:
    for path in (*box.readable, *box.writable):
        refused = sandbox.refused_path(path)
        if refused is not None:
            return f"its sandbox may not bind {refused}"
    from .spawn import uses_posix_spawn

    try:
        binds = open_binds(box.readable, box.writable, cwd, private, uses_posix_spawn(), sandbox.HIDDEN_FILES)
    except SandboxUnavailable as exc:
        return str(exc)
    except OSError:
        return None
    binds.close()
    return None
