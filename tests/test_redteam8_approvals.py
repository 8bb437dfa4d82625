"""Red team 8 on approvals after a reload that changed a tool's sandbox profile (issue 34): an approved plan runs in
the profile that was approved, or not at all.

The tool names a profile (`sandbox: box`); the reload changes only the profile, not the tool's entry: a wider
`writable`, a `network: host`, or what the profile extends. The approval binds the resolved sandbox (jobrecord.digest),
so each pending request expires instead of running in the new profile. (Held: this test passed on the code before.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support import jails
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.servers import Processes, ToolrunServer

base = jails.base

USERS = {"alice": ["ops"], "bob": ["oncall"], "root": ["admin"]}


def _catalog(box: str, base: str = "{}") -> str:
    return (
        f"group: ops\nsandboxes:\n  base: {base}\n  box: {box}\ntools:\n"
        "  - name: wipe\n    exec: echo wiped {{ target | quote }}\n    params:\n      - {name: target, type: str}\n"
        "    approval: required\n    approvers: [oncall]\n    sandbox: box\n"
    )


@pytest.fixture
def served(tmp_path: Path, base: Path) -> Iterator[tuple[ToolrunServer, JobUsers, Path]]:
    require_binary("bwrap")
    data = jails.jail_writable(base / "data")  # a folder a root server's sandboxed tools (nobody) may write
    catalog = write_catalog(tmp_path, _catalog("{extends: base}"))
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog))
        users = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        yield srv, users, data


@pytest.mark.parametrize(
    "change",
    ["writable", "network", "extends"],
)
def test_a_reload_that_changes_only_the_profile_expires_the_pending_request(
    served: tuple[ToolrunServer, JobUsers, Path], change: str
) -> None:
    srv, u, data = served
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    wider = {
        "writable": _catalog(f"{{extends: base, writable: [{data}]}}"),
        "network": _catalog("{extends: base, network: host}"),
        "extends": _catalog("{extends: base}", base=f"{{writable: [{data}]}}"),
    }[change]
    srv.catalog.write_text(wider, encoding="utf-8")
    assert u.req("root", "POST", "/admin/reload").status_code == 200
    answer = u.approve("bob", job)
    assert answer.status_code == 409, answer.text
    view = u.until("alice", job, "expired", timeout=5)
    assert "changed" in view["error"]
