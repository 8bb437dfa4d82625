"""Running toolrun as another user: the server as root, and as an unprivileged user made for the tests.

`unprivileged()` is (uid, gid) of a user that is not root: ours when the tests run unprivileged, else the
`toolrun-test` system user (created when missing; never a login). `as_user(uid, gid)` is the argv prefix that
runs a command as that user (`setpriv`, groups cleared). `shared_dir()` is a folder that user can read
(pytest's tmp dirs are root-only), `UserServer` a `toolrun serve` as that user in it. `SERVER_USERS`
parametrizes a test over the two kinds of server (`server_user(kind)`); the root kind is a skip when the
tests run unprivileged, and a failure under CI=true.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .binaries import require_binary
from .servers import ToolrunServer

SERVER_USERS = ("root", "unprivileged")


def unprivileged() -> tuple[int, int]:
    """(uid, gid) of a user that is not root: ours, or `toolrun-test` (created when missing)."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        entry = pwd.getpwnam("toolrun-test")
    except KeyError:
        useradd = require_binary("useradd")
        subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "toolrun-test"],
            check=False,
            capture_output=True,
        )
        entry = pwd.getpwnam("toolrun-test")  # made here, or by a test running beside this one
    return entry.pw_uid, entry.pw_gid


def server_user(kind: str) -> tuple[int, int] | None:
    """The (uid, gid) to run the server as for `kind` ("root": None, run as we are, which must be root)."""
    if kind == "root":
        if os.geteuid() != 0:
            message = "the root server case needs the tests to run as root"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
        return None
    return unprivileged()


def as_user(user: tuple[int, int] | None) -> list[str]:
    """The argv prefix running a command as `user` (nothing for None)."""
    if user is None or user == (os.geteuid(), os.getegid()):
        return []
    setpriv = require_binary("setpriv")
    return [setpriv, f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", "--"]


@contextlib.contextmanager
def shared_dir(user: tuple[int, int] | None, prefix: str = "toolrun-user-") -> Iterator[Path]:
    """A fresh folder under /tmp that `user` can read, with a `home` inside it that `user` owns."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        base.chmod(0o755)
        home = base / "home"
        home.mkdir()
        if user is not None:
            os.chown(home, *user)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


class UserServer(ToolrunServer):
    """`toolrun serve` as `user` (None: as we are), its work dir and TOOLRUN_HOME in a `shared_dir` `base`."""

    def __init__(
        self, base: Path, catalog: Path, user: tuple[int, int] | None, settings: dict[str, str] | None = None
    ) -> None:
        super().__init__(base / "server", catalog, settings, home=base / "home")
        (base / "server").chmod(0o777)  # the test writes its log there, the server's user runs there
        self.user = user

    def launch(self) -> ToolrunServer:
        argv = [*as_user(self.user), sys.executable, "-m", "toolrun", "serve", "-c", str(self.catalog)]
        self.spawn([*argv, "--host", "127.0.0.1", "--port", str(self.port)], self.env)
        return self
