"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`) served from jobs, against a real `toolrun serve`
over HTTP and `serve --stdio`, in raw 2026-07-28 JSON-RPC (the mcp 2.3.0 SDK's client has no Tasks extension):
every task answer is checked against a JSON Schema written from SEP-2663's types (CreateTaskResult,
DetailedTask), and the final result against the SDK's own CallToolResult model."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import jsonschema
import mcp_types as types
import pytest

from support.catalogs import write_catalog
from support.jobs import JobUsers, approval_catalog
from support.servers import TOOLRUN, Processes, ToolrunServer, toolrun_cli, wait_until

EXT = "io.modelcontextprotocol/tasks"
CATALOG = approval_catalog(
    """\
  - name: slow
    exec: sleep 30; echo done
    async: true
"""
)

_TASK = {
    "type": "object",
    "required": ["taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs"],
    "properties": {
        "taskId": {"type": "string", "minLength": 1},
        "status": {"enum": ["working", "input_required", "completed", "cancelled", "failed"]},
        "statusMessage": {"type": "string"},
        "createdAt": {"type": "string", "format": "date-time"},
        "lastUpdatedAt": {"type": "string", "format": "date-time"},
        "ttlMs": {"type": ["integer", "null"], "minimum": 0},
        "pollIntervalMs": {"type": "integer", "minimum": 0},
    },
}
CREATE_TASK_RESULT = {"allOf": [_TASK, {"required": ["resultType"], "properties": {"resultType": {"const": "task"}}}]}
DETAILED_TASK = {
    "allOf": [
        _TASK,
        {"required": ["resultType"], "properties": {"resultType": {"const": "complete"}}},
        {
            "oneOf": [
                {"properties": {"status": {"const": "working"}}},
                {
                    "properties": {"status": {"const": "input_required"}, "inputRequests": {"type": "object"}},
                    "required": ["inputRequests"],
                },
                {
                    "properties": {"status": {"const": "completed"}, "result": {"type": "object"}},
                    "required": ["result"],
                },
                {"properties": {"status": {"const": "failed"}, "error": {"type": "object"}}, "required": ["error"]},
                {"properties": {"status": {"const": "cancelled"}}},
            ]
        },
    ]
}


def check(value: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(value, schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    return value


def envelope(tasks: bool = True) -> dict[str, Any]:
    extensions = {"extensions": {EXT: {}}} if tasks else {}
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": extensions,
    }


class Http:
    """Raw 2026-07-28 JSON-RPC over HTTP, as one user."""

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key, self.next_id = url + "/mcp", key, 0

    def send(self, method: str, params: dict[str, Any], name: str, tasks: bool = True) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": {**params, "_meta": envelope(tasks)}}
        headers = {
            "X-API-Key": self.key,
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2026-07-28",
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        r = httpx.post(self.url, headers=headers, content=json.dumps(body), timeout=60)
        assert r.status_code in (200, 400, 404), r.text
        return dict(r.json())

    def call(self, tool: str, arguments: dict[str, Any], tasks: bool = True) -> dict[str, Any]:
        return self.send(
            "tools/call", {"name": "execute", "arguments": {"key": tool, "arguments": arguments}}, "execute", tasks
        )

    def task(self, method: str, task_id: str, **params: Any) -> dict[str, Any]:
        return self.send(method, {"taskId": task_id, **params}, task_id)


ROUND = 3.0  # seconds of one MCP approval round (mcp_approval_round; 20 by default): a task must outlast several
LATE = 12.0  # seconds an approver takes below: four rounds, and more than a waiting requester's hold (jobs.HOLD)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ToolrunServer, JobUsers]]:
    """One server for the file (each test's calls are its own jobs, told apart by their ids; none changes the
    server): its tests run in order on one worker (support/scheduling.py's ONE_WORKER)."""
    tmp_path = tmp_path_factory.mktemp("tasks")
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_MCP_APPROVAL_ROUND": ROUND}))
        users = procs.enter_context(JobUsers(server, {"alice": ["ops"], "bob": ["oncall"], "carol": ["ops"]}))
        server.start()
        yield server, users


def test_http_task_waits_for_an_approval_given_12_s_later_and_ends_with_the_plain_result(
    world: tuple[ToolrunServer, JobUsers],
) -> None:
    from toolrun.jobs import HOLD

    assert LATE > HOLD and LATE >= 4 * ROUND  # longer than anything but the approval timeout that ends a wait
    server, users = world
    alice, carol = Http(server.url, users.keys["alice"]), Http(server.url, users.keys["carol"])
    created = check(alice.call("ops.wipe", {"target": "db1"})["result"], CREATE_TASK_RESULT)
    task_id = created["taskId"]
    assert created["status"] == "input_required"
    waiting = check(alice.task("tasks/get", task_id)["result"], DETAILED_TASK)
    assert waiting["status"] == "input_required"
    (question,) = waiting["inputRequests"].values()
    assert question["method"] == "elicitation/create"
    assert "needs approval by a member of oncall" in question["params"]["message"]
    # Another caller (carol, ops, not an approver) gets exactly the answer of a task that does not exist.
    assert carol.task("tasks/get", task_id)["error"] == alice.task("tasks/get", "no-such-task")["error"]
    assert carol.task("tasks/cancel", task_id)["error"] == alice.task("tasks/cancel", "no-such-task")["error"]
    started = time.monotonic()
    while time.monotonic() - started < LATE:  # an approver who takes a while: the task keeps saying it waits
        assert alice.task("tasks/get", task_id)["result"]["status"] == "input_required"
        time.sleep(2)
    assert users.approve("bob", task_id).status_code == 200

    def finished() -> dict[str, Any] | None:
        view = check(alice.task("tasks/get", task_id)["result"], DETAILED_TASK)
        return view if view["status"] == "completed" else None

    done = wait_until(finished, 20, "the task completes")
    result = types.CallToolResult.model_validate(done["result"])
    assert not result.is_error and result.content[0].text == "wiped db1\n"  # type: ignore[union-attr]
    assert result.structured_content is not None and result.structured_content["stdout"] == "wiped db1\n"


def test_http_update_with_decline_withdraws_and_cancel_stops_a_running_job(
    world: tuple[ToolrunServer, JobUsers],
) -> None:
    server, users = world
    alice = Http(server.url, users.keys["alice"])
    task_id = alice.call("ops.wipe", {"target": "db2"})["result"]["taskId"]
    (key,) = alice.task("tasks/get", task_id)["result"]["inputRequests"]
    ack = alice.task("tasks/update", task_id, inputResponses={key: {"action": "decline"}})
    assert ack["result"]["resultType"] == "complete"
    view = check(alice.task("tasks/get", task_id)["result"], DETAILED_TASK)
    assert view["status"] == "cancelled" and "withdrawn by the requester" in view["statusMessage"]
    assert users.view("alice", task_id).json()["status"] == "cancelled"

    running = check(alice.call("ops.slow", {})["result"], CREATE_TASK_RESULT)
    assert running["status"] == "working"
    assert alice.task("tasks/cancel", running["taskId"])["result"]["resultType"] == "complete"
    view = check(alice.task("tasks/get", running["taskId"])["result"], DETAILED_TASK)
    assert view["status"] == "cancelled"


def test_a_client_without_the_extension_keeps_the_round_trip(world: tuple[ToolrunServer, JobUsers]) -> None:
    server, users = world
    alice = Http(server.url, users.keys["alice"])
    started = time.monotonic()
    answer = alice.call("ops.wipe", {"target": "db3"}, tasks=False)["result"]
    held = time.monotonic() - started
    assert answer["resultType"] == "input_required" and "taskId" not in answer
    assert ROUND <= held < ROUND + 10, held  # one round, as long as mcp_approval_round says (20 s by default)
    listed = alice.send("tools/call", {"name": "describe_tools", "arguments": {"keys": ["ops.wipe"]}}, "describe_tools")
    assert "may answer with a task" in listed["result"]["content"][0]["text"]
    assert listed["result"]["structuredContent"]["tools"][0]["task"] is True


def test_routing_headers_are_stripped_of_surrounding_whitespace_not_refused(
    world: tuple[ToolrunServer, JobUsers],
) -> None:
    """RFC 9110 5.5: `Mcp-Name:  execute\t` names `execute` (h11 clients cannot send it: a raw request)."""
    import asyncio

    from support.http import raw_call

    server, users = world
    params = {"name": "execute", "arguments": {"key": "ops.wipe", "arguments": {"target": "w"}}, "_meta": envelope()}
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).encode()
    headers = {
        "X-API-Key": users.keys["alice"],
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": " tools/call",
        "Mcp-Name": "  execute\t",
    }
    status, _, content, _ = asyncio.run(raw_call(server.port, "POST", "/mcp", body, headers))
    assert status == 200, content
    assert json.loads(content)["result"]["resultType"] == "task"
    headers["Mcp-Name"] = " other "
    status, _, content, _ = asyncio.run(raw_call(server.port, "POST", "/mcp", body, headers))
    assert status == 400 and json.loads(content)["error"]["code"] == -32020


class Stdio:
    """Raw JSON-RPC lines to `toolrun serve --stdio` (2026-07-28, or a handshake after `initialize`)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.next_id = proc, 0

    def write(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def send(self, method: str, params: dict[str, Any], meta: bool = True) -> dict[str, Any]:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        if meta:
            body["params"] = {**params, "_meta": envelope()}
        self.write(body)
        assert self.proc.stdout is not None
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                return dict(message)


def stdio_server(server: ToolrunServer, key: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [TOOLRUN, "serve", "--stdio", "-c", str(server.catalog)],
        env={**server.env, "TOOLRUN_API_KEY": key},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_stdio_handshake_client_that_declared_the_extension_gets_a_task(world: tuple[ToolrunServer, JobUsers]) -> None:
    server, users = world
    with stdio_server(server, users.keys["alice"]) as proc:
        try:
            client = Stdio(proc)
            capabilities = {"extensions": {EXT: {}}}
            hello = {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "t", "version": "1"},
            }
            assert client.send("initialize", hello, meta=False)["result"]["protocolVersion"] == "2025-11-25"
            client.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
            call = {"name": "execute", "arguments": {"key": "ops.wipe", "arguments": {"target": "h1"}}}
            created = check(client.send("tools/call", call, meta=False)["result"], CREATE_TASK_RESULT)
            view = client.send("tasks/get", {"taskId": created["taskId"]}, meta=False)["result"]
            assert view["status"] == "input_required"
            assert client.send("tasks/cancel", {"taskId": created["taskId"]}, meta=False)["result"] == {}
            assert (
                client.send("tasks/get", {"taskId": created["taskId"]}, meta=False)["result"]["status"] == "cancelled"
            )
        finally:
            proc.terminate()


def test_stdio_task_completes_after_the_operator_approves(world: tuple[ToolrunServer, JobUsers]) -> None:
    server, users = world
    env = {**server.env, "TOOLRUN_API_KEY": users.keys["alice"]}
    with subprocess.Popen(
        [TOOLRUN, "serve", "--stdio", "-c", str(server.catalog)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            client = Stdio(proc)
            call = {"name": "execute", "arguments": {"key": "ops.wipe", "arguments": {"target": "s1"}}}
            created = check(client.send("tools/call", call)["result"], CREATE_TASK_RESULT)
            task_id = created["taskId"]
            assert check(client.send("tasks/get", {"taskId": task_id})["result"], DETAILED_TASK)["status"] == (
                "input_required"
            )
            done = toolrun_cli("jobs", "approve", task_id, "-c", str(server.catalog), env=server.env)
            assert done.returncode == 0, done.stderr
            view = check(client.send("tasks/get", {"taskId": task_id})["result"], DETAILED_TASK)
            assert view["status"] == "completed"
            assert view["result"]["content"][0]["text"] == "wiped s1\n"
            assert client.send("tasks/get", {"taskId": "nope"})["error"]["message"] == "Unknown task"
        finally:
            proc.terminate()


# -- the SDK's client, with a Tasks extension of its own (the SDK offers the hooks, not the extension) ---------


class _CreateTask(types.Result):
    model_config = types.Result.model_config | {"extra": "allow"}
    result_type: Literal["task"]
    task_id: str
    status: str


class _TaskGetParams(types.RequestParams):
    task_id: str


class _TaskGet(types.Request[_TaskGetParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: _TaskGetParams


class _Detailed(types.Result):
    model_config = types.Result.model_config | {"extra": "allow"}
    status: str
    result: dict[str, Any] | None = None


def sdk_tasks(seen: list[str], on_waiting: Any) -> Any:
    """A ClientExtension that declares the Tasks extension and finishes a task by polling `tasks/get`."""
    from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim

    async def resolve(task: _CreateTask, ctx: ClaimContext) -> types.CallToolResult:
        import anyio

        while True:
            view = await ctx.session.send_request(_TaskGet(params=_TaskGetParams(task_id=task.task_id)), _Detailed)
            seen.append(view.status)
            if view.status == "input_required" and seen.count("input_required") == 1:
                await anyio.to_thread.run_sync(on_waiting, task.task_id)
            if view.status in ("completed", "cancelled", "failed"):
                assert view.result is not None, view
                return types.CallToolResult.model_validate(view.result)
            await anyio.sleep(0.2)

    class Tasks(ClientExtension):
        identifier = EXT

        def claims(self) -> Any:
            return (ResultClaim(result_type="task", model=_CreateTask, resolve=resolve),)

    return Tasks()


def test_the_sdk_client_with_a_tasks_extension_follows_an_approval_to_its_result(
    world: tuple[ToolrunServer, JobUsers],
) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    server, users = world
    seen: list[str] = []

    def approve(task_id: str) -> None:
        assert users.approve("bob", task_id).status_code == 200

    async def main() -> Any:
        async with (
            httpx2.AsyncClient(headers={"X-API-Key": users.keys["alice"]}, timeout=60) as http,
            Client(
                streamable_http_client(server.url + "/mcp", http_client=http),
                mode="2026-07-28",
                extensions=[sdk_tasks(seen, approve)],
            ) as client,
        ):
            return await client.call_tool("execute", {"key": "ops.wipe", "arguments": {"target": "sdk"}})

    result = anyio.run(main)
    assert not result.is_error and result.content[0].text == "wiped sdk\n"
    assert seen[0] == "input_required" and seen[-1] == "completed"
