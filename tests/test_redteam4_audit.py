"""A fifth red team on the audit trail (issue 34's "fresh red team", after the third red team's fix): a real
`toolrun serve` as root whose `audit_log` lies in a folder another local user may write, and that user attacking
the reopen. The test failed on the code before its fix.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from support.servers import serve_catalog, wait_until
from support.sysusers import as_user, unprivileged
from test_redteam3_audit import CATALOG, shared_logs

pytestmark = pytest.mark.timeout(120)

__all__ = ["shared_logs"]  # the fixture


def _post(url: str, msg: str) -> None:
    assert httpx.post(f"{url}/tools/t.echo", json={"msg": msg}, timeout=30).status_code == 200


def test_a_file_another_user_left_at_the_audit_logs_path_gets_no_record(shared_logs: Path, tmp_path: Path) -> None:
    """The reopen after a rotation refuses links and fifos now, but took any regular file: a local user who may
    write the log's folder moved the file away and left a file of their own (0666) at the path, and the root
    server appended every later record to it: the user read what callers sent (their arguments) and could rewrite
    or empty the trail. Now the file must be this user's, with one link (a hard link made to another file of the
    server's user is refused too); the records go to the file open before, and the server's log says why."""
    audit = shared_logs / "audit.jsonl"
    attacker = as_user(unprivileged())
    with serve_catalog(tmp_path, CATALOG, {"SVC_AUDIT_LOG": str(audit), "SVC_WORKERS": 1}) as server:
        server.start()
        _post(server.url, "first")
        wait_until(lambda: audit.exists() and "first" in audit.read_text(), 5, "the first record")
        moved = shared_logs / "moved.jsonl"
        script = f"mv {audit} {moved} && touch {audit} && chmod 666 {audit}"
        done = subprocess.run([*attacker, "/bin/sh", "-c", script], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        _post(server.url, "second secret")
        wait_until(lambda: "second" in moved.read_text() or "second" in audit.read_text(), 5, "the record")
        assert "second" not in audit.read_text(), "the server wrote its record to another user's file"
        assert [json.loads(line)["args"]["msg"] for line in moved.read_text().splitlines()] == [
            "first",
            "second secret",
        ]
        # the server's log line may come a moment after the record, on a loaded machine (seen in a full run)
        wait_until(lambda: "cannot open it again" in server.log(), 5, "the server's log line")
