"""One identity per person, and nothing runs unattended (issue 35, items 4 and 6), on a real `toolrun serve`
with a real OpenID issuer (tests/fixtures/oidc_issuer.py) and real `toolrun call` processes.

Persons: API-key alice (ops), bob (oncall, who also calls), admin1 (admin), and an API user named as the
local operator; tokens with `sub` alice, Admin1, a Cyrillic look-alike, and a subject `oauth_users` maps to alice.
"""

from __future__ import annotations

import getpass
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.jobs import JobUsers, approval_catalog, decide_at_once, mcp_round
from support.servers import Processes, ToolrunServer, toolrun_cli, wait_until

pytest.importorskip("joserfc")
from test_oauth import AUDIENCE, Issuer, bearer

pytestmark = pytest.mark.timeout(240)

CATALOG = approval_catalog()
OPERATOR = getpass.getuser()
MAPPED = "0b6c3e5e-7f3a|alice"  # an issuer's opaque subject, mapped to the key store's alice
USERS = {"alice": ["ops"], "bob": ["oncall", "ops"], "admin1": ["admin"], OPERATOR: ["ops"]}


@dataclass
class World:
    server: ToolrunServer
    users: JobUsers
    issuer: Issuer
    audit: Path

    def token(self, sub: str, *groups: str) -> dict[str, str]:
        return bearer(self.issuer.mint(sub=sub, groups=list(groups)))

    def as_token(self, sub: str, groups: list[str], method: str, path: str, body: Any = None) -> httpx.Response:
        headers = self.token(sub, *groups)
        if body is not None:
            headers["Content-Type"] = "application/json"
            return httpx.request(method, self.server.url + path, headers=headers, content=json.dumps(body))
        return httpx.request(method, self.server.url + path, headers=headers)

    def ask(self, who: str, target: str) -> str:
        answer = self.users.req(who, "POST", "/tools/ops.wipe", {"target": target})
        assert answer.status_code == 202, answer.text
        return str(answer.json()["job"])

    def audit_lines(self, job: str) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in self.audit.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [x for x in lines if x.get("job") == job and "event" in x]  # a run's `tool call` line carries `job` too


ROUND = 4.0  # seconds of one MCP approval round on this file's server (mcp_approval_round)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("people")
    (base / "tools.yaml").write_text(CATALOG, encoding="utf-8")
    audit = base / "audit.log"
    with Processes() as procs:
        issuer = procs.add(Issuer(base / "issuer"))
        issuer.start()
        settings = {
            "SVC_OAUTH_ISSUER": issuer.url,
            "SVC_OAUTH_AUDIENCE": AUDIENCE,
            "SVC_OAUTH_USERS": f"{MAPPED}=alice",
            "SVC_AUDIT_LOG": str(audit),
            "SVC_WORKERS": 1,
            "SVC_MCP_APPROVAL_ROUND": ROUND,  # an MCP round holds a call 4 s, not 20: a late approval comes sooner
        }
        server = procs.add(ToolrunServer(base / "srv", base / "tools.yaml", settings))
        users = procs.enter_context(JobUsers(server, USERS))
        server.start()
        yield World(server, users, issuer, audit)


# -- item 6: the requester is a person, not a string ------------------------------------------------------


def test_a_token_with_the_same_name_is_not_the_api_key_user(world: World) -> None:
    job = world.ask("alice", "p1")
    for path in (f"/jobs/{job}", f"/jobs/{job}/events"):
        assert world.as_token("alice", ["ops"], "GET", path).status_code == 404
    assert world.as_token("alice", ["ops"], "POST", f"/jobs/{job}/cancel").status_code == 404
    listed = world.as_token("alice", ["ops"], "GET", "/jobs").json()
    assert job not in [j["job"] for j in listed]
    assert world.users.view("alice", job).json()["status"] == "awaiting_approval"
    # A token alice asks for its own job: API-key alice does not see it either.
    answer = world.as_token("alice", ["ops"], "POST", "/tools/ops.wipe", {"target": "p1t"})
    assert answer.status_code == 202, answer.text
    theirs = answer.json()["job"]
    assert world.users.view("alice", theirs).status_code == 404
    assert world.as_token("alice", ["ops"], "GET", f"/jobs/{theirs}").json()["requester_source"] == "token"


def test_a_look_alike_name_never_decides_the_requesters_call(world: World) -> None:
    job = world.ask("admin1", "p2")
    for sub in ("Admin1", "ADMIN1"):  # an admin token whose name differs from the requester's only by case
        view = world.as_token(sub, ["admin"], "GET", f"/jobs/{job}").json()
        assert view["can_decide"] is False
        for action in ("approve", "deny"):
            refused = world.as_token(sub, ["admin"], "POST", f"/jobs/{job}/{action}")
            assert refused.status_code == 403, (sub, action, refused.text)
    # A subject that breaks the user name rules (a Cyrillic "а") is not an identity at all.
    cyrillic = world.as_token("\u0430dmin1", ["admin"], "GET", "/whoami")
    assert cyrillic.status_code == 401
    assert "not a valid user name" in cyrillic.headers["www-authenticate"]
    assert world.users.view("admin1", job).json()["status"] == "awaiting_approval"
    # Another admin (a token of another name) decides it.
    assert world.as_token("ops-lead", ["admin"], "POST", f"/jobs/{job}/approve").status_code == 200


def test_an_api_user_named_as_the_local_operator_is_not_the_operator(world: World) -> None:
    env = world.server.env
    waiting = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "toolrun",
            "call",
            "ops.wipe",
            "target=p3",
            "--no-wait",
            "-c",
            str(world.server.catalog),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    job = out.strip()
    assert world.users.view(OPERATOR, job).status_code == 404  # API user "root" is not the operator "root"
    assert world.users.cancel(OPERATOR, job).status_code == 404
    shown = json.loads(toolrun_cli("jobs", "show", job, "--json", "-c", str(world.server.catalog), env=env).stdout)
    assert shown["requester"] == OPERATOR and shown["requester_source"] == "operator"


def test_a_requester_who_is_an_approver_may_withdraw_but_never_decide(world: World) -> None:
    job = world.ask("bob", "p4")
    assert world.users.view("bob", job).json()["can_decide"] is False
    for action in ("deny", "approve"):
        refused = world.users.decide("bob", job, action)
        assert refused.status_code == 403 and "withdraw" in refused.json()["error"], refused.text
    withdrawn = world.users.cancel("bob", job)
    assert withdrawn.status_code == 200 and withdrawn.json()["status"] == "cancelled"


def test_oauth_users_maps_a_subject_to_the_api_key_user_one_person(world: World) -> None:
    job = world.ask("alice", "p5")
    view = world.as_token(MAPPED, ["ops", "oncall"], "GET", f"/jobs/{job}")
    assert view.status_code == 200 and view.json()["can_decide"] is False, view.text
    assert world.as_token(MAPPED, ["oncall"], "POST", f"/jobs/{job}/approve").status_code == 403
    whoami = world.as_token(MAPPED, ["ops"], "GET", "/whoami").json()
    assert whoami["username"] == "alice", whoami
    assert world.as_token(MAPPED, ["ops"], "POST", f"/jobs/{job}/cancel").json()["status"] == "cancelled"


# -- item 4: a waiting client that goes away withdraws its request -----------------------------------------


def waiting_call(world: World, target: str, *, remote: str | None = None) -> subprocess.Popen[str]:
    """A real `toolrun call ops.wipe` that waits for the decision: local (the operator), or `--url` as `remote`."""
    where = ["--url", world.server.url, "--api-key", world.users.keys[remote]] if remote else []
    local = [] if remote else ["-c", str(world.server.catalog)]
    return subprocess.Popen(
        [sys.executable, "-m", "toolrun", *where, "call", "ops.wipe", f"target={target}", *local],
        env=world.server.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def pending_job(world: World, target: str) -> str:
    def find() -> str | None:
        for job in world.users.pending("bob"):
            if job["args"] == {"target": target}:
                return str(job["job"])
        return None

    return wait_until(find, 20, f"the job of target {target}", interval=0.1)


def assert_withdrawn(world: World, job: str, timeout: float = 5, audited: bool = True) -> None:
    """The job is cancelled as withdrawn, cannot be approved, and (when the server withdrew it, or a door of
    the server's) the audit trail says so."""
    view = world.users.until("bob", job, "cancelled", timeout=timeout)
    assert view["reason"].startswith("withdrawn: the requester stopped waiting"), view
    refused = world.users.approve("bob", job)
    assert refused.status_code == 409, refused.text  # nothing runs after its requester left
    lines = [x for x in world.audit_lines(job) if x["event"] == "cancelled"]
    assert len(lines) == int(audited)
    assert not audited or lines[0]["reason"].startswith("withdrawn"), world.audit_lines(job)


@pytest.mark.parametrize(
    ("remote", "signum", "code"),
    [
        (None, signal.SIGINT, 130),
        ("alice", signal.SIGINT, 130),
        (None, signal.SIGTERM, 143),
        ("alice", signal.SIGTERM, 143),
        ("alice", signal.SIGHUP, 129),
    ],
    ids=["local-ctrl-c", "url-ctrl-c", "local-sigterm", "url-sigterm", "url-sighup"],
)
def test_a_waiting_call_stopped_by_a_signal_withdraws_its_request_and_says_so(
    world: World, remote: str | None, signum: int, code: int
) -> None:
    target = f"sig-{remote or 'local'}-{signum}"
    waiting = waiting_call(world, target, remote=remote)
    try:
        job = pending_job(world, target)
        time.sleep(0.6)  # it polls (and holds) twice a second
        os.kill(waiting.pid, signum)
        _, err = waiting.communicate(timeout=20)
    finally:
        if waiting.poll() is None:
            os.killpg(waiting.pid, signal.SIGKILL)
            waiting.communicate()  # reaped, its pipes closed: no zombie left to a later test of this worker
    assert waiting.returncode == code, err
    assert "stopped waiting" in err and "cancelled" in err and "withdrawn" in err, err
    assert_withdrawn(world, job, audited=remote is not None)  # a local call audits only with --audit


def test_a_killed_waiting_call_lets_its_hold_lapse_and_callers_that_chose_not_to_wait_keep_their_jobs(
    world: World,
) -> None:
    kept = world.ask("alice", "rest-202")  # a REST 202: the caller chose not to wait
    remote = ["--url", world.server.url, "--api-key", world.users.keys["alice"]]
    no_wait = toolrun_cli(*remote, "call", "ops.wipe", "target=no-wait", "--no-wait", env=world.server.env)
    assert no_wait.returncode == 0, no_wait.stderr
    killed = {
        name: waiting_call(world, f"kill-{name}", remote=remote) for name, remote in (("url", "alice"), ("local", None))
    }
    jobs = {name: pending_job(world, f"kill-{name}") for name in killed}
    for proc in killed.values():
        os.killpg(proc.pid, signal.SIGKILL)  # nothing can be caught: the hold (10 s) lapses
        proc.communicate(timeout=10)
    for job in jobs.values():
        assert_withdrawn(world, job, timeout=30)
    for job in (kept, no_wait.stdout.strip()):
        assert world.users.view("alice", job).json()["status"] == "awaiting_approval"
        assert world.users.approve("bob", job).status_code == 200


def test_a_revoked_key_or_a_deleted_user_withdraws_its_pending_requests(world: World, tmp_path: Path) -> None:
    from support.keys import create_key

    env = world.server.env
    keys = {name: create_key(env, name, "ops") for name in ("dora", "eve")}
    with JobUsers(world.server, keys=keys) as others:
        jobs = {}
        for name in keys:
            answer = others.req(name, "POST", "/tools/ops.wipe", {"target": f"gone-{name}"})
            assert answer.status_code == 202, answer.text
            jobs[name] = answer.json()["job"]
    prefix = keys["dora"].split("_")[1]
    assert toolrun_cli("keys", "revoke", prefix, env=env).returncode == 0
    deleted = toolrun_cli("users", "delete", "eve", env=env)
    assert deleted.returncode == 0, deleted.stderr
    for name, why in (("dora", "revoked"), ("eve", "deleted")):
        refused = world.users.approve("bob", jobs[name])
        assert refused.status_code == 409 and why in refused.text, refused.text
        view = world.users.view("bob", jobs[name]).json()
        assert view["status"] == "cancelled" and why in view["reason"], view


# -- item 5: MCP 2026-07-28 clients wait for real -------------------------------------------------------------


async def _sdk_call(world: World, target: str, callback: Any = None) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"X-API-Key": world.users.keys["alice"]}, timeout=60) as http,
        Client(
            streamable_http_client(world.server.url + "/mcp", http_client=http),
            mode="2026-07-28",
            elicitation_callback=callback,
        ) as client,
    ):
        return await client.call_tool("execute", {"key": "ops.wipe", "arguments": {"target": target}})


def _approve_later(world: World, target: str, seconds: float) -> threading.Thread:
    def approve() -> None:
        job = pending_job(world, target)
        time.sleep(seconds)
        assert world.users.approve("bob", job).status_code == 200

    thread = threading.Thread(target=approve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("elicits", [False, True], ids=["state-only", "elicitation"])
def test_an_sdk_client_waits_through_an_approval_that_comes_after_a_held_round(world: World, elicits: bool) -> None:
    """The decision comes one and a half rounds after the call: the client is answered `input_required` (and asked
    again) at least once, retries, and gets the result."""
    import anyio
    import mcp_types as types

    from support.mcp import text_of

    target = f"mcp-late-{elicits}"
    asked: list[str] = []

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept")

    late = 1.5 * ROUND
    approver = _approve_later(world, target, late)
    started = time.monotonic()
    result = anyio.run(_sdk_call, world, target, callback if elicits else None)
    took = time.monotonic() - started
    approver.join(5)
    assert not result.is_error, text_of(result)
    assert text_of(result) == f"wiped {target}\n" and took >= late
    if elicits:  # asked at once, then after every held round at most
        assert 1 <= len(asked) <= 3 and "needs approval" in asked[0], asked
    assert "Elicitation not supported" not in world.server.log()


def test_an_mcp_client_that_gives_up_withdraws_its_request(world: World) -> None:
    import anyio

    target = "mcp-gives-up"
    found: list[str] = []

    async def impatient() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(_sdk_call, world, target)
            found.append(await anyio.to_thread.run_sync(pending_job, world, target))
            await anyio.sleep(1)
            group.cancel_scope.cancel()  # the client gives up while its round is held

    anyio.run(impatient)
    assert_withdrawn(world, found[0], timeout=10)  # at once: its connection was lost mid-round


# -- a hostile caller's tries at the new doors ------------------------------------------------------------------


def test_only_the_requester_holds_or_withdraws_its_call(world: World) -> None:
    job = world.ask("alice", "h1")
    for action in ("hold", "withdraw"):
        assert world.users.decide("bob", job, action).status_code == 403  # an approver, not the requester
        assert world.users.decide("admin1", job, action).status_code == 403  # an admin neither
        assert world.as_token("alice", ["ops"], "POST", f"/jobs/{job}/{action}").status_code == 404  # token alice
    assert world.users.view("alice", job).json()["status"] == "awaiting_approval"
    # An MCP client naming another person's job in requestState neither holds nor withdraws it.
    answer = mcp_round(world.server.url, world.users.keys["bob"], job, "decline")
    assert answer.status_code == 200 and answer.json()["result"]["isError"] is True, answer.text
    view = world.users.view("alice", job).json()
    assert view["status"] == "awaiting_approval", view
    # The requester's own hold and withdrawal work, and a withdrawn call cannot be held back to life.
    assert world.users.decide("alice", job, "hold").json()["status"] == "awaiting_approval"
    assert world.users.decide("alice", job, "withdraw").json()["status"] == "cancelled"
    assert world.users.decide("alice", job, "hold").json()["status"] == "cancelled"
    assert world.users.approve("bob", job).status_code == 409


def test_approve_and_withdraw_racing_never_run_a_withdrawn_request(world: World) -> None:
    """Each round, bob approves while alice withdraws, at once: exactly one of them decides while the job
    awaits approval. A request withdrawn while it waited never runs; an approved one either runs to its end or
    is cancelled while it runs (the requester left), and the audit trail says which."""
    outcomes = set()
    for n in range(12):
        job = world.ask("alice", f"race{n}")
        answers = decide_at_once(world.users, job, ("bob", "approve"), ("alice", "withdraw"))
        view = world.users.until("alice", job, "succeeded", "cancelled", "failed", "awaiting_approval", timeout=5)
        assert view["status"] in ("succeeded", "cancelled"), (
            view,
            {k: (a.status_code, a.text) for k, a in answers.items()},
        )
        events = [x["event"] for x in world.audit_lines(job)]
        if answers["approve"].status_code == 409:  # the withdrawal came first: nothing ran
            assert view["status"] == "cancelled" and view.get("result") is None, view
            assert "approved" not in events and "tool call" not in str(events), events
            outcomes.add("withdrawn first")
        else:
            assert answers["approve"].status_code == 200, answers["approve"].text
            assert "approved" in events, events
            outcomes.add(f"approved first, then {view['status']}")
        assert answers["withdraw"].status_code == 200, answers["withdraw"].text
    assert outcomes, outcomes
