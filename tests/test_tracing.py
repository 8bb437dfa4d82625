"""OpenTelemetry tracing (the `otel` extra) against a real OTLP/HTTP receiver and a real `toolrun serve`.

The receiver (tests/support/otlp.py) decodes the protobuf `ExportTraceServiceRequest`s the server's
exporter sends. Each test plays a caller in a trace of its own (a made-up `traceparent`), then checks
that the spans arrived in that trace, in the right parent-child order, and that the tool itself saw
the trace: an exec tool that echoes $TRACEPARENT, a curl tool whose request comes back to the server,
fn tools that read the current span.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.binaries import require_binary
from support.keys import create_key
from support.servers import ToolrunServer, free_port, toolrun_cli

if os.environ.get("CI") != "true":  # CI installs the test extra: there a missing package fails the module
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    pytest.importorskip("opentelemetry.proto", reason="opentelemetry-proto is not installed")

from support.otlp import OtlpReceiver, ReceivedSpan

CATALOG = """\
group: ops
tools:
  - name: trace
    public: true
    exec: 'echo "tp=$TRACEPARENT ts=$TRACESTATE"'
  - name: fail
    public: true
    exec: 'echo no >&2; exit 3'
  - name: fetch
    public: true
    params:
      - {name: url, type: str}
    curl: '-- {{ url | quote }}'
  - name: current
    public: true
    fn: tracefns:current
  - name: current_async
    public: true
    fn: tracefns:current_async
  - name: bag
    public: true
    fn: tracefns:bag
"""

FNS = """\
from opentelemetry import trace


def _ids() -> str:
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}/{context.span_id:016x}"


def current() -> str:
    return _ids()


async def current_async() -> str:
    return _ids()


def bag() -> dict:
    from opentelemetry import baggage

    return dict(baggage.get_all())
"""


JSONH = {"Content-Type": "application/json"}


def caller() -> tuple[str, str, str]:
    """A caller's trace: (trace id, span id, traceparent)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return trace_id, span_id, f"00-{trace_id}-{span_id}-01"


def exporting(endpoint: str | None) -> dict[str, str]:
    """The variables that send spans to `endpoint` (within 50 ms of their end); none for None."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"} if endpoint else {}


def otel_env(endpoint: str | None) -> dict[str, str]:
    """This environment without its own OTEL_* variables, exporting to `endpoint`."""
    return {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | exporting(endpoint)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "tools.yaml").write_text(CATALOG, encoding="utf-8")
    (tmp_path / "tracefns.py").write_text(FNS, encoding="utf-8")
    return tmp_path


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as received:
        yield received


# One server and receiver for the tests that only call tools and read the spans of their own trace (each test's
# caller starts a trace of its own): a server start is most of such a test's cost. The tests that change the
# server's settings or catalog, or read its whole log, start their own.
@pytest.fixture(scope="module")
def collector() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as received:
        yield received


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, collector: OtlpReceiver) -> Iterator[ToolrunServer]:
    workdir = tmp_path_factory.mktemp("tracing")
    (workdir / "tools.yaml").write_text(CATALOG, encoding="utf-8")
    (workdir / "tracefns.py").write_text(FNS, encoding="utf-8")
    with start(workdir, collector.endpoint, {"PYTHONPATH": str(workdir)}) as server:
        yield server


def start(
    workdir: Path, endpoint: str | None, settings: dict[str, Any] | None = None, name: str = "server"
) -> ToolrunServer:
    """`toolrun serve` exporting to `endpoint` (None: tracing off), with `settings` in its environment."""
    settings = {"SVC_WORKERS": 1, **exporting(endpoint), **(settings or {})}
    server = ToolrunServer(workdir / name, workdir / "tools.yaml", settings)
    # No OTEL_* variable of the test's own environment: only those of `settings`.
    server.env = {k: v for k, v in server.env.items() if not k.startswith("OTEL_") or k in settings}
    return server.start()


def in_trace(trace_id: str, *names: str) -> Any:
    def ready(spans: list[ReceivedSpan]) -> bool:
        got = {s.name for s in spans if s.trace_id == trace_id}
        return all(name in got for name in names)

    return ready


def one(spans: list[ReceivedSpan], name: str, trace_id: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name and s.trace_id == trace_id]
    assert len(found) == 1, [(s.name, s.trace_id) for s in spans]
    return found[0]


# -- REST -------------------------------------------------------------------------------------------


def test_a_rest_call_joins_the_callers_trace_and_the_exec_tool_sees_its_span(
    workdir: Path, receiver: OtlpReceiver
) -> None:
    trace_id, parent, traceparent = caller()
    with start(workdir, receiver.endpoint, {"SVC_AUDIT_LOG": "-"}) as server:
        answer = httpx.post(
            f"{server.url}/tools/ops.trace", headers={"traceparent": traceparent, "tracestate": "vendor=abc"}
        )
        assert answer.status_code == 200
        spans = receiver.wait_for(in_trace(trace_id, "POST /tools/{key}", "execute_tool ops.trace"))
        log = server.log()
    request = one(spans, "POST /tools/{key}", trace_id)
    call = one(spans, "execute_tool ops.trace", trace_id)
    # parent-child order: the caller's span -> the HTTP request -> the tool call
    assert request.kind == "server" and request.parent_span_id == parent
    assert call.kind == "internal" and call.parent_span_id == request.span_id
    assert request.start_ns <= call.start_ns <= call.end_ns <= request.end_ns
    assert request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.route"] == "/tools/{key}"
    assert request.attributes["url.path"] == "/tools/ops.trace"
    assert request.attributes["http.response.status_code"] == 200
    assert call.attributes["gen_ai.operation.name"] == "execute_tool"
    assert call.attributes["gen_ai.tool.name"] == "ops.trace"
    assert call.attributes["toolrun.door"] == "http"
    assert call.attributes["toolrun.call.outcome"] == "ok"
    assert call.attributes["process.exit.code"] == 0
    assert call.attributes["toolrun.output.truncated"] is False
    assert call.attributes["toolrun.output.bytes"] == len(answer.content)
    assert call.resource["service.name"] == "toolrun"
    # the tool ran inside the call's span, and got the caller's tracestate
    assert answer.text.strip() == f"tp=00-{trace_id}-{call.span_id}-01 ts=vendor=abc"
    # the trace id in the audit record and in the access log line
    audit = [json.loads(line) for line in log.splitlines() if '"toolrun.access.audit"' in line]
    assert [r["trace_id"] for r in audit if r["tool"] == "ops.trace"] == [trace_id]
    assert any(
        '"POST /tools/ops.trace" 200' in line and line.endswith(f"trace={trace_id}") for line in log.splitlines()
    )


def test_a_job_runs_in_the_callers_trace_and_its_call_span_names_the_job(workdir: Path, receiver: OtlpReceiver) -> None:
    trace_id, _, traceparent = caller()
    with start(workdir, receiver.endpoint) as server:
        key = create_key(server.env, "alice", "ops")
        answer = httpx.post(
            f"{server.url}/tools/ops.trace",
            headers={"traceparent": traceparent, "Prefer": "respond-async", "X-API-Key": key},
        )
        assert answer.status_code == 202, answer.text
        job = answer.json()["job"]
        spans = receiver.wait_for(in_trace(trace_id, "execute_tool ops.trace"))
    call = one(spans, "execute_tool ops.trace", trace_id)
    assert call.attributes["toolrun.job.id"] == job
    assert call.attributes["enduser.id"] == "alice"


def test_an_approved_jobs_run_links_to_the_requesters_trace_and_job_routes_have_their_names(
    workdir: Path, receiver: OtlpReceiver
) -> None:
    (workdir / "tools.yaml").write_text(
        CATALOG + "  - name: guarded\n    exec: echo ran\n    approval: required\n    approvers: [oncall]\n",
        encoding="utf-8",
    )
    asker, asker_span, asking = caller()
    decider, _, deciding = caller()
    with start(workdir, receiver.endpoint) as server:
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        answer = httpx.post(
            f"{server.url}/tools/ops.guarded", headers={"traceparent": asking, "X-API-Key": alice, **JSONH}
        )
        assert answer.status_code == 202, answer.text
        job = answer.json()["job"]
        assert httpx.get(f"{server.url}/jobs/{job}", headers={"X-API-Key": alice}).status_code == 200
        approved = httpx.post(
            f"{server.url}/jobs/{job}/approve", headers={"traceparent": deciding, "X-API-Key": bob, **JSONH}
        )
        assert approved.status_code == 200, approved.text
        spans = receiver.wait_for(in_trace(decider, "POST /jobs/{id}/approve", "execute_tool ops.guarded"))
        receiver.wait_for(lambda got: any(s.name == "GET /jobs/{id}" for s in got))
    request = one(spans, "POST /tools/{key}", asker)
    assert request.parent_span_id == asker_span
    run = one(spans, "execute_tool ops.guarded", decider)  # runs in the approver's request...
    assert run.links == [f"{asker}/{request.span_id}"]  # ...and links to the request that asked for it
    assert run.attributes["toolrun.job.id"] == job
    assert one(spans, "POST /jobs/{id}/approve", decider).attributes["http.route"] == "/jobs/{id}/approve"
    viewed = [s for s in receiver.spans if s.name == "GET /jobs/{id}"]
    assert viewed and viewed[0].attributes["http.route"] == "/jobs/{id}"
    assert "tracing on: spans go to " + receiver.endpoint + "/v1/traces (OTLP/HTTP)" in server.log()


def test_a_failed_call_is_an_error_span_with_its_exit_code(server: ToolrunServer, collector: OtlpReceiver) -> None:
    trace_id, _, traceparent = caller()
    answer = httpx.post(f"{server.url}/tools/ops.fail", headers={"traceparent": traceparent})
    assert answer.status_code == 200  # a non-zero exit is a result, not an HTTP error
    missing = httpx.post(f"{server.url}/tools/ops.nope", headers={"traceparent": traceparent})
    assert missing.status_code == 404
    spans = collector.wait_for(in_trace(trace_id, "execute_tool ops.fail"))
    spans = collector.wait_for(lambda s: len([x for x in s if x.trace_id == trace_id]) >= 3)
    call = one(spans, "execute_tool ops.fail", trace_id)
    assert call.attributes["process.exit.code"] == 3
    assert call.attributes["toolrun.call.outcome"] == "error"
    assert call.attributes["error.type"] == "error"
    assert call.status_code == 2
    # an unknown key is no tool call: only its request span, with the route and the 404
    requests = [s for s in spans if s.trace_id == trace_id and s.name == "POST /tools/{key}"]
    assert sorted(s.attributes["http.response.status_code"] for s in requests) == [200, 404]
    assert not [s for s in spans if s.name == "execute_tool ops.nope"]


def test_a_curl_tool_sends_the_call_span_as_traceparent(server: ToolrunServer, collector: OtlpReceiver) -> None:
    require_binary("curl")
    trace_id, _, traceparent = caller()
    answer = httpx.post(
        f"{server.url}/tools/ops.fetch", json={"url": f"{server.url}/healthz"}, headers={"traceparent": traceparent}
    )
    assert answer.status_code == 200 and answer.text == '{"status":"ok"}'
    spans = collector.wait_for(in_trace(trace_id, "execute_tool ops.fetch", "GET /healthz"))
    call = one(spans, "execute_tool ops.fetch", trace_id)
    # the API the curl tool called (here the server itself) joined the trace under the tool call
    assert one(spans, "GET /healthz", trace_id).parent_span_id == call.span_id


@pytest.mark.parametrize("key", ["ops.current", "ops.current_async"])
def test_an_fn_tool_runs_inside_the_call_span(server: ToolrunServer, collector: OtlpReceiver, key: str) -> None:
    trace_id, _, traceparent = caller()
    answer = httpx.post(f"{server.url}/tools/{key}", headers={"traceparent": traceparent})
    assert answer.status_code == 200, answer.text
    spans = collector.wait_for(in_trace(trace_id, f"execute_tool {key}"))
    call = one(spans, f"execute_tool {key}", trace_id)
    assert answer.text == f"{trace_id}/{call.span_id}"


def test_an_fn_tool_sees_the_callers_baggage(server: ToolrunServer) -> None:
    headers = {"traceparent": caller()[2], "baggage": "tenant=acme,region=eu"}
    answer = httpx.post(f"{server.url}/tools/ops.bag", headers=headers | {"accept": "application/json"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"] == {"tenant": "acme", "region": "eu"}


# -- MCP: the caller's context in params._meta ------------------------------------------------------


async def _mcp_call(client: Any, trace: str) -> str:
    result = await client.call_tool("execute", {"key": "ops.trace"}, meta={"traceparent": trace})
    assert not result.is_error, result
    return str(result.content[0].text)


def _mcp_checks(spans: list[ReceivedSpan], trace_id: str, parent: str, text: str) -> None:
    mcp = one(spans, "tools/call execute", trace_id)
    call = one(spans, "execute_tool ops.trace", trace_id)
    assert mcp.kind == "server" and mcp.parent_span_id == parent
    assert mcp.attributes["mcp.method.name"] == "tools/call"
    assert mcp.attributes["gen_ai.tool.name"] == "execute"
    assert call.parent_span_id == mcp.span_id
    assert text.startswith(f"tp=00-{trace_id}-{call.span_id}-")


def test_mcp_over_http_joins_the_trace_and_baggage_in_params_meta(
    server: ToolrunServer, collector: OtlpReceiver
) -> None:
    from mcp import Client

    trace_id, parent, traceparent = caller()

    async def main() -> tuple[str, Any]:
        async with Client(f"{server.url}/mcp") as client:
            text = await _mcp_call(client, traceparent)
            meta = {"traceparent": caller()[2], "baggage": "tenant=acme"}  # a trace of its own
            bag = await client.call_tool("execute", {"key": "ops.bag"}, meta=meta)
            return text, bag.structured_content

    text, bag = anyio.run(main)
    assert bag["result"] == {"tenant": "acme"}  # the baggage of `_meta` reached the fn tool
    spans = collector.wait_for(in_trace(trace_id, "tools/call execute", "execute_tool ops.trace"))
    _mcp_checks(spans, trace_id, parent, text)
    call = one(spans, "execute_tool ops.trace", trace_id)
    assert call.attributes["toolrun.door"] == "mcp-http"


def raw_mcp(key: str, meta: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """A 2026-07-28 `execute` request as the SDK client sends it: (body, headers)."""
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {
            "name": "execute",
            "arguments": {"key": key},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                **(meta or {}),
            },
        },
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "execute",
    }
    return body, headers


def test_mcp_over_http_without_meta_joins_the_trace_of_the_http_headers(
    server: ToolrunServer, collector: OtlpReceiver
) -> None:
    trace_id, parent, traceparent = caller()
    body, headers = raw_mcp("ops.trace")
    answer = httpx.post(f"{server.url}/mcp", json=body, headers=headers | {"traceparent": traceparent})
    assert answer.status_code == 200, answer.text
    spans = collector.wait_for(in_trace(trace_id, "POST /mcp", "tools/call execute", "execute_tool ops.trace"))
    request = one(spans, "POST /mcp", trace_id)
    assert request.parent_span_id == parent and request.attributes["http.route"] == "/mcp"
    mcp = one(spans, "tools/call execute", trace_id)
    assert mcp.parent_span_id == request.span_id
    call = one(spans, "execute_tool ops.trace", trace_id)
    assert call.parent_span_id == mcp.span_id
    assert answer.json()["result"]["content"][0]["text"].startswith(f"tp=00-{trace_id}-{call.span_id}-")


VARYING = ("toolrun.request_id", "toolrun.call.duration_ms")


def test_the_mcp_fast_path_records_the_spans_the_sdk_records(workdir: Path, receiver: OtlpReceiver) -> None:
    """With tracing on, a plain `tools/call` still takes toolrun's fast path, which runs the SDK's span middleware."""
    shapes = {}
    for fast in ("1", "0"):
        trace_id, parent, traceparent = caller()
        body, headers = raw_mcp("ops.fail", {"traceparent": traceparent})
        speedups = "on" if fast == "1" else "mcp_fast_path"  # the fast path on, or that one speedup off
        settings = {"TOOLRUN_SPEEDUPS": speedups, "SVC_LOG_LEVEL": "debug"}
        with start(workdir, receiver.endpoint, settings, name=f"fast-{fast}") as server:
            answer = httpx.post(f"{server.url}/mcp", json=body, headers=headers)
            assert answer.status_code == 200, answer.text
            spans = receiver.wait_for(in_trace(trace_id, "tools/call execute", "execute_tool ops.fail"))
            assert ("MCP fast path: tools/call execute" in server.log()) == (fast == "1")
        mine = {s.span_id: s for s in spans if s.trace_id == trace_id}
        shapes[fast] = sorted(
            (
                s.name,
                s.kind,
                s.status_code,
                "caller" if s.parent_span_id == parent else mine[s.parent_span_id].name,
                sorted((k, v) for k, v in s.attributes.items() if k not in VARYING),
            )
            for s in mine.values()
            if s.scope in ("mcp-python-sdk", "toolrun") and s.name != "POST /mcp"
        )
    assert shapes["1"] == shapes["0"]
    assert [shape[:4] for shape in shapes["1"]] == [
        ("execute_tool ops.fail", "internal", 2, "tools/call execute"),
        ("tools/call execute", "server", 0, "caller"),
    ]


def test_a_malformed_traceparent_starts_a_trace_of_its_own(server: ToolrunServer, collector: OtlpReceiver) -> None:
    answer = httpx.post(f"{server.url}/tools/ops.trace", headers={"traceparent": "00-nothex-zz-01"})
    assert answer.status_code == 200
    # the tool saw the trace the server started (the collector holds other tests' traces too)
    version, trace_id, span_id, _flags = answer.text.split()[0].removeprefix("tp=").split("-")
    assert version == "00" and len(trace_id) == 32 and int(trace_id, 16)  # a random id, not the caller's
    spans = collector.wait_for(in_trace(trace_id, "POST /tools/{key}", "execute_tool ops.trace"))
    call = one(spans, "execute_tool ops.trace", trace_id)
    assert call.span_id == span_id
    request = next(s for s in spans if s.span_id == call.parent_span_id)
    assert request.parent_span_id == "" and request.trace_id == call.trace_id


def test_mcp_over_stdio_joins_the_trace_and_baggage_in_params_meta(workdir: Path, receiver: OtlpReceiver) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    trace_id, parent, traceparent = caller()
    env = otel_env(receiver.endpoint) | {"TOOLRUN_HOME": str(workdir / "home"), "PYTHONPATH": str(workdir)}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "toolrun", "serve", "--stdio", "-c", str(workdir / "tools.yaml")], env=env
    )

    async def main() -> tuple[str, Any]:
        with (workdir / "stderr.txt").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                text = await _mcp_call(client, traceparent)
                meta = {"traceparent": caller()[2], "baggage": "tenant=acme"}  # a trace of its own
                bag = await client.call_tool("execute", {"key": "ops.bag"}, meta=meta)
                return text, bag.structured_content

    text, bag = anyio.run(main)
    assert bag["result"] == {"tenant": "acme"}  # the baggage of `_meta` reached the fn tool
    # the stdio server exported what it had queued when its client closed it
    spans = receiver.wait_for(in_trace(trace_id, "tools/call execute", "execute_tool ops.trace"), timeout=5)
    _mcp_checks(spans, trace_id, parent, text)
    assert one(spans, "execute_tool ops.trace", trace_id).attributes["toolrun.door"] == "mcp-stdio"


def test_a_collector_that_is_down_neither_fails_calls_nor_holds_the_stop_up(workdir: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    server = start(workdir, down)
    try:
        for _ in range(5):
            answer = httpx.post(f"{server.url}/tools/ops.trace")
            assert answer.status_code == 200 and answer.text.startswith("tp=00-")
    finally:
        started = time.monotonic()
        code = server.stop(timeout=20)
        took = time.monotonic() - started
    assert code == 0
    assert took < 3.0 + 4.0, took  # the bounded wait for the last spans (3 s), not the exporter's 10 s and retries
    assert "the spans still queued were not exported in 3s" in server.log()


# -- off: nothing imported, nothing added -----------------------------------------------------------

OTEL_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter", "toolrun.telemetry.otel")


def imported(importtime: str) -> set[str]:
    """Module names from `python -X importtime` output."""
    return {line.rsplit("|", 1)[-1].strip() for line in importtime.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize(
    "extra",
    [{}, {"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}],
    ids=["unset", "disabled"],
)
def test_toolrun_call_imports_no_opentelemetry_when_tracing_is_off(tmp_path: Path, extra: dict[str, str]) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG.split("  - name: fail")[0], encoding="utf-8")  # no fn tool importing OpenTelemetry
    env = otel_env(None) | extra | {"TOOLRUN_HOME": str(tmp_path / "home"), "PYTHONPROFILEIMPORTTIME": "1"}
    done = toolrun_cli("call", "-c", str(catalog), "ops.trace", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tp= ts="
    modules = imported(done.stderr)
    assert "toolrun.service" in modules  # the import log is read
    assert not {m for m in modules if m.startswith("opentelemetry") or m == "toolrun.telemetry.otel"}


def test_the_server_imports_no_opentelemetry_sdk_when_tracing_is_off(workdir: Path) -> None:
    (workdir / "tools.yaml").write_text(CATALOG.split("  - name: current")[0], encoding="utf-8")  # no fn tool
    with start(workdir, None, {"PYTHONPROFILEIMPORTTIME": "1"}) as server:
        answer = httpx.post(f"{server.url}/tools/ops.trace", headers={"traceparent": caller()[2]})
        assert answer.text.strip() == "tp= ts="  # nothing reaches the tool
        log = server.log()
    modules = imported(log)
    assert "toolrun.server.guard" in modules
    # The MCP SDK itself imports the OpenTelemetry API; toolrun adds nothing of it: no SDK, no exporter.
    assert not {m for m in modules if m.startswith(OTEL_MODULES)}
    assert " trace=" not in log


def test_tracing_configured_without_the_extra_warns_and_serves_untraced(workdir: Path, receiver: OtlpReceiver) -> None:
    # The OpenTelemetry SDK made unimportable, as in an install without the `otel` extra.
    missing = workdir / "no-otel" / "opentelemetry" / "sdk"
    missing.mkdir(parents=True)
    (missing / "__init__.py").write_text('raise ModuleNotFoundError("no SDK", name="opentelemetry.sdk")\n')
    (workdir / "tools.yaml").write_text(CATALOG.split("  - name: current")[0], encoding="utf-8")  # no fn tool
    with start(workdir, receiver.endpoint, {"PYTHONPATH": str(workdir / "no-otel")}) as server:
        answer = httpx.post(f"{server.url}/tools/ops.trace", headers={"traceparent": caller()[2]})
        assert answer.status_code == 200 and answer.text.strip() == "tp= ts="
        log = server.log()
    assert "tracing is configured (OTEL_* environment variables) but OpenTelemetry is not installed" in log
    assert "pip install 'toolrun[otel]'" in log
    assert receiver.count == 0


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER names 'zipkin'"),
        (
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL=grpc: toolrun exports OTLP over HTTP",
        ),
    ],
)
def test_a_tracing_setting_toolrun_cannot_serve_stops_the_server_with_its_reason(
    workdir: Path, variables: dict[str, str], message: str
) -> None:
    env = otel_env(None) | variables | {"TOOLRUN_HOME": str(workdir / "home")}
    done = toolrun_cli("serve", "-c", str(workdir / "tools.yaml"), "--port", "0", env=env)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_forked_workers_export_their_spans_as_the_service_the_environment_names(
    workdir: Path, receiver: OtlpReceiver
) -> None:
    trace_id, parent, traceparent = caller()
    settings = {
        "SVC_WORKERS": 2,
        "OTEL_SERVICE_NAME": "tools-prod",
        "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test,service.version=9",
    }
    with start(workdir, receiver.endpoint, settings) as server:
        for _ in range(4):
            answer = httpx.post(f"{server.url}/tools/ops.trace", headers={"traceparent": traceparent})
            assert answer.status_code == 200
        spans = receiver.wait_for(lambda s: len([x for x in s if x.name == "execute_tool ops.trace"]) == 4)
    calls = [s for s in spans if s.name == "execute_tool ops.trace"]
    assert {s.trace_id for s in calls} == {trace_id}
    requests = {s.span_id: s for s in spans if s.name == "POST /tools/{key}"}
    assert all(requests[s.parent_span_id].parent_span_id == parent for s in calls)
    resource = calls[0].resource
    assert resource["service.name"] == "tools-prod" and resource["service.version"] == "9"
    assert resource["deployment.environment.name"] == "test"


@pytest.mark.parametrize(
    "meta", [{"baggage": 5}, {"baggage": ["k=v"]}, {"baggage": {"k": "v"}}, {"traceparent": 7, "baggage": None}]
)
def test_an_mcp_trace_field_that_is_not_a_string_is_ignored_not_an_internal_error(
    server: ToolrunServer, meta: dict[str, Any]
) -> None:
    body, headers = raw_mcp("ops.bag", meta)
    logged = len(server.log())
    answer = httpx.post(f"{server.url}/mcp", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    reply = answer.json()
    assert "error" not in reply, (reply, server.log()[-3000:])
    assert reply["result"].get("isError") is not True, reply
    assert "Traceback" not in server.log()[logged:]
