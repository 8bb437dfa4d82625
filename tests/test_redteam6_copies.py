"""Red team 6 on the copies (issue 34): a folder holding a catalog or env file, shown in a jail as a copy without them.

Each test drives real `toolrun serve` processes (real bwrap), with the server as root and as a user that is not root,
and attacks what walls-5 built: the listing and scan caches, the entries of a copy, the binds of a copy's entries.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import httpx
import pytest

from support import jails
from support.binaries import require_binary
from support.jails import Jail
from support.servers import wait_until

server, base, jail = jails.server, jails.base, jails.jail

HOUR_AGO = time.time() - 3600


def _replace(path: Path, text: str) -> None:
    """What rsync does to a changed file: write a new one beside, rename it over the old one."""
    fresh = path.with_name(f".{path.name}.tmp")
    fresh.write_text(text)
    os.chmod(fresh, 0o644)
    os.replace(fresh, path)


def _serve(jail: Jail, catalog: Path):  # type: ignore[no-untyped-def]
    from test_sandbox_pool import _serve_as

    return _serve_as(jail.server, jail.base / "srv", catalog)


V1 = """\
group: t
tools:
  - name: probe
    public: true
    exec: cat {data}/file.txt
    sandbox: {{readable: [{data}/file.txt]}}
  - name: other
    exec: echo hi
    env_file: secrets.env
"""
PEEK = """\
  - name: peek
    public: true
    exec: cat secrets.env tools.yaml 2>&1; ls
    cwd: .
    sandbox: true
"""


def test_a_catalog_and_env_file_deployed_with_the_folders_time_kept_stay_hidden(jail: Jail) -> None:
    """The copies trusted a folder's (device, inode, modification time) to say it had not changed since an earlier
    scan found toolrun's files in it. A modification time is the owner's to set: `rsync -a` (like `cp -a` or `tar x`)
    writes each changed file anew, renames it into place and puts the folder's time back. Deployed that way, a
    catalog that adds a tool with `cwd: .` beside a new env file, reloaded (SIGHUP), showed that tool the new catalog
    file and the new env file, secrets and all: the scan made at the start still named the old files. On the code
    before the fix `t.peek` printed `new-secret` and `new-token`."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    data = jail.base / "data"
    data.mkdir(mode=0o755)
    (data / "file.txt").write_text("data\n")
    catalog = folder / "tools.yaml"
    catalog.write_text(V1.format(data=data))
    (folder / "secrets.env").write_text("SECRET=old-secret\n")
    (folder / "notes.txt").write_text("notes\n")
    for path in (catalog, folder / "secrets.env", folder / "notes.txt", data / "file.txt"):
        os.chmod(path, 0o644)
    os.utime(folder, (HOUR_AGO, HOUR_AGO))
    srv = _serve(jail, catalog)
    try:
        srv.ready()
        with httpx.Client(timeout=30) as client:
            assert client.post(f"{srv.url}/tools/t.probe", json={}).text == "data\n"
            _replace(folder / "secrets.env", "SECRET=new-secret\n")
            _replace(catalog, V1.format(data=data).replace("echo hi", "echo new-token") + PEEK)
            os.utime(folder, (HOUR_AGO, HOUR_AGO))  # as `rsync -a` leaves it
            srv.send(signal.SIGHUP)
            wait_until(lambda: client.post(f"{srv.url}/tools/t.peek", json={}).status_code != 404, 15, "the reload")
            peeked = client.post(f"{srv.url}/tools/t.peek", json={}).text
    finally:
        srv.stop()
    assert "new-secret" not in peeked and "new-token" not in peeked, peeked
    assert peeked.endswith("notes.txt\n"), peeked


def test_a_file_replaced_beside_the_catalog_with_the_folders_time_kept_is_shown_anew(jail: Jail) -> None:
    """The same cache, the other way: once a call listed the folder, a file beside the catalog replaced with the
    folder's modification time put back (a routine `rsync -a` deploy) failed every later call of every tool whose
    copy shows that folder ("changed while the sandbox was set up") until the folder changed again. The call now
    shows the new file."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    catalog = folder / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: peek\n    public: true\n    exec: cat run.sh\n    cwd: .\n    sandbox: true\n"
    )
    (folder / "run.sh").write_text("version one\n")
    for path in (catalog, folder / "run.sh"):
        os.chmod(path, 0o644)
    os.utime(folder, (HOUR_AGO, HOUR_AGO))
    srv = _serve(jail, catalog)
    try:
        srv.ready()
        with httpx.Client(timeout=30) as client:
            first = client.post(f"{srv.url}/tools/t.peek", json={})
            _replace(folder / "run.sh", "version two\n")
            os.utime(folder, (HOUR_AGO, HOUR_AGO))
            second = client.post(f"{srv.url}/tools/t.peek", json={})
    finally:
        srv.stop()
    assert first.text == "version one\n", first.text
    assert second.status_code == 200 and second.text == "version two\n", (second.status_code, second.text)


def test_an_env_file_linked_into_a_rotated_folder_stays_hidden(jail: Jail) -> None:
    """An env file that is a link into a folder of its own, rotated by swapping a `current` link there (a secrets
    agent's way): the scan of the env file's folder was cached by that folder's own identity and time, which the
    rotation leaves alone, so it still named the old target. The new secret's folder, inside a sandboxed tool's
    `readable` path, was then bound whole, new secret and all. On the code before the fix `t.peek` printed
    `new-secret`."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    vault = jail.base / "vault"
    for name in ("v1", "v2"):
        (vault / name).mkdir(parents=True, mode=0o755)
    vault.chmod(0o755)
    (vault / "v1" / "app.env").write_text("SECRET=old-secret\n")
    (vault / "current").symlink_to("v1")
    (folder / "secrets.env").symlink_to(vault / "current" / "app.env")
    catalog = folder / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n"
        f"  - name: peek\n    public: true\n    exec: cat {vault}/v2/app.env {vault}/current/app.env 2>&1; true\n"
        f"    sandbox: {{readable: [{vault}]}}\n"
        "  - name: other\n    exec: echo hi\n    env_file: secrets.env\n"
    )
    for path in (catalog, vault / "v1" / "app.env"):
        os.chmod(path, 0o644)
    settled = time.time() + 1.2  # the folders' change times more than a second old: scans are cached
    srv = _serve_as_quiet(jail, catalog)
    try:
        srv.ready()
        wait_until(lambda: time.time() > settled, 5, "a second since the folders changed")
        with httpx.Client(timeout=30) as client:
            first = client.post(f"{srv.url}/tools/t.peek", json={}).text
            (vault / "v2" / "app.env").write_text("SECRET=new-secret\n")
            os.chmod(vault / "v2" / "app.env", 0o644)
            (vault / "next").symlink_to("v2")
            os.replace(vault / "next", vault / "current")  # the rotation: `current` now leads to v2
            peeked = client.post(f"{srv.url}/tools/t.peek", json={}).text
    finally:
        srv.stop()
    assert "old-secret" not in first, first
    assert "new-secret" not in peeked and "old-secret" not in peeked, peeked


def _serve_as_quiet(jail: Jail, catalog: Path):  # type: ignore[no-untyped-def]
    """`toolrun serve` with no reload poll (a reload would hide the new target by its name anew)."""
    from test_sandbox_pool import _serve_as

    return _serve_as(jail.server, jail.base / "srv", catalog, {"SVC_RELOAD_INTERVAL": "0"})


def test_an_env_file_renamed_into_place_while_a_call_is_set_up_stays_hidden(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call finds toolrun's files (by device and inode), then lists their folder for the copy. An env file renamed
    over the old one between the two (an operator's deploy at the moment a call starts) was an entry of another
    inode under the env file's own name: bound into the copy, the new secret and all. The rename is made here at
    that moment (the window is a fraction of a millisecond: forced, not waited for); the copy must leave the name
    out. On the code before the fix the copy bound `secrets.env`."""
    import toolrun.exec.sandboxpaths as paths

    folder = base / "cat"
    folder.mkdir(mode=0o755)
    (folder / "tools.yaml").write_text("group: t\ntools: []\n")
    (folder / "secrets.env").write_text("SECRET=old-secret\n")
    (folder / "notes.txt").write_text("notes\n")
    listing = paths._entries

    def renamed_first(fd: int, st: os.stat_result) -> list[tuple[str, paths.Ident, str, str]]:
        _replace(folder / "secrets.env", "SECRET=new-secret\n")
        return listing(fd, os.fstat(fd))

    monkeypatch.setattr(paths, "_entries", renamed_first)
    files = [str(folder / "tools.yaml"), str(folder / "secrets.env")]
    binds = paths.open_binds([], [], str(folder), [], True, files)
    try:
        shown = [binds.views[i + 2] for i, arg in enumerate(binds.views) if arg == "--ro-bind-fd"]
    finally:
        binds.close()
    assert shown == [str(folder / "notes.txt")], binds.views


def test_a_folder_holding_the_catalog_beside_many_links_is_a_clear_error(jail: Jail) -> None:
    """Links beside the catalog were not counted among a copy's 32 entries (a link is made anew, not mounted): 600
    links with long targets made bwrap's argument list too long, and the call failed with `OSError: [Errno 7]
    Argument list too long` (3,000 short ones: bwrap's own limit of 9,000 arguments). They count now, and the call
    fails with the copy's clear error before anything runs."""
    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    for i in range(600):
        (folder / f"link{i:03d}").symlink_to("/" + "t" * 4000 + str(i))
    catalog = folder / "tools.yaml"
    catalog.write_text("group: t\ntools:\n  - name: ls\n    exec: ls\n    cwd: .\n    sandbox: true\n")
    os.chmod(catalog, 0o644)
    jail.catalog = catalog
    done = jail.call("t.ls")
    assert done.returncode != 0, jails.said(done)
    assert f"{folder} holds toolrun's own files (catalog, env files) beside more than 32 other entries" in done.stderr
    assert "OSError" not in done.stderr, done.stderr


def test_a_copy_grants_the_calls_user_no_more_than_the_host_folder(base: Path) -> None:
    """A copy is a tmpfs of the jail's, which belongs to the call's user: given the host folder's mode as it was, a
    root server's tool (running as `nobody`) listed a folder of root's with mode 0711, which `nobody` may only pass
    through on the host. On the code before the fix `ls` printed `notes.txt`; the file itself stays readable by its
    name, as on the host."""
    jails.need_root()
    require_binary("bwrap")
    jail = Jail(base, "root")
    app = base / "app"
    app.mkdir(mode=0o755)
    (app / "notes.txt").write_text("notes\n")
    catalog = app / "tools.yaml"
    catalog.write_text(
        f"group: t\ntools:\n  - name: peek\n    exec: ls {app}; cat {app}/notes.txt\n"
        f"    sandbox: {{readable: [{base}]}}\n"
    )
    for path in (catalog, app / "notes.txt"):
        os.chmod(path, 0o644)
    app.chmod(0o711)
    jail.catalog = catalog
    done = jail.call("t.peek")
    assert "Permission denied" in done.stderr, jails.said(done)
    assert done.stdout == "notes\n", jails.said(done)


def test_a_root_only_folder_holding_the_catalog_in_etc_leaves_sandboxed_calls_working(base: Path) -> None:
    """`chmod 700 /etc/toolrun` (root's): every sandbox shows /etc, and the copy of the catalog's folder bound its
    entries by name, which bwrap, running as `nobody`, could not reach: every sandboxed call of a root server failed
    (`bwrap: Can't find source path ...: Permission denied`). The copy of a folder the call's user may not enter is
    now empty and closed to it, as the host folder is."""
    jails.need_root()
    require_binary("bwrap")
    folder = Path("/etc") / f"toolrun-rt6-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o700)
    try:
        (folder / "private.txt").write_text("root-only-words\n")
        os.chmod(folder / "private.txt", 0o644)
        catalog = folder / "tools.yaml"
        catalog.write_text(
            f"group: t\ntools:\n  - name: peek\n    exec: echo ran; cat {folder}/private.txt\n    sandbox: true\n"
        )
        jail = Jail(base, "root")
        jail.catalog = catalog
        done = jail.call("t.peek")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.stdout == "ran\n", jails.said(done)
    assert "Permission denied" in done.stderr and "root-only-words" not in done.stdout, jails.said(done)


def test_an_fn_modules_compiled_bytecode_beside_it_stays_hidden(jail: Jail) -> None:
    """The docs keep an fn tool's module next to the catalog file, and the server hides it from every sandbox. But
    importing it writes `__pycache__/<module>.cpython-311.pyc` beside it (unless PYTHONDONTWRITEBYTECODE, which the
    tests' own environment sets), the module's code and constants compiled: a tool with `cwd: .` read it from the
    copy of that folder. On the code before the fix `t.peek` printed `fn-secret-token`."""
    from support.sysusers import unprivileged

    folder = jail.base / "cat"
    folder.mkdir(mode=0o755)
    catalog = folder / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n  - name: word_count\n    public: true\n    fn: rt6_fns:word_count\n"
        "  - name: peek\n    public: true\n    exec: cat __pycache__/* 2>&1 | grep -a -o 'fn-secret-[a-z]*'; ls\n"
        "    cwd: .\n    sandbox: true\n"
    )
    (folder / "rt6_fns.py").write_text(
        'API_TOKEN = "fn-secret-token"\n\n\ndef word_count(text: str) -> int:\n    """Count."""\n'
        "    return len(text.split())\n"
    )
    for path in (catalog, folder / "rt6_fns.py"):
        os.chmod(path, 0o644)
    if jail.server == "user" and os.geteuid() == 0:
        os.chown(folder, *unprivileged())  # the server's user owns its catalog folder: it writes __pycache__ there
    from test_sandbox_pool import _serve_as

    srv = _serve_as(jail.server, jail.base / "srv", catalog, {"PYTHONDONTWRITEBYTECODE": ""})
    try:
        srv.ready()
        with httpx.Client(timeout=30) as client:
            assert client.post(f"{srv.url}/tools/t.word_count", json={"text": "a b"}).text.strip() == "2"
            peeked = client.post(f"{srv.url}/tools/t.peek", json={}).text
    finally:
        srv.stop()
    assert list((folder / "__pycache__").glob("rt6_fns.*.pyc")), "the server wrote no bytecode: nothing was tried"
    assert "fn-secret" not in peeked, peeked
    assert peeked.split() == ["__pycache__"], peeked
