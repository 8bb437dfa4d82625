"""The audit trail and secret params, on real processes (issue 11.1, 11.2, 11.7).

One real `toolrun serve` (HTTP, the UI's browser door, MCP over HTTP) with `audit_log` set to a
file; a real `toolrun serve --stdio` and `toolrun call --audit` for the other doors. A sentinel
secret is planted and every output is searched for it: the audit trail, the server's log (app and
access logs), /metrics, error bodies, `--dry-run`, MCP results, and /proc/*/cmdline while the child
that uses it runs.
"""

from __future__ import annotations

import json
import os
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.catalogs import write_catalog
from support.keys import create_key
from support.mcp import mcp_http, mcp_stdio, text_of
from support.servers import ToolrunServer, clean_env, toolrun_cli, wait_until

SENTINEL = "S3NT1NEL-4f9c2b7e-do-not-leak"
PLAIN = "plain-argument-value-91d3"
CATALOG = """
version: 1
group: ops
tools:
  - name: echo
    description: Print a message.
    exec: printf '%s' {{ msg | quote }}
    params:
      - {name: msg, type: str}
  - name: login
    description: Uses a token; prints only its length. Sleeps so the test can read its command line.
    exec: sleep {{ nap }}; printf '%s' {{ token | quote }} | wc -c
    params:
      - {name: token, type: str, secret: true, pattern: '^S3NT1NEL-[a-z0-9-]+$'}
      - {name: nap, type: float, default: 0}
      - {name: note, type: str, default: ""}
  - name: unquoted
    description: A secret pasted without quote, inside double quotes.
    exec: printf '%s' "token=[{{ token }}]" | wc -c
    params:
      - {name: token, type: str, secret: true}
  - name: withenv
    description: A secret env entry reaches the command as a variable.
    exec: printf '%s' "$API_TOKEN" | wc -c
    env:
      API_TOKEN: {value: "S3NT1NEL-4f9c2b7e-do-not-leak", secret: true}
      REGION: eu-west-1
  - name: fail
    description: Exits 3 with an error at the end of a long output.
    exec: seq 1 100000; echo 'the error is here' >&2; exit 3
    limits: {output: 4096}
"""


@dataclass
class Served:
    server: ToolrunServer
    audit: Path
    key: str


def records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("audit")
    catalog = write_catalog(base, CATALOG)
    audit = base / "logs" / "audit.jsonl"
    audit.parent.mkdir()
    server = ToolrunServer(base, catalog, {"SVC_AUDIT_LOG": str(audit), "SVC_LOG_LEVEL": "debug"})
    key = create_key(server.env, "alice", "ops")
    with server.start():
        yield Served(server, audit, key)


def post(served: Served, key: str, args: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{served.server.url}/tools/{key}",
        json=args,
        headers={"X-API-Key": served.key, **(headers or {})},
        timeout=30,
    )


def last_record(served: Served, tool: str) -> dict[str, Any]:
    found = wait_until(lambda: [r for r in records(served.audit) if r["tool"] == tool], 5, f"audit record of {tool}")
    return found[-1]


def test_an_http_call_leaves_one_record_with_who_what_and_how_it_ended(served: Served) -> None:
    before = len(records(served.audit))
    answer = post(served, "ops.echo", {"msg": PLAIN}, {"X-Request-ID": "req-abc-123"})

    assert answer.status_code == 200 and answer.text == PLAIN
    assert answer.headers["x-request-id"] == "req-abc-123"
    new = wait_until(lambda: records(served.audit)[before:], 5, "the record")
    assert len(new) == 1
    record = new[0]
    assert record["request_id"] == "req-abc-123"
    who = (record["door"], record["user"], record["anonymous"], record["client"])
    assert who == ("http", "alice", False, "127.0.0.1")
    assert record["key_prefix"] == served.key.split("_")[1] and SENTINEL not in json.dumps(record)
    assert (record["tool"], record["outcome"], record["exit_code"], record["error"]) == ("ops.echo", "ok", 0, None)
    assert record["output_bytes"] == len(PLAIN) and record["truncated"] is False
    assert record["args"] == {"msg": PLAIN}
    assert record["duration_ms"] > 0 and record["ts"].endswith("Z")
    assert (record["logger"], record["message"]) == ("toolrun.access.audit", "tool call")
    assert stat.S_IMODE(os.stat(served.audit).st_mode) == 0o600


def test_long_values_are_cut_and_failures_name_their_exit_code_or_exception(served: Served) -> None:
    post(served, "ops.echo", {"msg": "x" * 5000})
    long = last_record(served, "ops.echo")
    assert long["args"]["msg"].startswith("x" * 200) and "4800 more characters" in long["args"]["msg"]

    assert post(served, "ops.echo", {"msg": [1]}).status_code == 400
    invalid = last_record(served, "ops.echo")
    assert (invalid["outcome"], invalid["error"], invalid["exit_code"]) == ("invalid", "ParamError", None)

    answer = post(served, "ops.fail", {})
    assert answer.status_code == 200
    failed = last_record(served, "ops.fail")
    assert (failed["outcome"], failed["exit_code"], failed["truncated"]) == ("error", 3, True)
    assert failed["bytes_dropped"] > 500_000 and failed["output_bytes"] == 2048 + 2048 + len("the error is here\n")


def test_a_truncated_output_keeps_its_tail_and_says_so_in_json_and_metrics(served: Served) -> None:
    answer = post(served, "ops.fail", {}, {"Accept": "application/json"})
    body = answer.json()
    assert body["truncated"] is True and body["bytes_dropped"] > 500_000
    assert body["bytes_kept"] == 2048 + 2048 + len("the error is here\n")
    assert body["stdout"].endswith("99999\n100000\n") and body["stderr"] == "the error is here\n"
    metrics = httpx.get(served.server.url + "/metrics").text
    assert 'svc_tool_output_truncated_total{tool="ops.fail"}' in metrics


def test_a_call_from_the_ui_page_is_recorded_as_the_ui_door(served: Served) -> None:
    httpx.post(
        f"{served.server.url}/tools/ops.echo",
        json={"msg": "from the ui"},
        headers={"X-API-Key": served.key, "Sec-Fetch-Site": "same-origin"},
    )
    assert last_record(served, "ops.echo")["door"] == "ui"


def test_a_misspelled_secret_name_never_lands_in_the_audit_trail(served: Served) -> None:
    # `tokn` for `token`: refused (400), and its value, a secret under the wrong name, is not recorded.
    answer = post(served, "ops.login", {"token": "S", "tokn": "SuperS3cret"})

    assert answer.status_code == 400, answer.text
    record = last_record(served, "ops.login")
    assert (record["outcome"], record["error"]) == ("invalid", "ParamError")
    assert record["args"] == {"token": "[secret]", "tokn": "[undeclared]"}
    assert "SuperS3cret" not in served.audit.read_text()


def test_mcp_over_http_is_audited_with_its_door_and_secrets_hidden(served: Served) -> None:
    async def main() -> Any:
        async with mcp_http(served.server.url + "/mcp", "legacy", {"X-API-Key": served.key}) as client:
            return await client.call_tool("execute", {"key": "ops.login", "arguments": {"token": SENTINEL}})

    result = anyio.run(main)
    assert text_of(result).strip() == str(len(SENTINEL))
    assert SENTINEL not in json.dumps(result.model_dump(mode="json"))
    record = last_record(served, "ops.login")
    assert (record["door"], record["user"]) == ("mcp-http", "alice")
    assert record["args"]["token"] == "[secret]"


def test_a_secret_never_reaches_a_command_line_a_log_metrics_or_an_error_body(served: Served) -> None:
    url = f"{served.server.url}/tools/ops.login"
    with httpx.Client(timeout=30) as client:
        # While the child sleeps, read every process's command line.
        import threading

        answer: list[httpx.Response] = []
        thread = threading.Thread(
            target=lambda: answer.append(
                client.post(url, json={"token": SENTINEL, "nap": 1.0}, headers={"X-API-Key": served.key})
            )
        )
        thread.start()
        seen_child = False
        deadline = time.monotonic() + 5
        while thread.is_alive() and time.monotonic() < deadline:
            for pid in os.listdir("/proc"):
                if not pid.isdigit():
                    continue
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                assert SENTINEL.encode() not in cmdline, f"the secret is on the command line of pid {pid}"
                if b"TOOLRUN_SECRET_TOKEN" in cmdline:
                    seen_child = True
            time.sleep(0.05)
        thread.join()
    assert seen_child, "the tool's shell was never seen running"
    assert answer[0].status_code == 200 and answer[0].text.strip() == str(len(SENTINEL))

    # An invalid secret: the error body names the param and the rule, never the value.
    bad = httpx.post(url, json={"token": SENTINEL + "!"}, headers={"X-API-Key": served.key})
    assert bad.status_code == 400 and "token" in bad.text and SENTINEL not in bad.text
    bad_json = httpx.post(
        url, json={"token": SENTINEL + "!"}, headers={"X-API-Key": served.key, "Accept": "application/json"}
    )
    assert bad_json.status_code == 400 and SENTINEL not in bad_json.text

    # The tool entry marks it (the UI renders a password field).
    entry = httpx.get(url, headers={"X-API-Key": served.key}).json()
    assert [p.get("secret") for p in entry["params"]] == [True, None, None]

    metrics = httpx.get(served.server.url + "/metrics").text
    wait_until(lambda: "ops.login" in served.audit.read_text(), 5, "audit records")
    for name, text in {
        "metrics": metrics,
        "audit": served.audit.read_text(),
        "server log": served.server.log(),
    }.items():
        assert SENTINEL not in text, f"the secret leaked into the {name}"
    assert PLAIN not in served.server.log(), "an argument value leaked into the server log"


def test_a_secret_pasted_without_quote_still_reaches_the_tool_whole(served: Served) -> None:
    answer = post(served, "ops.unquoted", {"token": "a b $HOME 'c'"})
    assert answer.status_code == 200 and answer.text.strip() == str(len("token=[a b $HOME 'c']"))


def test_a_secret_env_entry_reaches_the_command_and_no_answer_shows_it(served: Served, tmp_path: Path) -> None:
    answer = post(served, "ops.withenv", {})
    assert answer.status_code == 200 and answer.text.strip() == str(len(SENTINEL))
    entry = httpx.get(f"{served.server.url}/tools/ops.withenv", headers={"X-API-Key": served.key})
    assert entry.status_code == 200 and SENTINEL not in entry.text
    env = clean_env(tmp_path / "home")
    plan = toolrun_cli("call", "ops.withenv", "--dry-run", "--json", "-c", str(served.server.catalog), env=env)
    assert plan.returncode == 0, plan.stderr
    assert "API_TOKEN" in json.loads(plan.stdout)["env"] and SENTINEL not in plan.stdout + plan.stderr


def test_dry_run_and_the_cli_audit_record_hide_the_secret(served: Served, tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    catalog = str(served.server.catalog)
    words = ("call", "ops.login", f"token={SENTINEL}", "note=hello", "--dry-run", "--json", "-c", catalog)
    plan = toolrun_cli(*words, env=env)
    assert plan.returncode == 0, plan.stderr
    assert SENTINEL not in plan.stdout + plan.stderr
    assert '"$TOOLRUN_SECRET_TOKEN"' in json.loads(plan.stdout)["command"]
    assert "TOOLRUN_SECRET_TOKEN" in json.loads(plan.stdout)["env"]

    done = toolrun_cli("call", "ops.login", f"token={SENTINEL}", "--audit", "-c", catalog, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(SENTINEL))
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    assert [(r["door"], r["tool"], r["args"]["token"]) for r in lines] == [("cli", "ops.login", "[secret]")]
    assert SENTINEL not in done.stderr

    quiet = toolrun_cli("call", "ops.echo", "msg=hi", "-c", catalog, env=env)
    assert quiet.returncode == 0 and quiet.stderr == ""  # no audit record unless asked


def test_mcp_over_stdio_is_audited_as_its_own_door(served: Served, tmp_path: Path) -> None:
    audit = tmp_path / "stdio-audit.jsonl"

    async def main() -> Any:
        async with mcp_stdio(
            tmp_path / "home", env={"SVC_AUDIT_LOG": str(audit)}, catalog=served.server.catalog
        ) as client:
            return await client.call_tool("execute", {"key": "ops.login", "arguments": {"token": SENTINEL}})

    result = anyio.run(main)
    assert text_of(result).strip() == str(len(SENTINEL))
    [record] = records(audit)
    assert (record["door"], record["tool"], record["args"]) == ("mcp-stdio", "ops.login", {"token": "[secret]"})
    assert record["user"] and record["anonymous"] is False


def test_a_rotated_audit_file_is_reopened_at_its_path(served: Served) -> None:
    post(served, "ops.echo", {"msg": "before rotation"})
    wait_until(lambda: "before rotation" in served.audit.read_text(), 5, "the first record")
    rotated = served.audit.with_name("audit.jsonl.1")
    os.rename(served.audit, rotated)  # what logrotate does (without copytruncate)

    post(served, "ops.echo", {"msg": "after rotation"})
    wait_until(lambda: served.audit.exists() and "after rotation" in served.audit.read_text(), 5, "a new file")
    assert "after rotation" not in rotated.read_text()
    assert stat.S_IMODE(os.stat(served.audit).st_mode) == 0o600

    served.audit.unlink()  # deleted outright: the next record starts a new file too
    post(served, "ops.echo", {"msg": "after delete"})
    wait_until(lambda: served.audit.exists() and "after delete" in served.audit.read_text(), 5, "another new file")
