"""Sandbox tests: folders the sandbox's user can reach, and running toolrun as a server user that is not root.

A root server's sandboxed tools run as `nobody` (docs/security.md), so what they bind must be reachable by it:
pytest's own folders are 0700 (and pytest sets them back to 0700 at each session start), hence folders of our own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from support.binaries import require_binary
from support.sysusers import unprivileged

NOBODY = (65534, 65534)


def open_folder() -> Iterator[Path]:
    """A fresh folder under /tmp that every user may enter (a fixture body: yields it, removes it after)."""
    base = Path(tempfile.mkdtemp(prefix="toolrun-jail-", dir="/tmp"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def jail_writable(path: Path, owner: tuple[int, int] | None = None) -> Path:
    """`path` as a folder the tool's user may write: `nobody`'s under a root server, else the server user's."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, *(owner or NOBODY))
    return path


def toolrun_as(
    server: str, home: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`toolrun ARGS` as the server user `server` ("root": this process's user, which must be root; "user": a user
    that is not root, through setpriv), with its own TOOLRUN_HOME."""
    from support.servers import clean_env

    argv = [sys.executable, "-m", "toolrun", *args]
    environ = clean_env(home) | {"HOME": str(home)} | (env or {})
    if server == "user" and os.geteuid() == 0:
        uid, gid = unprivileged()
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, uid, gid)
        setpriv = require_binary("setpriv")
        argv = [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60, check=False)


def need_root() -> None:
    """Skip a test that needs a root server where this is not root; under CI=true that is a failure."""
    import pytest

    if os.geteuid() != 0:
        message = "this test runs the server as root: run the suite as root"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
