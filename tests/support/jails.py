"""Sandbox tests: folders the sandbox's user can reach, and running toolrun as a server user that is not root.

A root server's sandboxed tools run as `nobody` (docs/security.md), so what they bind must be reachable by it:
pytest's own folders are 0700 (and pytest sets them back to 0700 at each session start), hence folders of our own.

The sandbox tests' fixtures are here too: `server` (the server user, "root" and "user"), `base` (an `open_folder`)
and `jail` (a `Jail` of both); a test module takes them with `server, base, jail = jails.server, jails.base,
jails.jail`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.sysusers import as_user, unprivileged

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
        user = unprivileged()
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, *user)
        argv = [*as_user(user), *argv]
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=60, check=False)


def need_root() -> None:
    """Skip a test that needs a root server where this is not root; under CI=true that is a failure."""
    if os.geteuid() != 0:
        message = "this test runs the server as root: run the suite as root"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(params=["root", "user"])
def server(request: pytest.FixtureRequest) -> str:
    require_binary("bwrap")
    if request.param == "root":
        need_root()
    return str(request.param)


@pytest.fixture
def base() -> Iterator[Path]:
    yield from open_folder()


class Jail:
    """A test's folder, catalog and server user: `call` runs `toolrun call` as that server."""

    def __init__(self, base: Path, server: str) -> None:
        self.base, self.server = base, server
        self.home = base / "home"
        self.catalog = base / "cat" / "tools.yaml"

    @property
    def tool_user(self) -> tuple[int, int]:
        """Who the sandboxed tools run as: nobody under a root server, the server's user else."""
        if self.server == "root":
            return NOBODY
        return unprivileged()

    def writable(self, name: str) -> Path:
        return jail_writable(self.base / name, self.tool_user)

    def write(self, text: str) -> Path:
        (self.base / "cat").mkdir(exist_ok=True)
        write_catalog(self.base / "cat", text)
        return self.catalog

    def call(self, key: str, *args: str) -> subprocess.CompletedProcess[str]:
        return toolrun_as(self.server, self.home, "call", "-c", str(self.catalog), key, *args)

    def validate(self) -> subprocess.CompletedProcess[str]:
        return toolrun_as(self.server, self.home, "validate-catalog", str(self.catalog))


@pytest.fixture
def jail(base: Path, server: str) -> Jail:
    return Jail(base, server)


def said(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr
