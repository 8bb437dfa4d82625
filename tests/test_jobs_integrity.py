"""Jobs hold what was approved (issue 35): the digest binds the tool as it runs, odd text never breaks a view,
runners are told apart, secrets leave the record when the job ends, the audit trail says what happened to whom
by whom, and an approver's other catalog never expires a job.

Users as in test_jobs.py: alice (ops) calls, bob (oncall) approves, carol (ops) is a stranger, root is an admin.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.procs import pids_matching
from support.servers import Processes, ToolrunServer, toolrun_cli, wait_until
from toolrun.jobrecord import Job, digest
from toolrun.models import Example, Output, Param, ResourceLimits, Sandbox, ToolSpec

MARK = f"integritymark{uuid.uuid4().hex[:8]}"
CATALOG = f"""\
group: ops
tools:
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{{{ target | quote }}}}
    params:
      - {{name: target, type: str}}
      - {{name: token, type: str, secret: true, required: false}}
    approval: required
    approvers: [oncall]
    approval_timeout: 600
  - name: fetch
    description: Fetch a page.
    curl: -- {{{{ url | quote }}}}
    params:
      - {{name: url, type: str}}
    protocols: [https]
    approval: required
    approvers: [oncall]
  - name: slow
    exec: "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do echo line$i; sleep 0.4; done # {MARK}"
    async: true
  - name: quick
    exec: echo quick
    async: true
"""
USERS = {"alice": ["ops"], "bob": ["oncall"], "carol": ["ops"], "root": ["admin"]}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[ToolrunServer, JobUsers]]:
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_AUDIT_LOG": tmp_path / "audit.log"}))
        users = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        yield srv, users


def reload_with(srv: ToolrunServer, u: JobUsers, text: str) -> None:
    srv.catalog.write_text(text, encoding="utf-8")
    answer = u.req("root", "POST", "/admin/reload")
    assert answer.status_code == 200, answer.text


# -- 1. the digest binds the tool as it runs -------------------------------------------------------------

BASE_PARAM = Param(name="target", type="str", required=True)
BASE_TOOL = ToolSpec(
    key="ops.wipe",
    name="wipe",
    kind="exec",
    groups=("ops",),
    public=False,
    description="Wipe a target.",
    params=(BASE_PARAM,),
    return_type="str",
    example="toolrun call ops.wipe target=db1",
    source="echo wiped {{ target | quote }}",
    sandbox=Sandbox(network="none"),
    approval=True,
    approvers=("oncall",),
)
# One other value for every field of the records a tool is made of: a field added to one of them fails
# the test below until it is listed here, and so is either digested or named as wording in jobrecord.WORDING.
ALTERED: dict[type, dict[str, Any]] = {
    ToolSpec: {
        "key": "ops.erase",
        "name": "erase",
        "kind": "curl",
        "groups": ("ops", "dba"),
        "public": True,
        "description": "Erase a target.",
        "params": (),
        "return_type": "dict",
        "example": "toolrun call ops.wipe target=db2",
        "source": "echo erased {{ target | quote }}",
        "stdin": True,
        "inline": True,
        "timeout": 5.0,
        "cwd": "/srv",
        "env": {"MODE": "hard"},
        "env_passthrough": ("HOME",),
        "secret_env": ("MODE",),
        "env_file": "/srv/.env",
        "limits": ResourceLimits(cpu=1),
        "user": "nobody",
        "examples": (Example(args={"target": "x"}),),
        "file": "/elsewhere/tools.yaml",
        "line": 7,
        "col": 3,
        "annotations": {"destructive": True},
        "keywords": ("erase",),
        "option_params": (("target", True),),
        "sandbox": None,
        "approval": False,
        "approvers": ("dba",),
        "approval_timeout": 60.0,
        "run_async": True,
        "notify": ("https://hooks.example/ops",),
        "output": Output("json", {"type": "object"}),
        "mcp_name": "erase_it",
    },
    Param: {
        "name": "host",
        "type": "int",
        "required": False,
        "default": "db0",
        "description": "Which one.",
        "example": "db9",
        "enum": ("db1",),
        "pattern": "^db",
        "min": 1.0,
        "max": 9.0,
        "secret": True,
    },
    Sandbox: {
        "profile": "online",
        "network": "host",
        "readable": ("/data",),
        "writable": ("/tmp/x",),
        "tmp_size": 1024,
        "enabled": False,
    },
    ResourceLimits: {
        "cpu": 2,
        "memory": 1 << 20,
        "open_files": 64,
        "file_size": 1024,
        "processes": 8,
        "output": 1024,
    },
}


def _tool_with(cls: type, name: str, value: Any) -> ToolSpec:
    if cls is ToolSpec:
        return dataclasses.replace(BASE_TOOL, **{name: value})
    if cls is Param:
        return dataclasses.replace(BASE_TOOL, params=(dataclasses.replace(BASE_PARAM, **{name: value}),))
    if cls is Sandbox:
        assert BASE_TOOL.sandbox is not None
        return dataclasses.replace(BASE_TOOL, sandbox=dataclasses.replace(BASE_TOOL.sandbox, **{name: value}))
    return dataclasses.replace(BASE_TOOL, limits=dataclasses.replace(BASE_TOOL.limits, **{name: value}))


def test_every_field_of_a_tool_is_digested_unless_it_is_wording() -> None:
    from toolrun.jobrecord import WORDING

    values = {"target": "db1"}
    before = digest(BASE_TOOL, values)
    for cls, altered in ALTERED.items():
        names = {f.name for f in dataclasses.fields(cls)}
        assert names == set(altered), (
            f"{cls.__name__} fields changed ({sorted(names ^ set(altered))}): list each in ALTERED here, and name it "
            "in jobrecord.WORDING only if it is wording that never changes what runs"
        )
        wording = WORDING.get(cls.__name__, frozenset())
        for name, value in altered.items():
            changed = digest(_tool_with(cls, name, value), values) != before
            assert changed == (name not in wording), f"{cls.__name__}.{name}: digested={changed}"
    assert digest(BASE_TOOL, {"target": "db2"}) != before


def test_a_reload_that_turns_the_sandbox_off_or_widens_curls_protocols_expires_pending_jobs(
    server: tuple[ToolrunServer, JobUsers],
) -> None:
    from support.binaries import require_binary

    require_binary("bwrap")
    srv, u = server
    sandboxed = CATALOG.replace("    approval_timeout: 600\n", "    approval_timeout: 600\n    sandbox: true\n")
    reload_with(srv, u, sandboxed)
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    fetch = u.req("alice", "POST", "/tools/ops.fetch", {"url": "https://example.invalid/"}).json()["job"]
    assert "sandbox" in json.dumps(u.view("bob", job).json()["plan"])
    # The same command, parameters and approvers: only the jail and curl's protocols differ.
    reload_with(srv, u, sandboxed.replace("sandbox: true", "sandbox: false").replace("[https]", "[https, ftp]"))
    for pending in (job, fetch):
        answer = u.approve("bob", pending)
        assert answer.status_code == 409, answer.text
        view = u.until("alice", pending, "expired", timeout=5)
        assert "changed" in view["error"]
    # Wording is not what runs: a new description leaves a pending job valid.
    kept = u.req("alice", "POST", "/tools/ops.fetch", {"url": "https://example.invalid/"}).json()["job"]
    current = srv.catalog.read_text(encoding="utf-8")
    reload_with(srv, u, current.replace("Fetch a page.", "Fetch one page."))
    assert u.view("alice", kept).json()["status"] == "awaiting_approval"


# -- 10. only a change of the tool itself expires a job ---------------------------------------------------


def test_a_local_approve_with_another_catalog_leaves_the_job_pending(
    server: tuple[ToolrunServer, JobUsers], tmp_path: Path
) -> None:
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # ./tools.yaml of another project: the same key, another command; then one without the tool at all.
    write_catalog(elsewhere, CATALOG.replace("echo wiped", "echo other"))
    write_catalog(elsewhere, "group: misc\ntools:\n  - name: hi\n    exec: echo hi\n", "bare.yaml")
    for catalog in ("tools.yaml", "bare.yaml"):
        done = toolrun_cli("jobs", "approve", job, "-c", str(elsewhere / catalog), env=srv.env)
        assert done.returncode != 0
        assert "still awaits its decision" in done.stderr, done.stderr
        assert u.view("alice", job).json()["status"] == "awaiting_approval"
    # Where the job's catalog is loaded, it is approved and runs as requested.
    done = toolrun_cli("jobs", "approve", job, "-c", str(srv.catalog), env=srv.env)
    assert done.returncode == 0, done.stderr
    assert u.until("alice", job, "succeeded")["result"]["body"] == "wiped db1\n"
    # The same file, resolved by a process whose settings differ (the server's environment is not the operator's
    # shell's): the tool as the local process would run it differs, so it refuses, and the job keeps waiting.
    other = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db2"}).json()["job"]
    require_binary("bwrap")  # the local process resolves a sandbox
    shell = {**srv.env, "SVC_SANDBOX_DEFAULT": "on"}
    done = toolrun_cli("jobs", "approve", other, "-c", str(srv.catalog), env=shell)
    assert done.returncode != 0 and "still awaits its decision" in done.stderr, done.stderr
    assert u.view("alice", other).json()["status"] == "awaiting_approval"
    # A change of the tool in its own file: the local approve runs nothing, and the server expires the job.
    srv.catalog.write_text(CATALOG.replace("echo wiped", "echo erased"), encoding="utf-8")
    done = toolrun_cli("jobs", "approve", other, "-c", str(srv.catalog), env=srv.env)
    assert done.returncode != 0, done.stderr
    view = u.until("alice", other, "expired", timeout=10)
    assert "changed" in view["error"] and view.get("result") is None


# -- 8. secret parameters leave the record when the job ends ----------------------------------------------


def _state_bytes(home: Path) -> bytes:
    """Every byte of the shared state files under a server's home (state.db, its log and index)."""
    return b"".join(p.read_bytes() for p in sorted(home.rglob("state.db*")) if p.is_file())


def test_secret_parameters_are_scrubbed_from_the_state_file_when_the_job_ends(
    server: tuple[ToolrunServer, JobUsers],
) -> None:
    srv, u = server
    secrets = [f"s3cr3t-{uuid.uuid4().hex}" for _ in range(3)]
    jobs = [
        u.req("alice", "POST", "/tools/ops.wipe", {"target": f"db{i}", "token": s}).json()["job"]
        for i, s in enumerate(secrets)
    ]
    assert all(s.encode() in _state_bytes(srv.home) for s in secrets)  # kept while the job may still run
    assert u.approve("bob", jobs[0]).status_code == 200
    assert u.until("alice", jobs[0], "succeeded")["result"]["body"] == "wiped db0\n"
    assert u.deny("bob", jobs[1], "no").status_code == 200
    assert u.cancel("alice", jobs[2]).status_code == 200
    state = _state_bytes(srv.home)
    assert b"wiped db0" in state  # the records are there, with their results
    for secret in secrets:
        assert secret.encode() not in state
    assert u.view("alice", jobs[0]).json()["args"] == {"target": "db0", "token": "[secret]"}


def test_secret_parameters_are_scrubbed_from_redis_when_the_job_ends(tmp_path: Path) -> None:
    from support.binaries import require_binary
    from support.servers import RedisServer

    binary = require_binary("redis-server")
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        redis = procs.add(RedisServer(tmp_path / "redis", binary)).start()
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_REDIS_URL": redis.url}))
        u = procs.enter_context(JobUsers(srv, USERS))
        srv.start()
        secret = f"s3cr3t-{uuid.uuid4().hex}"
        job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1", "token": secret}).json()["job"]
        assert secret.encode() in _redis_dump(redis)
        assert u.approve("bob", job).status_code == 200
        u.until("alice", job, "succeeded")
        assert b"wiped db1" in _redis_dump(redis)
        assert secret.encode() not in _redis_dump(redis)


def _redis_dump(redis: Any) -> bytes:
    """Every string and hash value in the Redis database, as raw replies."""
    keys = [k for k in redis.command("KEYS", "*").split(b"\r\n") if k and k[:1] not in b"*$"]
    return b"".join(redis.command("HGETALL", k.decode()) + redis.command("GET", k.decode()) for k in keys)


# -- 9. the audit trail says what happened to whom, by whom ------------------------------------------------


def _trail(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_cancel_that_loses_the_race_is_logged_as_asked_and_the_run_as_it_ended(tmp_path: Path) -> None:
    """A runs the job; B (another server on the same state) is asked to cancel it after the tool already
    decided to end well (it lasts 0.7 s; A reads a cancel request at its heartbeat, each second): the job
    succeeds, and the trail says so."""
    quick_end = CATALOG + "  - name: brief\n    exec: sleep 0.7; echo brief done\n    async: true\n"
    catalog = write_catalog(tmp_path, quick_end)
    trail = tmp_path / "audit.log"
    home = tmp_path / "home"
    with Processes() as procs:
        a = procs.add(ToolrunServer(tmp_path / "a", catalog, {"SVC_AUDIT_LOG": trail}, home=home))
        b = procs.add(ToolrunServer(tmp_path / "b", catalog, {"SVC_AUDIT_LOG": trail}, home=home))
        ua = procs.enter_context(JobUsers(a, USERS))
        ub = procs.enter_context(ua.on(b))
        a.start()
        b.start()
        ended: dict[str, str] = {}
        for _ in range(3):
            job = ua.req("alice", "POST", "/tools/ops.brief").json()["job"]
            cancel = ub.req("root", "POST", f"/jobs/{job}/cancel", {"reason": "stop it"})
            assert cancel.status_code in (200, 409), cancel.text
            ended[job] = ua.until("alice", job, "succeeded", "cancelled")["status"]
    records = _trail(trail)
    for job, state in ended.items():
        lines = [r for r in records if r.get("job") == job and r["message"] != "tool call"]
        events = [r["event"] for r in lines]
        assert events[0] == "requested" and lines[0]["by"] == "alice"
        assert events[-1] == state, events  # the last word is how it really ended
        assert events.count("cancelled") == (state == "cancelled"), events
        for line in lines:
            assert line["user"] == "alice" and line["by"], line  # to whom, by whom
        asked = [r for r in lines if r["event"] == "cancel_requested"]
        assert all(r["by"] == "root" and r["reason"] == "stop it" for r in asked)
        if state == "cancelled":
            assert lines[-1]["by"] == "root"
    assert "succeeded" in ended.values(), ended  # at least once, the cancel came too late


def test_run_records_name_their_job_so_equal_request_ids_never_merge(
    server: tuple[ToolrunServer, JobUsers], tmp_path: Path
) -> None:
    _srv, u = server
    jobs = {
        who: u.req(who, "POST", "/tools/ops.quick", **{"X-Request-ID": "same-id-1"}).json()["job"]
        for who in ("alice", "carol")
    }
    for who, job in jobs.items():
        u.until(who, job, "succeeded")
    records = _trail(tmp_path / "audit.log")
    ran = {r["user"]: r for r in records if r["message"] == "tool call" and r["tool"] == "ops.quick"}
    assert {who: r["job"] for who, r in ran.items()} == jobs
    assert {r["request_id"] for r in ran.values()} == {"same-id-1"}
    finished = {r["user"]: r for r in records if r.get("event") == "succeeded"}
    assert {who: (r["job"], r["by"]) for who, r in finished.items()} == {w: (j, "toolrun") for w, j in jobs.items()}


# -- 2. text that cannot be encoded never reaches a record, and one bad record never breaks a view ----------

LONE = '{"reason": "\\ud800"}'  # valid JSON, but no UTF-8 can carry it


def test_a_lone_surrogate_is_refused_where_text_is_stored(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    headers = {"X-API-Key": u.keys["bob"], "Content-Type": "application/json"}
    for action, who in (("cancel", "alice"), ("deny", "bob"), ("approve", "bob")):
        headers["X-API-Key"] = u.keys[who]
        answer = u.client.post(f"{srv.url}/jobs/{job}/{action}", headers=headers, content=LONE)
        assert answer.status_code == 400, answer.text
        assert "`reason`" in answer.json()["error"]
    bad_arg = '{"target": "db\\udfff"}'
    headers["X-API-Key"] = u.keys["alice"]
    answer = u.client.post(f"{srv.url}/tools/ops.wipe", headers=headers, content=bad_arg)
    assert answer.status_code == 400, answer.text
    assert "target" in answer.text, answer.text
    # Nothing was stored: every view still answers, the job still waits.
    assert [j["job"] for j in u.req("bob", "GET", "/jobs").json()] == [job]
    assert u.view("alice", job).json()["status"] == "awaiting_approval"
    # The same from the command line (an argument that is not UTF-8 arrives as a lone surrogate).
    import subprocess
    import sys

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolrun",
            "jobs",
            "deny",
            job,
            "-r",
            b"\xff".decode("utf-8", "surrogateescape"),
            "-c",
            str(srv.catalog),
        ],
        env=srv.env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and "`reason`" in done.stderr, done.stderr
    assert u.view("alice", job).json()["status"] == "awaiting_approval"


def _plant(home: Path, record: dict[str, Any]) -> None:
    """A record written straight into the state file, as an older version or a bug might have left it."""
    [db] = list(home.rglob("state.db"))
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO jobs(id, v, created, data) VALUES (?, 1, ?, ?)",
            (record["id"], record.get("created", 0), json.dumps(record)),
        )
        # Columns a store keeps beside the record (an index of states, requesters...), filled from it as it would.
        for column in [row[1] for row in conn.execute("PRAGMA table_info(jobs)")]:
            if column not in ("id", "v", "created", "data"):
                path = "$.requester.person" if column == "requester" else f"$.{column}"
                conn.execute(f"UPDATE jobs SET {column} = json_extract(data, ?) WHERE id = ?", (path, record["id"]))


def test_one_bad_record_never_breaks_a_view(server: tuple[ToolrunServer, JobUsers]) -> None:
    srv, u = server
    good = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    record = u.view("alice", good).json()
    poisoned = f"poison{uuid.uuid4().hex[:10]}"
    [db] = list(srv.home.rglob("state.db"))
    with sqlite3.connect(db) as conn:
        data = json.loads(conn.execute("SELECT data FROM jobs WHERE id=?", (good,)).fetchone()[0])
    bad = {**data, "id": poisoned, "reason": "\ud800", "error": "x\udc80y", "created": data["created"] + 1}
    _plant(srv.home, bad)
    _plant(srv.home, {"id": f"broken{uuid.uuid4().hex[:10]}", "created": data["created"] + 2, "state": "running"})
    for who in ("alice", "bob", "root"):
        listed = u.req(who, "GET", "/jobs")
        assert listed.status_code == 200, listed.text
        assert [j["job"] for j in listed.json()] == [poisoned, good]
    one = u.view("bob", poisoned)
    assert one.status_code == 200, one.text
    assert one.json()["reason"] == "\ufffd" and one.json()["error"] == "x\ufffdy"
    assert u.view("alice", good).json() == record
    # The events stream of the poisoned job, and the local `toolrun jobs list` (a real process).
    with u.client.stream("GET", f"{srv.url}/jobs/{poisoned}/events", headers={"X-API-Key": u.keys["bob"]}) as s:
        assert s.status_code == 200
        first = next(line for line in s.iter_lines() if line.startswith("data: "))
    assert json.loads(first[6:])["job"] == poisoned
    done = toolrun_cli("jobs", "list", "-c", str(srv.catalog), env=srv.env)
    assert done.returncode == 0, done.stderr
    assert poisoned in done.stdout and good in done.stdout
    assert metrics_ok(u, srv)


def metrics_ok(u: JobUsers, srv: ToolrunServer) -> bool:
    answer = u.client.get(srv.url + "/metrics")
    return answer.status_code == 200 and 'svc_jobs{state="awaiting_approval"} 2' in answer.text


# -- 3. runners are told apart, and a runner whose heartbeat is refused stops its tool ----------------------


class PidOneServer(ToolrunServer):
    """`toolrun serve` as PID 1 of a PID namespace of its own (`unshare --pid --fork`), on this host: what two
    containers sharing the host's network (one hostname) look like to each other."""

    def launch(self) -> PidOneServer:
        unshare = require_binary("unshare")
        argv = [unshare, "--pid", "--fork", "--kill-child", sys.executable, "-m", "toolrun", "serve"]
        argv += ["-c", str(self.catalog), "--host", "127.0.0.1", "--port", str(self.port)]
        self.spawn(argv, self.env)
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        if self.alive():  # unshare waits for its child: the signal goes to the whole group, server included
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
        return super().stop(sig, timeout)


def _server_pid(srv: ToolrunServer, u: JobUsers) -> int:
    """The pid the server sees for itself (the `worker` of a job it ran is not exposed: ask its own process)."""
    [child] = [int(p) for p in Path(f"/proc/{srv.pid}/task/{srv.pid}/children").read_text().split()]
    status = Path(f"/proc/{child}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("NSpid:")).split()[-1])


def test_replicas_that_are_each_pid_1_on_one_host_never_take_each_others_jobs(tmp_path: Path) -> None:
    import redis as redis_client

    from support.servers import RedisServer, start_all

    if os.geteuid() != 0 and os.environ.get("CI") != "true":
        pytest.skip("PID namespaces need root here (unshare --pid)")
    binary = require_binary("redis-server")
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        redis = procs.add(RedisServer(tmp_path / "redis", binary)).start()
        settings = {"SVC_REDIS_URL": redis.url}
        a = procs.add(PidOneServer(tmp_path / "a", catalog, settings))
        b = procs.add(PidOneServer(tmp_path / "b", catalog, settings))
        ua = procs.enter_context(JobUsers(a, USERS))
        ub = procs.enter_context(ua.on(b))
        start_all(a, b)
        assert _server_pid(a, ua) == _server_pid(b, ub) == 1
        # A job runs on B for 8 s: A's sweep (every 5 s) must not take B's pid 1 for its own and fail it.
        job = ub.req("alice", "POST", "/tools/ops.slow").json()["job"]
        done = ua.until("alice", job, "succeeded", "failed", timeout=30)
        assert done["status"] == "succeeded", done
        assert done["result"]["body"].count("line") == 20
        # Another process declares B's next job lost (as a sweep that judged its heartbeat stale would):
        # B's next heartbeat is refused, and B stops the tool instead of running it unsupervised.
        job = ub.req("alice", "POST", "/tools/ops.slow").json()["job"]
        wait_until(lambda: pids_matching(MARK), 10, "the tool's process")
        store = redis_client.Redis.from_url(redis.url)
        name = f"toolrun:job:{job}"
        record = json.loads(store.hget(name, "data"))
        record.update(state="failed", error="declared lost by a test", finished=time.time())
        store.hset(name, mapping={"v": str(int(store.hget(name, "v")) + 1), "data": json.dumps(record)})
        wait_until(lambda: not pids_matching(MARK), 4, "the tool stopped by its runner")
        wait_until(lambda: "no longer this runner's" in b.log(), 5, "B's word that it stopped the tool")
        view = ua.view("alice", job).json()
        assert (view["status"], view["error"]) == ("failed", "declared lost by a test")
        store.close()


# -- attacks on the above ---------------------------------------------------------------------------------


def test_a_reason_with_control_characters_is_refused(server: tuple[ToolrunServer, JobUsers]) -> None:
    """An approver's reason reaches the requester's terminal (`toolrun call` prints the decision): no escape codes."""
    _srv, u = server
    job = u.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
    for reason in ("\x1b]0;pwned\x07", "ok\rAPPROVED", "\x9b31m"):
        answer = u.deny("bob", job, reason)
        assert answer.status_code == 400, answer.text
        assert "`reason`" in answer.text
    assert u.deny("bob", job, "two lines\n\tare fine").status_code == 200


def test_a_reload_between_the_approval_and_the_run_never_runs_the_new_tool(tmp_path: Path) -> None:
    """The approval is checked, then written to the state, then the run starts: a reload that lands while the
    approval is written must not make the run take the reloaded command."""
    import asyncio

    from toolrun import catalog as catalogs
    from toolrun.jobs import Jobs, memory_jobs
    from toolrun.models import Identity
    from toolrun.service import ToolService

    marker = tmp_path / "reloaded-ran"
    path = write_catalog(tmp_path, CATALOG)
    service = ToolService(catalogs.load([path]))
    store = memory_jobs()
    jobs = Jobs(service, store)
    path.write_text(CATALOG.replace("echo wiped", f"touch {marker}; echo erased"), encoding="utf-8")
    reloaded = catalogs.load([path])
    real_swap = store.swap

    async def swap_then_reload(job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        done = await real_swap(job_id, version, record, keep)
        if record["state"] == "running" and service.registry.tools["ops.wipe"].source.startswith("echo wiped"):
            service.swap(reloaded)  # the reload thread, in the window between the check and the run
        return done

    store.swap = swap_then_reload  # type: ignore[method-assign]
    alice = Identity(username="alice", groups=frozenset({"ops"}), anonymous=False, source="key", person="user:alice")
    bob = Identity(username="bob", groups=frozenset({"oncall"}), anonymous=False, source="key", person="user:bob")

    async def scenario() -> Job:
        job = await jobs.submit(alice, "ops.wipe", {"target": "db1"})
        await jobs.approve(bob, job.id)
        return await jobs.wait(alice, job.id, 10)

    ended = asyncio.run(scenario())
    assert not marker.exists()
    assert ended.state == "failed" and "changed between its approval and its run" in (ended.error or ""), ended


def test_approve_and_cancel_at_once_leave_one_story(server: tuple[ToolrunServer, JobUsers], tmp_path: Path) -> None:
    """The requester withdraws while the approver approves, a dozen times at once: every answer is 200 or 409 (a
    409 names the state the job is really in), and the trail ends as the job did."""
    from concurrent.futures import ThreadPoolExecutor

    _srv, u = server
    jobs = [u.req("alice", "POST", "/tools/ops.wipe", {"target": f"db{i}"}).json()["job"] for i in range(12)]
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda pair: pair[1](pair[0]),
                [(job, act) for job in jobs for act in (lambda j: u.cancel("alice", j), lambda j: u.approve("bob", j))],
            )
        )
    finals = [u.until("alice", job, "succeeded", "cancelled", "failed") for job in jobs]
    records = _trail(tmp_path / "audit.log")
    for i, job in enumerate(jobs):
        cancel, approve, final = answers[2 * i], answers[2 * i + 1], finals[i]
        assert {cancel.status_code, approve.status_code} <= {200, 409}, (cancel.text, approve.text)
        for answer in (cancel, approve):
            if answer.status_code == 409:
                assert "awaiting_approval" not in answer.text and "running" not in answer.text, answer.text
        if approve.status_code == 409:
            assert cancel.status_code == 200 and final["status"] == "cancelled"
        events = [r["event"] for r in records if r.get("job") == job and r["message"] != "tool call"]
        # A cancel asked while the run ends is logged by the worker that took it, maybe after the runner's line
        # (two processes append to one trail): the story is told by the last ending, not by the last line.
        endings = [e for e in events if e != "cancel_requested"]
        assert endings[-1] == final["status"], events
        assert "cancelled" not in events or final["status"] == "cancelled", events
