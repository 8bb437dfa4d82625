"""Issue 34's open break: a catalog or env file replaced by rename while a sandboxed call runs.

A catalog file or env file in a folder a sandbox shows (the tool's `cwd`, a `readable` path, `/etc`) was covered by a
mount over its name. Replacing the file the usual way (an editor's save, `sed -i`, `mv new old`: a new file renamed
over the old one) removes the name the cover was mounted on, and the kernel detaches a mount whose place was renamed
over in another mount namespace: the running call then read the NEW file, other tools' `env:` values included. Each
test drives a real `toolrun call` (real bwrap) while the operator replaces the files, with the server as root and as a
user that is not root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest

from support import jails
from support.binaries import require_binary
from support.jails import Jail
from support.procs import pids_matching
from support.servers import clean_env, wait_until
from support.sysusers import as_user, unprivileged

server, base, jail = jails.server, jails.base, jails.jail

CATALOG = """\
group: t
tools:
  - name: quick
    public: true
    exec: echo quick
    {where}
    sandbox: {{readable: [{flag}]}}
  - name: peek
    public: true
    exec: |
      : {marker}
      cat {shown}
      n=0
      while [ ! -e {flag}/stop ] && [ $n -lt 400 ]; do
        for f in {watched}; do
          if cat "$f" 2>/dev/null | grep -q {secret}; then echo "LEAKED $f"; fi
        done
        ls {listed} 2>/dev/null | grep -q new-name && echo "LEAKED a new name"
        n=$((n+1)); sleep 0.05
      done
      echo finished
    timeout: 60
    {where}
    sandbox: {{readable: [{flag}]}}
  - name: other
    exec: echo hi
    env: {{TOKEN: TOKENVALUE}}
    env_file: secrets.env
"""


class _Served:
    """`t.peek` called over HTTP on a `toolrun serve`, in a jail prepared ahead (three calls of `t.quick`, which has
    the same profile, made them): `poll` and `communicate` as a Popen's."""

    def __init__(self, jail: Jail, catalog: Path) -> None:
        from test_sandbox_pool import _serve_as

        self.srv = _serve_as(jail.server, jail.base / "srv", catalog)
        self.client = httpx.Client(timeout=60)
        try:
            self.srv.ready()
            for _ in range(3):
                assert self.client.post(f"{self.srv.url}/tools/t.quick", json={}).text == "quick\n"
            # bwrap and its waiter, for each of two jails: their command lines hold the bound `flag` folder
            wait_until(lambda: len(pids_matching(str(jail.base / "flag"))) >= 4, 15, "jails prepared ahead")
        except BaseException:
            self.kill()
            raise
        self.out: list[str] = []
        self.thread = threading.Thread(
            target=lambda: self.out.append(self.client.post(f"{self.srv.url}/tools/t.peek", json={}).text)
        )
        self.thread.start()

    def poll(self) -> int | None:
        return None if self.thread.is_alive() else 0

    def communicate(self, timeout: float) -> tuple[str, str]:
        self.thread.join(timeout)
        self.client.close()
        self.srv.stop()
        return "".join(self.out), ""

    def kill(self) -> None:
        self.client.close()
        self.srv.stop()


def _start_call(jail: Jail, catalog: Path, door: str) -> subprocess.Popen[str] | _Served:
    if door == "served":
        return _Served(jail, catalog)
    argv = [sys.executable, "-m", "toolrun", "call", "-c", str(catalog), "t.peek"]
    environ = clean_env(jail.home) | {"HOME": str(jail.home)}
    if jail.server == "user" and os.geteuid() == 0:
        user = unprivileged()
        jail.home.mkdir(parents=True, exist_ok=True)
        os.chown(jail.home, *user)
        argv = [*as_user(user), *argv]
    return subprocess.Popen(argv, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _replace(path: Path, text: str) -> None:
    """What an editor's save or `sed -i` does: write a new file beside, rename it over the old one."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text)
    os.chmod(fresh, 0o644)
    os.replace(fresh, path)


def _run_while_replacing(
    jail: Jail, folder: Path, where: str, watched: str, listed: str, shown: str, door: str = "call"
) -> str:
    marker = f"covers-{uuid.uuid4().hex[:12]}"
    flag = jail.base / "flag"
    flag.mkdir(mode=0o755)
    secret = f"new-secret-{marker}"  # this test's own: a concurrent test's grep is not this call running
    text = CATALOG.format(
        marker=marker, flag=flag, where=where, watched=watched, listed=listed, shown=shown, secret=secret
    )
    catalog = folder / "tools.yaml"
    catalog.write_text(text.replace("TOKENVALUE", "old-token"))
    (folder / "secrets.env").write_text("SECRET=old-env\n")
    for path in (catalog, folder / "secrets.env"):
        os.chmod(path, 0o644)
    call = _start_call(jail, catalog, door)
    try:
        wait_until(lambda: bool(pids_matching(f"grep -q {secret}")) or call.poll() is not None, 30, "the call runs")
        time.sleep(0.3)  # the call reads the covered files as they were: nothing
        _replace(catalog, text.replace("TOKENVALUE", f"{secret}-token"))
        _replace(folder / "secrets.env", f"SECRET={secret}-env\n")
        (folder / "new-name.yaml").write_text("group: x\ntools: []\n")  # a catalog file made while the call runs
        time.sleep(1.0)
        (flag / "stop").touch()
        out, err = call.communicate(timeout=60)
    finally:
        if call.poll() is None:
            call.kill()
            call.communicate(timeout=10)
    assert "finished" in out, out + err
    return out + err


@pytest.mark.parametrize("door", ["call", "served"], ids=["cli-call", "served-from-the-pool"])
def test_a_catalog_and_env_file_replaced_while_a_call_runs_stay_hidden(jail: Jail, door: str) -> None:
    """The tool's `cwd` is the catalog's folder (`cwd: .`), in a `toolrun call` and in a served call that took a jail
    prepared ahead. On the code before the fix the running call read the new catalog file (`LEAKED tools.yaml`) and
    the new env file as soon as they were renamed into place."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    (folder / "run.sh").write_text("echo from-the-script\n")
    said = _run_while_replacing(jail, folder, "cwd: .", "tools.yaml secrets.env", ".", "run.sh", door)
    assert "LEAKED" not in said, said
    assert "from-the-script" in said, f"the folder's other files are still shown: {said}"


@pytest.fixture
def etc_folder(server: str) -> Path:
    """A catalog folder in /etc, where the docs keep it (every sandbox shows /etc): needs root to make."""
    jails.need_root()
    folder = Path("/etc") / f"toolrun-covers-{uuid.uuid4().hex[:8]}" / "catalog.d"
    folder.mkdir(parents=True)
    folder.parent.chmod(0o755)
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


def test_a_catalog_in_etc_replaced_while_a_call_runs_stays_hidden(jail: Jail, etc_folder: Path) -> None:
    """Every sandbox shows /etc, where the docs keep the catalog: a tool with no bound path at all read the new
    catalog file and env file there once they were renamed over the old ones."""
    watched = f"{etc_folder}/tools.yaml {etc_folder}/secrets.env"
    (etc_folder / "README").write_text("from-the-readme\n")
    said = _run_while_replacing(jail, etc_folder, "", watched, str(etc_folder), f"{etc_folder}/README")
    assert "LEAKED" not in said, said
    assert "from-the-readme" in said, f"the folder's other files are still shown: {said}"


def test_a_folder_holding_the_catalog_beside_too_many_entries_is_a_clear_error(jail: Jail) -> None:
    """Each entry of such a folder is one mount in the copy, and bwrap's cost grows with the mounts: beyond 32 the
    call fails before anything runs, naming the folder and what to do."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    for i in range(33):
        (folder / f"file{i}").write_text("x\n")
    catalog = folder / "tools.yaml"
    catalog.write_text("group: t\ntools:\n  - name: ls\n    exec: ls\n    cwd: .\n    sandbox: true\n")
    os.chmod(catalog, 0o644)
    jail.catalog = catalog
    done = jail.call("t.ls")
    assert done.returncode != 0, jails.said(done)
    assert f"{folder} holds toolrun's own files (catalog, env files) beside more than 32 other entries" in done.stderr
    assert "keep catalog and env files in a folder of their own" in done.stderr
    assert "file1" not in done.stdout
    (folder / "file0").unlink()  # 32: shown, the catalog left out
    done = jail.call("t.ls")
    assert done.returncode == 0, jails.said(done)
    assert "file1\n" in done.stdout and "tools.yaml" not in done.stdout, done.stdout


def test_a_folder_holding_the_catalog_that_cannot_be_listed_is_a_clear_error(base: Path) -> None:
    """A server that is not root may read its catalog in a folder it cannot list (mode 0711): the copy needs the
    listing, so the call fails before anything runs, saying why (not a traceback)."""
    require_binary("bwrap")
    jails.need_root()  # the server then runs as another user, who may not list the folder
    jail = Jail(base, "user")
    folder = base / "cat"
    folder.mkdir(mode=0o755)
    catalog = folder / "tools.yaml"
    catalog.write_text("group: t\ntools:\n  - name: ls\n    exec: ls\n    cwd: .\n    sandbox: true\n")
    os.chmod(catalog, 0o644)
    folder.chmod(0o711)  # others may pass through, not list (the test's server user is another user when root)
    jail.catalog = catalog
    done = jail.call("t.ls")
    assert done.returncode != 0, jails.said(done)
    assert "shows such a folder as a copy of its other entries, but it cannot be listed here" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_validate_catalog_warns_of_a_catalog_file_directly_in_etc(base: Path) -> None:
    """/etc is shown whole (a copy would cost bwrap over 100 ms a call), so a catalog or env file directly in it is
    covered by a mount over its name only: validate-catalog says so, and where to keep it instead."""
    require_binary("bwrap")
    jails.need_root()
    catalog = Path("/etc") / f"toolrun-covers-{uuid.uuid4().hex[:8]}.yaml"
    catalog.write_text("group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n")
    try:
        jail = Jail(base, "root")
        jail.catalog = catalog
        done = jail.validate()
    finally:
        catalog.unlink()
    assert f"{catalog} lies directly in /etc, which every sandbox shows" in done.stdout, jails.said(done)
    assert "keep it in a folder of its own, such as /etc/toolrun/" in done.stdout


def test_a_writable_path_inside_a_copied_folder_stays_writable(jail: Jail) -> None:
    """The copy is made before the profile's own paths are bound: a `writable` folder beside the catalog (inside the
    `cwd: .` shown as a copy) is bound over the copy's entry, and writes reach the host."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    out = jail.writable("cat/out")
    catalog = folder / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: keep\n    exec: echo kept > out/note && cat out/note && ls\n    cwd: .\n"
        f"    sandbox: {{writable: [{out}]}}\n"
    )
    os.chmod(catalog, 0o644)
    jail.catalog = catalog
    done = jail.call("t.keep")
    assert done.returncode == 0, jails.said(done)
    assert done.stdout.split() == ["kept", "out"], done.stdout  # tools.yaml is not there
    assert (out / "note").read_text() == "kept\n"
