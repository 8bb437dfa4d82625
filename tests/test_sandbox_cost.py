"""What a jail costs, cut without a wall given up (issue 34's cost goal, bench/README.md): with a real bwrap, once
with the server as root and once as a user that is not root.

- A root server drops a call to `nobody` with `unshare --setgid --setuid` (no longer setpriv): no group of root's
  is left to it, whether the call takes a jail prepared ahead or starts its own.
- A root server's jails bind one folder it made as their /dev (no longer five device nodes one by one): the jail
  still sees exactly null, zero, full, random, urandom and the fd links, can use them and can change nothing there;
  a folder that is not exactly what toolrun made is never bound.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import jails
from support.binaries import require_binary
from support.jails import Jail, need_root, said
from support.servers import wait_until
from support.speedups import hold
from toolrun.exec import executor, sandbox, sandboxpool
from toolrun.models import Sandbox

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter), `jail`.
server, base, jail = jails.server, jails.base, jails.jail

DEV = "fd full null random shm stderr stdin stdout urandom zero"
# What a tool does with its /dev: lists it, uses each node, then tries to change it.
DEV_COMMAND = (
    "ls /dev | tr '\\n' ' '; echo; echo x > /dev/null && echo null-ok; head -c 3 /dev/zero | od -An -tx1; "
    "head -c 8 /dev/urandom | wc -c; head -c 8 /dev/random | wc -c; echo x > /dev/full || echo full-refused; "
    "echo to-stdout > /dev/stdout; "
    "touch /dev/new 2>/dev/null || echo create-refused; rm -f /dev/null 2>/dev/null || echo remove-refused; "
    "chmod 600 /dev/zero 2>/dev/null || echo chmod-refused; ln -s /etc /dev/x 2>/dev/null || echo link-refused"
)


def _check_dev(out: str) -> None:
    lines = out.split("\n")
    assert lines[0].split() == DEV.split(), out
    for words in ("null-ok", "00 00 00", "full-refused", "to-stdout", "create-refused", "remove-refused"):
        assert words in out, (words, out)
    assert "chmod-refused" in out and "link-refused" in out, out
    assert lines[3:5] == ["8", "8"], out  # urandom and random give bytes


def test_a_jails_dev_holds_the_five_devices_and_nothing_it_can_change(jail: Jail) -> None:
    jail.write(f"group: t\ntools:\n  - name: dev\n    exec: {DEV_COMMAND!r}\n    sandbox: true\n")
    done = jail.call("t.dev")
    assert done.returncode == 0, said(done)
    _check_dev(done.stdout)


def test_a_root_servers_sandboxed_tool_holds_no_group_of_roots(jail: Jail) -> None:
    """A file only root's group may read stays closed: the drop to `nobody` cleared root's groups."""
    folder = jail.base / "grp"
    folder.mkdir()
    os.chmod(folder, 0o755)
    secret = folder / "secret"
    secret.write_text("group zero only\n")
    os.chown(secret, 0, 0)
    os.chmod(secret, 0o040)
    jail.write(
        f"group: t\ntools:\n  - name: grp\n    exec: cat {secret} || echo DENIED; id -G\n"
        f"    sandbox: {{readable: [{folder}]}}\n"
    )
    done = jail.call("t.grp")
    assert "group zero only" not in said(done) and "DENIED" in said(done), said(done)


def _run(command: str, box: Sandbox) -> tuple[int, str, str]:
    async def go() -> tuple[int, str, str]:
        done = await executor.run(command, timeout=10, env={"PATH": "/usr/bin:/bin"}, sandbox=box)
        return done.returncode, done.stdout, done.stderr

    return asyncio.run(go())


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require_binary("bwrap")
    need_root()
    hold(monkeypatch, "jail_pool", True)
    yield
    sandboxpool.close_all()


def test_a_prepared_jail_of_a_root_server_holds_no_group_of_roots_and_the_same_dev(pool: None, base: Path) -> None:
    folder = base / "grp"
    folder.mkdir()
    os.chmod(folder, 0o755)
    secret = folder / "secret"
    secret.write_text("group zero only\n")
    os.chmod(secret, 0o040)
    box = Sandbox(profile="default", network="none", readable=(str(folder),))
    command = f"cat {secret} 2>/dev/null || echo DENIED; grep -E '^(Uid|Gid|Groups|CapEff):' /proc/self/status"
    for _ in range(2):
        _run(command, box)
    # jails are prepared ahead in the pool's own threads: the third call takes one once it is ready
    wait_until(lambda: sum(sandboxpool.prepared().values()) >= 1, 15, "a jail prepared ahead")
    code, out, err = _run(command, box)
    assert code == 0 and "DENIED" in out and "group zero only" not in out, (out, err)
    status = dict(line.split(":", 1) for line in out.strip().split("\n")[1:])
    assert status["Uid"].split() == ["65534"] * 4 and status["Gid"].split() == ["65534"] * 4, out
    assert status["Groups"].split() in ([], ["65534"]) and status["CapEff"].strip() == "0" * 16, out
    for _ in range(2):
        code, out, err = _run(DEV_COMMAND, box)
        assert code == 0, err
        _check_dev(out)


@pytest.fixture
def dev_folder(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A /dev folder of this test's own (the real one serves every root server on the host)."""
    require_binary("bwrap")
    need_root()
    path = f"/dev/toolrun-jail-dev-test-{uuid.uuid4().hex[:8]}"
    monkeypatch.setattr(sandbox, "DEV_FOLDER", path)
    hold(monkeypatch, "jail_pool", False)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _tamper_extra(path: str) -> None:
    os.mknod(f"{path}/extra", 0o666 | 0o020000, os.stat("/dev/null").st_rdev)


def _tamper_mode(path: str) -> None:
    os.chmod(f"{path}/zero", 0o777)


def _tamper_link(path: str) -> None:
    os.unlink(f"{path}/shm")
    os.symlink("/", f"{path}/shm")


def _tamper_owner(path: str) -> None:
    os.chown(path, 65534, 65534)


def _tamper_node(path: str) -> None:
    os.unlink(f"{path}/zero")
    os.mknod(f"{path}/zero", 0o666 | 0o020000, os.stat("/dev/full").st_rdev)


@pytest.mark.parametrize("tamper", [_tamper_extra, _tamper_mode, _tamper_link, _tamper_owner, _tamper_node])
def test_a_dev_folder_not_exactly_as_made_is_never_bound(dev_folder: str, tamper: object) -> None:
    box = Sandbox(profile="default", network="none")
    code, out, err = _run(DEV_COMMAND, box)
    assert code == 0 and sandbox._device_args() == ["--dev-bind", dev_folder, "/dev"], err
    _check_dev(out)
    tamper(dev_folder)  # type: ignore[operator]
    assert sandbox._device_args()[:3] == ["--dev-bind", "/dev/null", "/dev/null"]
    code, out, err = _run(DEV_COMMAND, box)
    assert code == 0, err
    _check_dev(out)  # the five nodes bound one by one: nothing of the folder's


def test_a_dev_folder_is_made_once_and_found_again(dev_folder: str) -> None:
    assert not os.path.lexists(dev_folder)
    assert sandbox._device_args() == ["--dev-bind", dev_folder, "/dev"]
    made = os.stat(dev_folder)
    assert sandbox._device_args() == ["--dev-bind", dev_folder, "/dev"]
    assert (os.stat(dev_folder).st_ino, os.stat(dev_folder).st_uid, oct(made.st_mode)) == (made.st_ino, 0, "0o40755")
    assert sorted(os.listdir(dev_folder)) == DEV.split()
    assert not [p for p in os.listdir("/dev") if p.startswith(".toolrun-jail-dev.")]  # no half-made folder left


def test_where_the_folder_cannot_be_made_each_node_is_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    require_binary("bwrap")
    need_root()
    hold(monkeypatch, "jail_pool", False)
    monkeypatch.setattr(sandbox, "DEV_FOLDER", f"/nonexistent-{uuid.uuid4().hex[:8]}/dev")  # no folder to make it in
    for _ in range(2):  # tried once, then not again in this process
        assert sandbox._device_args()[:3] == ["--dev-bind", "/dev/null", "/dev/null"]
        code, out, err = _run(DEV_COMMAND, Sandbox(profile="default", network="none"))
        assert code == 0, err
        _check_dev(out)
    assert sandbox.DEV_FOLDER in sandbox._DEV_UNMADE
    assert not [p for p in os.listdir("/dev") if p.startswith(".toolrun-jail-dev.")]  # nothing half-made left
