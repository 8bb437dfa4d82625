"""Approvers are told: a real `toolrun serve` posts signed notifications to a real local webhook receiver when a
call asks for approval, is decided, withdrawn or expires; delivery is retried and never holds up the call."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import write_catalog
from support.jobs import JobUsers
from support.servers import Processes, ToolrunServer, clean_env, toolrun_cli, wait_until
from toolrun.jobrecord import Job
from toolrun.models import Identity
from toolrun.telemetry.notify import masked, message

SECRET = "s3cret-hmac-key"
CATALOG = """\
group: ops
tools:
  - name: restart
    description: Restart a service.
    exec: echo restarted {{ name | quote }}
    params:
      - {name: name, type: str}
      - {name: token, type: str, secret: true, required: false}
    approval: required
    approvers: [oncall]
  - name: flush
    description: Flush a cache (its own team hook too).
    exec: echo flushed
    approval: required
    approvers: [oncall]
    approval_timeout: 1
    notify: ["${TEAM_HOOK}"]
  - name: report
    exec: echo report
    async: true
"""


class Receiver:
    """A webhook receiver on loopback: records each POST (path, headers, body); answers `script` statuses in turn
    (then 200), holding each answer `delay` seconds."""

    def __init__(self, script: list[int] | None = None, delay: float = 0.0) -> None:
        self.posts: list[dict[str, Any]] = []
        self.script = list(script or [])
        self.delay = delay
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.posts.append({"path": self.path, "headers": dict(self.headers), "body": body, "at": time.time()})
                time.sleep(owner.delay)
                status = owner.script.pop(0) if owner.script else 200
                self.send_response(status)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def events(self, path: str = "/hook") -> list[dict[str, Any]]:
        return [json.loads(p["body"]) for p in self.posts if p["path"] == path]

    def wait_for(self, count: int, path: str = "/hook", timeout: float = 20.0) -> list[dict[str, Any]]:
        wait_until(lambda: len(self.events(path)) >= count, timeout, f"{count} notifications at {path}")
        return self.events(path)


def verified(post: dict[str, Any]) -> bool:
    """Check a notification's signature the way a receiver would."""
    headers = {k.lower(): v for k, v in post["headers"].items()}
    stamp = headers["x-toolrun-timestamp"]
    expected = hmac.new(SECRET.encode(), stamp.encode() + b"." + post["body"], hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-toolrun-signature-256"], "sha256=" + expected)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[ToolrunServer, JobUsers, Receiver]]:
    catalog = write_catalog(tmp_path, CATALOG)
    with Receiver() as hook, Processes() as procs:
        settings = {
            "SVC_NOTIFY_URL": hook.url + "/hook",
            "SVC_NOTIFY_SECRET": SECRET,
            "SVC_PUBLIC_URL": "https://toolrun.example.com",
            "TEAM_HOOK": hook.url + "/team/T000/B000/XXXXsecret",
        }
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, settings))
        users = procs.enter_context(JobUsers(srv, {"alice": ["ops"], "bob": ["oncall"]}))
        srv.start()
        yield srv, users, hook


def test_request_and_decision_reach_the_webhook_signed_with_a_link(
    world: tuple[ToolrunServer, JobUsers, Receiver],
) -> None:
    _, u, hook = world
    job = u.req("alice", "POST", "/tools/ops.restart", {"name": "nginx", "token": "hunter2"}).json()["job"]
    requested = hook.wait_for(1)[0]
    assert requested["event"] == "requested"
    link = f"https://toolrun.example.com/ui/jobs/{job}"
    assert requested["text"] == (
        f"alice asks to run ops.restart (name=nginx, token=[secret]): needs approval by oncall. Open: {link}"
    )
    assert requested["job"]["url"] == link and requested["job"]["state"] == "awaiting_approval"
    assert "hunter2" not in json.dumps(requested)  # a secret param's value never leaves
    assert u.approve("bob", job, "ticket 42").status_code == 200
    approved = hook.wait_for(2)[1]
    assert approved["event"] == "approved" and approved["job"]["decided_by"] == "bob"
    assert approved["text"].startswith("bob approved alice's call of ops.restart: ticket 42.")
    assert all(verified(p) for p in hook.posts)
    # A body changed on the way no longer matches its signature.
    forged = {**hook.posts[0], "body": hook.posts[0]["body"].replace(b"nginx", b"mysql")}
    assert not verified(forged)


def test_a_withdrawn_request_and_a_denial_are_told(world: tuple[ToolrunServer, JobUsers, Receiver]) -> None:
    _, u, hook = world
    first = u.req("alice", "POST", "/tools/ops.restart", {"name": "a"}).json()["job"]
    assert u.cancel("alice", first).status_code == 200
    second = u.req("alice", "POST", "/tools/ops.restart", {"name": "b"}).json()["job"]
    assert u.deny("bob", second, "not during the freeze").status_code == 200
    told = hook.wait_for(4)
    # Each notification is a delivery of its own, sent side by side (telemetry/notify.py): they may arrive in any
    # order (seen: a denial before its request, with the suite running beside it).
    events = sorted((e["event"], e["job"]["id"]) for e in told)
    assert events == sorted([("requested", first), ("withdrawn", first), ("requested", second), ("denied", second)])
    (denied,) = [e for e in told if e["event"] == "denied"]
    assert denied["text"].startswith("bob denied alice's call of ops.restart: not during the freeze.")
    # An async job involves no approver: nothing is sent.
    u.req("alice", "POST", "/tools/ops.report", {})
    time.sleep(1.0)
    assert len(hook.events()) == 4


def test_a_tools_own_hook_hears_its_expiry_and_its_url_stays_out_of_the_log(
    world: tuple[ToolrunServer, JobUsers, Receiver],
) -> None:
    srv, u, hook = world
    job = u.req("alice", "POST", "/tools/ops.flush", {}).json()["job"]
    team = "/team/T000/B000/XXXXsecret"
    told = hook.wait_for(2, path=team, timeout=30.0)  # the server's sweep expires it within a few seconds
    assert [(e["event"], e["job"]["id"]) for e in told] == [("requested", job), ("expired", job)]
    assert [e["event"] for e in hook.events()] == ["requested", "expired"]  # the server's hook hears it too
    assert told[1]["text"].startswith("alice's request to run ops.flush expired")
    assert "XXXXsecret" not in srv.log()


def test_delivery_is_retried_and_never_holds_up_the_call(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG.replace('notify: ["${TEAM_HOOK}"]', ""))
    with Receiver(script=[503, 502], delay=0.5) as hook, Processes() as procs:
        settings = {"SVC_NOTIFY_URL": hook.url + "/hook", "SVC_NOTIFY_SECRET": SECRET}
        srv = procs.add(ToolrunServer(tmp_path / "srv", catalog, settings))
        u = procs.enter_context(JobUsers(srv, {"alice": ["ops"]}))
        srv.start()
        started = time.monotonic()
        answer = u.req("alice", "POST", "/tools/ops.restart", {"name": "x"})
        assert answer.status_code == 202 and time.monotonic() - started < 0.5  # not waiting for the receiver
        wait_until(lambda: len(hook.posts) >= 3, 20.0, "three attempts")
        assert [json.loads(p["body"])["event"] for p in hook.posts] == ["requested"] * 3
        gaps = [b["at"] - a["at"] for a, b in zip(hook.posts, hook.posts[1:], strict=False)]
        assert gaps[0] >= 1.0 and gaps[1] >= 2.0  # backoff doubles
        assert all(verified(p) for p in hook.posts)


def test_a_local_cli_request_is_told_before_the_command_exits(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG.replace('notify: ["${TEAM_HOOK}"]', ""))
    with Receiver() as hook:
        env = clean_env(tmp_path / "home", {"SVC_NOTIFY_URL": hook.url + "/hook"})
        done = toolrun_cli("call", "ops.restart", "name=web", "--no-wait", "-c", str(catalog), env=env)
        assert done.returncode == 0, done.stderr
        assert [e["event"] for e in hook.events()] == ["requested"]  # sent before the process ended
        assert "x-toolrun-signature-256" not in {k.lower() for k in hook.posts[0]["headers"]}  # no secret: unsigned


def test_the_text_reads_well_and_urls_are_masked() -> None:
    job = Job(id="j1", tool="ops.x", state="expired", requester=Identity(username="alice"), approvers=("oncall",))
    assert message("expired", job, None, "") == "alice's request to run ops.x expired: nobody decided in time."
    assert masked("https://hooks.slack.com/services/T0/B0/secret") == "https://hooks.slack.com/…"
    assert masked("not a url") == "[webhook]"
