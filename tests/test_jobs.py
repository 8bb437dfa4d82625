"""Jobs on a real `toolrun serve`: approval (REST), async calls, cancel, scoping, reload, restart.

Users: alice (group ops) calls the tools; bob (oncall) approves ops.wipe; carol (ops) is a third
user who may call the tools but must never see alice's jobs; root (admin) approves anything but
its own calls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.procs import pids_matching
from support.servers import Processes, ToolrunServer, toolrun_cli, wait_until

MARK = f"jobmark{uuid.uuid4().hex[:8]}"
CATALOG = f"""\
group: ops
tools:
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{{{ target | quote }}}}
    params:
      - {{name: target, type: str}}
    approval: required
    approvers: [oncall]
    approval_timeout: 600
  - name: slow
    exec: "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do echo line$i; sleep 0.4; done # {MARK}"
    async: true
  - name: quick
    exec: echo quick
    public: true
  - name: noisy
    exec: "echo out1; echo err1 >&2; until [ -e {{{{ gate | quote }}}} ]; do sleep 0.05; done; echo out2; echo err2 >&2"
    params:
      - {{name: gate, type: str}}
    async: true
"""


USERS = {"alice": ["ops"], "bob": ["oncall"], "carol": ["ops"], "root": ["admin"]}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ToolrunServer, JobUsers]]:
    catalog = write_catalog(tmp_path, CATALOG)
    audit = tmp_path / "audit.log"
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_AUDIT_LOG": audit}))
        users = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        yield srv, users


def test_approval_end_to_end_rest(server: tuple[ToolrunServer, JobUsers], tmp_path: Path) -> None:
    _srv, u = server
    r = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"})
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert r.json() == {"job": job, "status": "awaiting_approval"}
    assert r.headers["location"] == f"/jobs/{job}"
    # Nothing ran yet: the requester sees it waiting, with no result.
    view = u.view("alice", job).json()
    assert view["status"] == "awaiting_approval" and "result" not in view and view["requester"] == "alice"
    # The requester is no approver; a third user does not even see the job (the 404 of a hidden tool).
    assert u.approve("alice", job).status_code == 403
    hidden = u.req("carol", "GET", "/tools/ops.nothing-here")
    for method, path in (("GET", f"/jobs/{job}"), ("POST", f"/jobs/{job}/approve"), ("GET", f"/jobs/{job}/events")):
        answer = u.req("carol", method, path)
        assert (answer.status_code, answer.json()) == (404, hidden.json()) == (404, {"error": "not found"})
    assert u.req("carol", "GET", "/jobs").json() == []
    # The approver sees who asked, the parameters and the exact command.
    pending = u.pending("bob")
    assert [p["job"] for p in pending] == [job]
    assert pending[0]["plan"]["command"] == "echo wiped db1" and pending[0]["args"] == {"target": "db1"}
    assert pending[0]["can_decide"] is True
    r = u.approve("bob", job, "ticket 42")
    assert r.status_code == 200, r.text
    assert r.json()["decided_by"] == "bob"
    done = u.until("alice", job, "succeeded")
    # The result is the answer the synchronous call would have given.
    sync = u.req("root", "POST", "/tools/ops.quick")
    assert done["result"] == {
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "body": "wiped db1\n",
        "exit_code": 0,
    }
    assert sync.headers["content-type"] == done["result"]["content_type"]
    assert u.approve("bob", job).status_code == 409  # decided once
    # The audit trail: the request, the decision (who, why) and the digest that was approved.
    records = [json.loads(line) for line in (tmp_path / "audit.log").read_text().splitlines()]
    mine = [r for r in records if r.get("job") == job and r["message"] != "tool call"]
    assert [r["event"] for r in mine] == ["requested", "approved", "succeeded"]
    assert mine[1]["decider"] == mine[1]["by"] == "bob" and mine[1]["reason"] == "ticket 42"
    assert mine[0]["digest"] == mine[1]["digest"] == done["digest"]
    ran = [r for r in records if r.get("tool") == "ops.wipe" and r.get("message") == "tool call"]
    assert len(ran) == 1 and ran[0]["user"] == "alice" and ran[0]["outcome"] == "ok" and ran[0]["job"] == job


def test_requester_cannot_approve_own_call_even_as_admin(server: tuple[ToolrunServer, JobUsers]) -> None:
    _srv, u = server
    job = u.req("root", "POST", "/tools/ops.wipe", {"target": "x"}).json()["job"]
    r = u.approve("root", job)
    assert r.status_code == 403 and "requester" in r.json()["error"]
    assert u.view("root", job).json()["can_decide"] is False
    r = u.deny("bob", job, "not today")
    assert r.status_code == 200
    view = u.view("root", job).json()
    assert (view["status"], view["reason"], view["decided_by"]) == ("denied", "not today", "bob")
    assert u.approve("bob", job).status_code == 409


def test_bad_params_are_refused_at_once(server: tuple[ToolrunServer, JobUsers]) -> None:
    _srv, u = server
    r = u.req("alice", "POST", "/tools/ops.wipe", {"nope": 1})
    assert r.status_code == 400
    assert u.req("bob", "GET", "/jobs").json() == []
    r = u.req("bob", "POST", "/jobs/zzz/approve", {"reason": 5})
    assert r.status_code == 400


def test_async_job_output_events_and_metrics(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    r = u.req("alice", "POST", "/tools/ops.slow")
    assert r.status_code == 202 and r.json()["status"] == "running"
    job = r.json()["job"]

    def some_output() -> dict[str, Any] | None:
        view = u.view("alice", job).json()
        return view if "line2" in (view.get("output") or {}).get("stdout_head", "") else None

    view = wait_until(some_output, 10, "output so far", interval=0.1)
    assert view["status"] == "running" and view["output"]["stdout_head"].startswith("line1\n")
    headers, events = u.follow("alice", job)
    assert headers["content-type"].startswith("text/event-stream")
    assert events[0]["status"] == "running" and events[-1]["status"] == "succeeded"
    assert events[-1]["result"]["body"].endswith("line15\n")
    # The first event carries what exists; each later one only what is new since the one before.
    assert events[0]["output"]["stdout"].startswith("line1\nline2\n")
    pieces = [e["output"]["stdout"] for e in events if "output" in e]
    assert "".join(pieces) == "".join(f"line{i}\n" for i in range(1, 16))
    assert all(p.count("line1\n") <= 1 for p in pieces) and len([p for p in pieces if p]) >= 3
    # Prefer: respond-async on a plain tool.
    r = u.req("alice", "POST", "/tools/ops.quick", Prefer="respond-async")
    assert r.status_code == 202 and r.headers["preference-applied"] == "respond-async"
    # A job is its requester's to follow: an anonymous caller (a public tool) gets none.
    anonymous = u.client.post(srv.url + "/tools/ops.quick", headers={"Prefer": "respond-async"})
    assert (anonymous.status_code, anonymous.json()) == (401, {"error": "unauthorized"})
    assert u.client.post(srv.url + "/tools/ops.quick").text == "quick\n"
    assert u.until("alice", r.json()["job"], "succeeded")["result"]["body"] == "quick\n"
    metrics = u.client.get(srv.url + "/metrics").text
    assert 'svc_jobs{state="succeeded"} 2' in metrics
    assert 'svc_tool_calls_total{outcome="ok",tool="ops.slow"} 1.0' in metrics


def test_cancel_kills_the_running_process(server: tuple[ToolrunServer, JobUsers]) -> None:
    _srv, u = server
    job = u.req("alice", "POST", "/tools/ops.slow").json()["job"]
    wait_until(lambda: pids_matching(MARK), 10, "the tool's process")
    assert u.cancel("carol", job).status_code == 404
    r = u.cancel("alice", job)
    assert r.status_code == 200
    assert u.until("alice", job, "cancelled")["status"] == "cancelled"
    wait_until(lambda: not pids_matching(MARK), 5, "no process left")
    assert u.cancel("alice", job).status_code == 409


def test_reload_that_changes_the_tool_expires_pending_approvals(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    other = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db2"}).json()["job"]
    srv.catalog.write_text(CATALOG.replace("echo wiped", "echo erased"), encoding="utf-8")
    assert u.req("root", "POST", "/admin/reload").status_code == 200
    view = u.until("alice", job, "expired", timeout=5)
    assert "changed" in view["error"]
    r = u.approve("bob", other)
    assert r.status_code == 409
    # A new call binds the new definition and runs it.
    fresh = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db3"}).json()["job"]
    assert u.approve("bob", fresh).status_code == 200
    assert u.until("alice", fresh, "succeeded")["result"]["body"] == "erased db3\n"


def test_pending_approvals_survive_a_restart_and_expire_on_time(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG.replace("approval_timeout: 600", "approval_timeout: 6"))
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        asked = time.time()
        job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
        keep = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db2"}).json()["job"]
        srv.stop()
        srv.start()
        assert u.view("alice", job).json()["status"] == "awaiting_approval"
        assert u.approve("bob", keep).status_code == 200
        assert u.until("alice", keep, "succeeded")["result"]["body"] == "wiped db2\n"
        view = u.until("alice", job, "expired", timeout=15)
        assert time.time() - asked >= 6
        assert u.approve("bob", job).status_code == 409
        assert view["error"].startswith("no decision")


def test_two_workers_share_jobs(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_WORKERS": 2}))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        jobs = [u.req("alice", "POST", "/tools/ops.wipe", {"target": f"t{i}"}).json()["job"] for i in range(6)]
        # Each request may land on either worker: every one sees every job, and approves it once.
        assert {j["job"] for j in u.req("bob", "GET", "/jobs").json()} == set(jobs)
        for i, job in enumerate(jobs):
            assert u.approve("bob", job).status_code == 200
            assert u.until("alice", job, "succeeded")["result"]["body"] == f"wiped t{i}\n"


def test_cli_waits_for_approval_and_manages_jobs(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    remote = ["--url", srv.url, "--api-key"]
    # --no-wait prints the job id; `jobs list` / `approve` / `tail` with --url.
    done = toolrun_cli(*remote, u.keys["alice"], "call", "ops.wipe", "target=db9", "--no-wait", env=srv.env)
    assert done.returncode == 0, done.stderr
    job = done.stdout.strip()
    listed = toolrun_cli(*remote, u.keys["bob"], "jobs", "list", env=srv.env)
    assert job in listed.stdout and "awaiting_approval" in listed.stdout
    assert toolrun_cli(*remote, u.keys["carol"], "jobs", "show", job, env=srv.env).returncode == 2  # not found
    own = toolrun_cli(*remote, u.keys["alice"], "jobs", "approve", job, env=srv.env)
    assert own.returncode == 2 and "approver" in own.stderr
    ok = toolrun_cli(*remote, u.keys["bob"], "jobs", "approve", job, "--reason", "go", env=srv.env)
    assert ok.returncode == 0, ok.stderr
    tail = toolrun_cli(*remote, u.keys["alice"], "jobs", "tail", job, env=srv.env)
    assert (tail.returncode, tail.stdout) == (0, "wiped db9\n"), tail.stderr
    # A plain `toolrun call` waits for the decision, then prints the result as a synchronous call would.
    waiting = subprocess.Popen(
        [sys.executable, "-m", "toolrun", *remote, u.keys["alice"], "call", "ops.wipe", "target=db8"],
        env=srv.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pending = wait_until(lambda: u.pending("bob"), 20, "the waiting call's job")
        assert u.approve("bob", pending[0]["job"]).status_code == 200
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert (waiting.returncode, out) == (0, "wiped db8\n"), err
    # A denied call: `toolrun call` ends with the decision on stderr and exit 1.
    waiting = subprocess.Popen(
        [sys.executable, "-m", "toolrun", *remote, u.keys["alice"], "call", "ops.wipe", "target=db7"],
        env=srv.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pending = wait_until(lambda: u.pending("bob"), 20, "the waiting call's job")
        deny = toolrun_cli(*remote, u.keys["bob"], "jobs", "deny", pending[0]["job"], "-r", "risky", env=srv.env)
        assert deny.returncode == 0, deny.stderr
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 1 and "denied by bob: risky" in err


def test_cli_local_jobs_share_the_servers_state_file(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "local1"}).json()["job"]
    local = ["-c", str(srv.catalog)]
    listed = toolrun_cli("jobs", "list", *local, env=srv.env)  # the local operator is an admin
    assert job in listed.stdout, listed.stderr
    shown = json.loads(toolrun_cli("jobs", "show", job, "--json", *local, env=srv.env).stdout)
    assert shown["plan"]["command"] == "echo wiped local1"
    approved = toolrun_cli("jobs", "approve", job, "-r", "from the console", *local, env=srv.env)
    assert approved.returncode == 0, approved.stderr
    assert "succeeded" in approved.stderr
    view = u.view("alice", job).json()
    assert view["status"] == "succeeded" and view["result"]["body"] == "wiped local1\n"
    assert view["reason"] == "from the console"
    # A local `toolrun call` of the tool waits too; an approver on the server decides, the server runs it.
    waiting = subprocess.Popen(
        [sys.executable, "-m", "toolrun", "call", "ops.wipe", "target=local2", *local],
        env=srv.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pending = wait_until(lambda: u.pending("bob"), 20, "the local call's job")
        assert pending[0]["args"] == {"target": "local2"}
        assert u.approve("bob", pending[0]["job"]).status_code == 200
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert (waiting.returncode, out) == (0, "wiped local2\n"), err


def test_two_replicas_on_redis_share_jobs(tmp_path: Path) -> None:
    from support.binaries import require_binary
    from support.servers import RedisServer, start_all

    binary = require_binary("redis-server")
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        redis = procs.add(RedisServer(tmp_path / "redis", binary)).start()
        settings = {"SVC_REDIS_URL": redis.url}
        a = procs.add(ToolrunServer(tmp_path / "a", catalog, settings))
        b = procs.add(ToolrunServer(tmp_path / "b", catalog, settings))
        ua = procs.enter_context(JobUsers(a, USERS))  # keys minted once, in Redis: both replicas know them
        ub = procs.enter_context(ua.on(b))
        start_all(a, b)
        job = ua.req("alice", "POST", "/tools/ops.wipe", {"target": "r1"}).json()["job"]
        # Created on A: B lists it, approves it and runs it; A reads the result.
        assert [j["job"] for j in ub.req("bob", "GET", "/jobs").json()] == [job]
        assert ub.req("carol", "GET", f"/jobs/{job}").status_code == 404
        assert ub.req("bob", "POST", f"/jobs/{job}/approve").status_code == 200
        assert ua.until("alice", job, "succeeded")["result"]["body"] == "wiped r1\n"
        assert ua.req("bob", "POST", f"/jobs/{job}/approve").status_code == 409
        # A long job started on B is cancelled through A.
        slow = ub.req("alice", "POST", "/tools/ops.slow").json()["job"]
        wait_until(lambda: pids_matching(MARK), 10, "the tool's process")
        assert ua.req("alice", "POST", f"/jobs/{slow}/cancel").status_code == 200
        assert ub.until("alice", slow, "cancelled")["status"] == "cancelled"
        wait_until(lambda: not pids_matching(MARK), 5, "no process left")


def test_jobs_count_in_the_rate_limit_once_and_are_documented(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    limits = {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 2}
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, limits))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        jobs = [u.req("alice", "POST", "/tools/ops.wipe", {"target": f"t{i}"}) for i in range(3)]
        assert [j.status_code for j in jobs] == [202, 202, 429]
        metrics = u.client.get(srv.url + "/metrics").text
        assert 'svc_tool_calls_total{outcome="rate_limited",tool="ops.wipe"} 1.0' in metrics
        # Running an approved job does not count a second time: both run although the bucket is empty.
        for answer in jobs[:2]:
            job = answer.json()["job"]
            assert u.approve("bob", job).status_code == 200
            assert u.until("alice", job, "succeeded")["status"] == "succeeded"
        paths = u.req("alice", "GET", "/openapi.json").json()["paths"]
        assert {"/jobs", "/jobs/{id}", "/jobs/{id}/events", "/jobs/{id}/approve", "/jobs/{id}/deny"} <= set(paths)
        assert "202" in paths["/tools/{key}"]["post"]["responses"]


def test_a_job_whose_server_died_becomes_failed_with_the_reason(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        job = u.req("alice", "POST", "/tools/ops.slow").json()["job"]
        wait_until(lambda: pids_matching(MARK), 10, "the tool's process")
        srv.stop(signal.SIGKILL)  # no chance to record anything
        srv.start()
        view = u.until("alice", job, "failed", timeout=20)
        assert view["error"] == "the worker running it stopped (no heartbeat)"
        wait_until(lambda: not pids_matching(MARK), 10, "no process left")
        # A server that stops cleanly records why its running jobs ended.
        job = u.req("alice", "POST", "/tools/ops.slow").json()["job"]
        wait_until(lambda: pids_matching(MARK), 10, "the tool's process")
        srv.stop(signal.SIGTERM)
        srv.start()
        view = u.until("alice", job, "failed", timeout=20)
        assert view["error"] == "the server stopped while it ran"
        assert not pids_matching(MARK)


def test_finished_jobs_are_dropped_after_the_retention(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_JOB_RETENTION": 1}))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        job = u.req("alice", "POST", "/tools/ops.quick", Prefer="respond-async").json()["job"]
        u.until("alice", job, "succeeded")
        wait_until(lambda: u.view("alice", job).status_code == 404, 10, "the job dropped")
        assert u.req("alice", "GET", "/jobs").json() == []


def test_catalog_checks_the_approval_fields(tmp_path: Path) -> None:
    bad = write_catalog(tmp_path, CATALOG.replace("approval: required", "approval: maybe"), "bad.yaml")
    env = {**os.environ, "TOOLRUN_HOME": str(tmp_path / "h")}
    done = toolrun_cli("validate-catalog", str(bad), env=env)
    assert done.returncode != 0 and "approval" in done.stdout + done.stderr
    loose = write_catalog(tmp_path, CATALOG.replace("    approval: required\n", ""), "loose.yaml")
    done = toolrun_cli("validate-catalog", str(loose), env=env)
    assert "`approvers` applies with `approval: required` only" in done.stdout + done.stderr
    entry = json.loads(
        toolrun_cli(
            "describe", "ops.wipe", "--json", "-c", str(write_catalog(tmp_path, CATALOG)), env=os.environ
        ).stdout
    )
    assert entry["approval"] == {"required": True, "approvers": ["oncall"]}


def test_a_job_id_never_starts_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """`toolrun jobs show -abc...` would read the id as an option: ids that start with `-` are drawn again."""
    from toolrun import jobrecord

    drawn = iter(["-looksLikeAnOpt", "_fine-after-all"])
    monkeypatch.setattr(jobrecord.secrets, "token_urlsafe", lambda n: next(drawn))
    assert jobrecord.new_job_id() == "_fine-after-all"
    monkeypatch.undo()
    assert not any(jobrecord.new_job_id().startswith("-") for _ in range(2000))


ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"


def test_the_job_commands_read_well_for_people_and_scripts(
    server: tuple[ToolrunServer, JobUsers], tmp_path: Path
) -> None:
    import re

    srv, u = server
    remote = ["--url", srv.url, "--api-key"]
    # A call that waits without a terminal says on stderr which job it is and what it waits for.
    waiting = subprocess.Popen(
        [sys.executable, "-m", "toolrun", *remote, u.keys["alice"], "call", "ops.wipe", "target=db5"],
        env=srv.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        job = wait_until(lambda: u.pending("bob"), 20, "the waiting call's job")[0]["job"]
        # `jobs show` for people: who asked, when (ISO 8601), the command, and that bob may decide.
        shown = toolrun_cli(*remote, u.keys["bob"], "jobs", "show", job, env=srv.env)
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.startswith(f"job {job} (ops.wipe): awaiting_approval\nrequested by alice at ")
        assert re.search(rf"requested by alice at {ISO}; approvers: oncall; expires at {ISO}", shown.stdout)
        assert "command: echo wiped db5" in shown.stdout and f"toolrun jobs approve {job}" in shown.stdout
        as_json = json.loads(toolrun_cli(*remote, u.keys["bob"], "jobs", "show", job, "--json", env=srv.env).stdout)
        assert re.fullmatch(ISO, as_json["created"]) and re.fullmatch(ISO, as_json["expires_at"])
        listed = toolrun_cli(*remote, u.keys["bob"], "jobs", "list", env=srv.env).stdout
        assert re.search(rf"{job}  awaiting_approval  ops.wipe  alice  {ISO}", listed), listed
        assert u.approve("bob", job).status_code == 200
        out, err = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert out == "wiped db5\n"
    assert err.startswith(f"job {job} (ops.wipe): awaiting_approval (an approver runs: toolrun jobs approve {job})")
    # --status is checked as GET /jobs checks it.
    bad = toolrun_cli(*remote, u.keys["bob"], "jobs", "list", "--status", "pending", env=srv.env)
    assert bad.returncode == 2 and "--status must be one of awaiting_approval, running, succeeded" in bad.stderr
    # `jobs tail` shows stderr as well, and ends with the final state after the last output line.
    # The tool prints its second lines once the tail has shown the first ones (never on a timer that a loaded
    # machine outruns: a tail that starts after the job ended reads the whole record, stream by stream).
    gate = tmp_path / "noisy-gate"
    noisy = u.req("alice", "POST", "/tools/ops.noisy", {"gate": str(gate)}).json()["job"]
    lines: list[str] = []
    with subprocess.Popen(
        [sys.executable, "-m", "toolrun", *remote, u.keys["alice"], "jobs", "tail", noisy],
        env=srv.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as tail:
        try:
            assert tail.stdout is not None
            for line in tail.stdout:
                lines.append(line.rstrip("\n"))
                if lines[-1] == "err1":
                    gate.touch()
            assert tail.wait(30) == 0, lines
        finally:
            tail.kill()
    assert [line for line in lines if line.startswith(("out", "err"))] == ["out1", "err1", "out2", "err2"]
    assert lines[-1] == f"job {noisy} (ops.noisy): succeeded"


def test_local_jobs_list_and_show_need_no_catalog(server: tuple[ToolrunServer, JobUsers], tmp_path: Path) -> None:
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "nocat"}).json()["job"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**srv.env, "PWD": str(elsewhere)}
    listed = subprocess.run(
        [sys.executable, "-m", "toolrun", "jobs", "list"], env=env, cwd=elsewhere, capture_output=True, text=True
    )
    assert listed.returncode == 0 and job in listed.stdout, listed.stderr
    shown = subprocess.run(
        [sys.executable, "-m", "toolrun", "jobs", "show", job], env=env, cwd=elsewhere, capture_output=True, text=True
    )
    assert shown.returncode == 0 and "command: echo wiped nocat" in shown.stdout, shown.stderr
