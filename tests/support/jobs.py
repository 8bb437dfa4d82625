"""Jobs over HTTP against a real `toolrun serve`: named users with their keys, and the job actions.

    with JobUsers(server, {"alice": ["ops"], "bob": ["oncall"]}) as users:
        job = users.req("alice", "POST", "/tools/ops.wipe", {"target": "db1"}).json()["job"]
        users.approve("bob", job, "ticket 42")
        users.until("alice", job, "succeeded")

Every action returns the server's answer as it is (the tests assert its status), except `until`
(the job's view once it reached one of the states) and `follow` (the events of its stream). `approval_catalog()`
is the catalog of these tests: `ops.wipe`, approved by `oncall`, and any tools a test adds.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from .http import JSON
from .keys import create_key
from .servers import ToolrunServer, wait_until

# The tool of every approval test: `ops.wipe`, which a member of `oncall` must approve (`approval_catalog`).
WIPE = """\
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
    approval: required
    approvers: [oncall]
"""


def approval_catalog(*tools: str) -> str:
    """A catalog of group `ops`: `ops.wipe` (WIPE), then `tools` (YAML list items, indented as WIPE is)."""
    return "group: ops\ntools:\n" + WIPE + "".join(tools)


class JobUsers:
    """`users` (name -> groups) with a key each, minted as `toolrun keys create` does in `server`'s store
    (or the `keys` of users that exist already: see `on`)."""

    def __init__(
        self,
        server: ToolrunServer,
        users: Mapping[str, Sequence[str]] | None = None,
        keys: Mapping[str, str] | None = None,
    ) -> None:
        made = {name: create_key(server.env, name, *groups) for name, groups in (users or {}).items()}
        self.keys = {**(keys or {}), **made}
        self.url = server.url
        self.client = httpx.Client(timeout=10)

    def on(self, server: ToolrunServer) -> JobUsers:
        """The same users, with the same keys, on another server (a replica that shares the key store)."""
        return JobUsers(server, keys=self.keys)

    def __enter__(self) -> JobUsers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def req(self, who: str, method: str, path: str, body: Any = None, **headers: str) -> httpx.Response:
        """`method path` as `who`, with `body` as JSON when given."""
        h = {"X-API-Key": self.keys[who], **headers}
        if body is not None:
            h.update(JSON)
            return self.client.request(method, self.url + path, headers=h, content=json.dumps(body))
        return self.client.request(method, self.url + path, headers=h)

    def view(self, who: str, job: str) -> httpx.Response:
        return self.req(who, "GET", f"/jobs/{job}")

    def pending(self, who: str) -> list[dict[str, Any]]:
        """The jobs awaiting approval that `who` sees."""
        return list(self.req(who, "GET", "/jobs?status=awaiting_approval").json())

    def decide(self, who: str, job: str, action: str, body: Any = None) -> httpx.Response:
        """POST /jobs/{job}/{action} (approve, deny or cancel) as `who`."""
        return self.req(who, "POST", f"/jobs/{job}/{action}", body)

    def approve(self, who: str, job: str, reason: str | None = None) -> httpx.Response:
        return self.decide(who, job, "approve", None if reason is None else {"reason": reason})

    def deny(self, who: str, job: str, reason: str | None = None) -> httpx.Response:
        return self.decide(who, job, "deny", None if reason is None else {"reason": reason})

    def cancel(self, who: str, job: str) -> httpx.Response:
        return self.decide(who, job, "cancel")

    def follow(self, who: str, job: str) -> tuple[httpx.Headers, list[dict[str, Any]]]:
        """GET /jobs/{job}/events to its end: the stream's headers and every event it sent."""
        events = []
        with self.client.stream(
            "GET", f"{self.url}/jobs/{job}/events", headers={"X-API-Key": self.keys[who]}
        ) as stream:
            for line in stream.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[6:]))
        return stream.headers, events

    def until(self, who: str, job: str, *states: str, timeout: float = 20) -> dict[str, Any]:
        """The job's view as `who` once its status is one of `states`."""

        def done() -> dict[str, Any] | None:
            view = self.view(who, job).json()
            return view if view["status"] in states else None

        return wait_until(done, timeout, f"job {job} in {states}", interval=0.1)


def mcp_round(url: str, key: str, job: str, action: str = "accept", timeout: float = 40) -> httpx.Response:
    """One MCP 2026-07-28 `execute` round of the caller of `key` on the waiting call `job` (its requestState),
    answering the approval question with `action` (`accept` waits on, `decline` withdraws): the server holds it up
    to its approval round while the job waits."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "execute",
            "arguments": {},
            "requestState": f"toolrun-job:{job}",
            "inputResponses": {"approval": {"action": action}},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "execute",
        "X-API-Key": key,
    }
    return httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=timeout)


def decide_at_once(users: JobUsers, job: str, *decisions: tuple[str, str]) -> dict[str, httpx.Response]:
    """The `(who, action)` decisions on `job` (`approve`, `withdraw`, ...) sent at the same moment, each on a
    connection of its own (a barrier releases them together): the answer to each action."""
    barrier = threading.Barrier(len(decisions))
    answers: dict[str, httpx.Response] = {}

    def act(who: str, action: str) -> None:
        with httpx.Client(timeout=20) as client:
            barrier.wait()
            answers[action] = client.post(f"{users.url}/jobs/{job}/{action}", headers={"X-API-Key": users.keys[who]})

    threads = [threading.Thread(target=act, args=decision) for decision in decisions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return answers
