"""Red team 11 on approvals (issue 34's kind, a hostile caller): a call runs for a requester who may still make it.

A requester whose groups changed after it asked (it may no longer call the tool) had its call approved all the same:
the approval answered 200 "running", the run then failed with "no tool 'ops.wipe'" (a tool the approver could see),
and the audit trail recorded an approval and a failure. Nothing ran, but the approver was told it would, and the
error named the wrong cause. Now the approval withdraws the request at once (409 naming why), as it does for a
requester whose key was revoked. The test failed on the code before its fix (the approval answered 200).
"""

from __future__ import annotations

import json
from pathlib import Path

from support.catalogs import write_catalog
from support.jobs import JobUsers, approval_catalog
from support.keys import close
from support.servers import Processes, ToolrunServer
from toolrun.access import Access


def test_an_approval_for_a_requester_who_may_no_longer_call_the_tool_runs_nothing(tmp_path: Path) -> None:
    from toolrun.settings import Settings
    from toolrun.state import open_keys

    audit = tmp_path / "audit.jsonl"
    with Processes() as procs:
        server = procs.add(
            ToolrunServer(tmp_path / "srv", write_catalog(tmp_path, approval_catalog()), {"SVC_AUDIT_LOG": audit})
        )
        users = procs.enter_context(JobUsers(server, {"alice": ["ops"], "bob": ["oncall"]}))
        server.start()
        job = users.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
        store = open_keys(Settings.load(environ=server.env))
        try:  # an admin moves alice out of ops, as `toolrun keys create alice --groups nobody --set-groups` does
            Access(store).create_key("alice", ["nobody"], set_groups=True)
        finally:
            close(store)
        answer = users.approve("bob", job)
        assert answer.status_code == 409, answer.text
        assert "may no longer call ops.wipe" in answer.json()["error"]
        view = users.view("alice", job).json()
        assert view["status"] == "cancelled" and "may no longer call" in view["reason"], view
    events = [json.loads(line).get("event") for line in audit.read_text().splitlines() if job in line]
    assert events == ["requested", "cancelled"], events
