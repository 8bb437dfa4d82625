"""Red team 11 on MCP Tasks (issue 34's kind, a hostile caller): a task's question is its requester's.

An approver sees the requester's task (the jobs' scoping), and `tasks/update` with `decline` cancelled it as "withdrawn
by the requester": the job, its audit record and the requester's view said the requester withdrew a call that an
approver had in fact turned down, with no denial on record. Now only the requester answers its question; an approver
approves or denies (and `tasks/cancel` says who cancelled). The test failed on the code before its fix (the job was
`cancelled`, "withdrawn by the requester", by bob).
"""

from __future__ import annotations

from pathlib import Path

from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.servers import Processes, ToolrunServer
from test_mcp_tasks import CATALOG, Http


def test_an_approver_cannot_answer_the_requesters_question(tmp_path: Path) -> None:
    audit = tmp_path / "audit.jsonl"
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", write_catalog(tmp_path, CATALOG), {"SVC_AUDIT_LOG": audit}))
        users = procs.enter_context(JobUsers(server, {"alice": ["ops"], "bob": ["oncall"]}))
        server.start()
        alice, bob = Http(server.url, users.keys["alice"]), Http(server.url, users.keys["bob"])
        task_id = alice.call("ops.wipe", {"target": "db1"})["result"]["taskId"]
        (key,) = bob.task("tasks/get", task_id)["result"]["inputRequests"]  # the approver sees the task
        for action in ("decline", "cancel"):
            answer = bob.task("tasks/update", task_id, inputResponses={key: {"action": action}})
            assert "only the requester" in answer["error"]["message"], answer
        view = users.view("alice", task_id).json()
        assert view["status"] == "awaiting_approval", view
        assert "withdrawn" not in audit.read_text()
        # The approver's own acts are its own: a denial on record, by bob.
        assert users.deny("bob", task_id, "not today").status_code == 200
        view = users.view("alice", task_id).json()
        assert (view["status"], view["decided_by"], view["reason"]) == ("denied", "bob", "not today")
