"""A fourth red team (issue 34's "fresh red team"), on the audit trail: a real `toolrun serve` as root whose
`audit_log` lies in a folder another local user may write, and that user attacking it. Each test failed on the code
before its fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support.jails import need_root
from support.servers import serve_catalog, wait_until
from support.sysusers import as_user, unprivileged

pytestmark = pytest.mark.timeout(120)

CATALOG = """\
group: t
tools:
  - name: echo
    public: true
    exec: printf '%s' {{ msg | quote }}
    params: [{name: msg, type: str}]
"""


@pytest.fixture
def shared_logs() -> Iterator[Path]:
    """A log folder every local user may write (0777, not sticky: a group-writable /var/log/toolrun is the same)."""
    need_root()
    base = Path(tempfile.mkdtemp(prefix="toolrun-audit-", dir="/tmp"))
    base.chmod(0o755)
    logs = base / "logs"
    logs.mkdir()
    logs.chmod(0o777)
    try:
        yield logs
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _post(url: str, msg: str) -> None:
    assert httpx.post(f"{url}/tools/t.echo", json={"msg": msg}, timeout=30).status_code == 200


def test_a_link_left_at_the_audit_logs_path_is_never_followed(shared_logs: Path, tmp_path: Path) -> None:
    """The audit file is reopened at its path when it is rotated or deleted, and that open followed links: a local
    user who may write the log's folder moved the file away and left a link to a root-only file, and the root
    server appended its next record there (any file: /etc/sudoers, a cron file), with text the caller chose. Now
    the path is opened without following links and must be a regular file; the record goes to the file open
    before, and the server's log says why."""
    audit = shared_logs / "audit.jsonl"
    victim = tmp_path / "root-only.conf"
    victim.write_text("setting = 1\n")
    victim.chmod(0o600)
    attacker = as_user(unprivileged())
    with serve_catalog(tmp_path, CATALOG, {"SVC_AUDIT_LOG": str(audit), "SVC_WORKERS": 1}) as server:
        server.start()
        _post(server.url, "first")
        wait_until(lambda: audit.exists() and "first" in audit.read_text(), 5, "the first record")
        moved = shared_logs / "moved.jsonl"
        for argv in (["mv", str(audit), str(moved)], ["ln", "-s", str(victim), str(audit)]):
            done = subprocess.run([*attacker, *argv], capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
        _post(server.url, "second\nsetting = 0")
        wait_until(
            lambda: "cannot open it again" in server.log() or victim.read_text() != "setting = 1\n", 5, "the record"
        )
        assert victim.read_text() == "setting = 1\n"
        assert "cannot open it again" in server.log()
        assert [json.loads(line)["args"]["msg"] for line in moved.read_text().splitlines()] == [
            "first",
            "second\nsetting = 0",
        ]
        assert os.path.islink(audit)


def test_a_fifo_left_at_the_audit_logs_path_does_not_hang_the_server(shared_logs: Path, tmp_path: Path) -> None:
    """The same folder, a fifo instead of a link: the reopen after the file was moved away opened the fifo for
    writing, which blocks until someone reads it, while holding the audit log's lock: the call, and every call
    after it, hung. Now the open does not block and refuses anything but a regular file; the calls answer and
    their records go to the file open before."""
    audit = shared_logs / "audit.jsonl"
    attacker = as_user(unprivileged())
    with serve_catalog(tmp_path, CATALOG, {"SVC_AUDIT_LOG": str(audit), "SVC_WORKERS": 1}) as server:
        server.start()
        _post(server.url, "first")
        wait_until(lambda: audit.exists() and "first" in audit.read_text(), 5, "the first record")
        moved = shared_logs / "moved.jsonl"
        for argv in (["mv", str(audit), str(moved)], ["mkfifo", str(audit)]):
            done = subprocess.run([*attacker, *argv], capture_output=True, text=True, check=False)
            assert done.returncode == 0, done.stderr
        try:
            answer = httpx.post(f"{server.url}/tools/t.echo", json={"msg": "second"}, timeout=10)
        except httpx.TimeoutException:
            pytest.fail("the call hung on the fifo at the audit log's path")
        assert answer.status_code == 200
        assert "second" in moved.read_text()
