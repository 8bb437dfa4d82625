"""Every error body and content type the HTTP door can return, pinned exactly (spec 7).

JSON routes answer `{"error": ...}` as application/json; POST /tools/{key} answers plain text
(`Type: message`); the guard (Host, Origin) answers plain text before any route runs.
Hostile bodies (NUL, lone surrogates, deep nesting, NaN, duplicate keys, latin-1) are all a 400,
never a 500.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from support.app import BASE_URL, Server, build, fns, freeze_limiter, servers
from support.http import JSON

TEXT = "text/plain; charset=utf-8"
APP_JSON = "application/json"


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


@pytest.fixture
def server(make: Callable[..., Server]) -> Server:
    return make()


def assert_json(response: httpx.Response, status: int, body: bytes) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == APP_JSON
    assert response.content == body


def assert_text(response: httpx.Response, status: int, text: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == TEXT
    assert response.text == text


# -- 401 -----------------------------------------------------------------------------------------------


def test_401_on_required_and_admin_routes_is_the_same_json_body(server: Server) -> None:
    plain = server.key("alice", ["ops"])
    expired = server.key("bob", [], expires_in=-1.0)
    for path, headers in (
        ("/whoami", {}),
        ("/whoami", {"X-API-Key": "trk_aaaaaaaaaa_" + "b" * 43}),
        ("/whoami", {"X-API-Key": expired}),
        ("/users", {}),
        ("/users", {"X-API-Key": plain}),
        ("/users", {"Authorization": f"Bearer {expired}"}),
    ):
        assert_json(server.client.get(path, headers=headers), 401, b'{"error":"unauthorized"}')


def test_a_repeated_api_key_query_parameter_is_a_401(server: Server) -> None:
    key = server.key("alice", [])
    response = server.client.get(f"/whoami?api-key={key}&api-key={key}")
    assert_json(response, 401, b'{"error":"unauthorized"}')


# -- 404 -----------------------------------------------------------------------------------------------


def test_get_404_is_json_not_found(server: Server) -> None:
    assert_json(server.client.get("/tools/no.such"), 404, b'{"error":"not found"}')
    assert_json(server.client.get("/tools/ops.restart"), 404, b'{"error":"not found"}')


def test_post_404_is_plain_text(server: Server) -> None:
    assert_text(server.client.post("/tools/no.such", json={}), 404, "NotFound: no tool 'no.such'")
    assert_text(server.client.post("/tools/ops.restart", json={}), 404, "NotFound: no tool 'ops.restart'")


def test_an_inaccessible_key_is_404_before_the_body_is_even_looked_at(server: Server) -> None:
    response = server.client.post("/tools/ops.restart", content=b"not json", headers={"content-type": "text/plain"})
    assert_text(response, 404, "NotFound: no tool 'ops.restart'")


def test_an_unknown_route_and_a_wrong_method_use_the_framework_defaults(server: Server) -> None:
    assert_text(server.client.get("/nope"), 404, "Not Found")
    assert_text(server.client.delete("/tools/pub.echo"), 405, "Method Not Allowed")


# -- 400 -----------------------------------------------------------------------------------------------


def test_400_on_json_routes_is_a_json_error(server: Server) -> None:
    assert_json(
        server.client.get("/tools?format=yaml"),
        400,
        b'{"error":"format must be json, md or html, not \'yaml\'"}',
    )
    assert_json(
        server.client.get("/tools?format=json&format=md"),
        400,
        b'{"error":"query parameter \'format\' is given more than once"}',
    )
    assert_json(
        server.client.get("/search?limit=0"),
        400,
        b'{"error":"query parameter \'limit\' must be between 1 and 100"}',
    )
    assert_json(
        server.client.get("/search?offset=x"),
        400,
        b"{\"error\":\"query parameter 'offset' must be an integer, not 'x'\"}",
    )
    admin = server.key("root", ["admin"])
    assert_json(
        server.client.get("/users?keys=maybe", headers={"X-API-Key": admin}),
        400,
        b'{"error":"keys must be true or false, not \'maybe\'"}',
    )


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (
            b"{",
            "UsageError: malformed JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        ),
        (b"\r\n\r\n", "UsageError: malformed JSON: Expecting value: line 3 column 1 (char 4)"),
        (b"[]", "UsageError: body must be a JSON object of parameter name to value, not an array"),
        (b"true", "UsageError: body must be a JSON object of parameter name to value, not a boolean"),
        (b"{}", "ParamError: missing required parameter 'msg' (str) for pub.echo"),
        (b'{"msg": 1, "x": 2}', "ParamError: unknown parameter 'x' for pub.echo (accepted: msg)"),
        (b'{"msg": {"a": 1}}', "ParamError: parameter 'msg' expects str, got dict"),
    ],
)
def test_post_400_is_a_one_line_plain_text_summary(server: Server, body: bytes, text: str) -> None:
    assert_text(server.client.post("/tools/pub.echo", content=body, headers=JSON), 400, text)


# -- hostile input: every one a 400 that names the problem, never a 500 -----------------------------------


@pytest.mark.parametrize(
    ("body", "text"),
    [
        (b'{"msg": "a\\u0000b"}', "ParamError: parameter 'msg': NUL bytes are not allowed"),
        (b'{"msg": "\\ud800"}', "ParamError: parameter 'msg': not valid UTF-8 text (lone surrogate)"),
        (b'{"msg": "\\udfff tail"}', "ParamError: parameter 'msg': not valid UTF-8 text (lone surrogate)"),
        (b"[" * 200_000 + b"]" * 200_000, "UsageError: malformed JSON: nested too deeply"),
        (b'{"msg": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "UsageError: malformed JSON: nested too deeply"),
        (b'{"a": ' * 100_000, "UsageError: malformed JSON: nested too deeply"),
        (b'{"msg": NaN}', "UsageError: malformed JSON: NaN is not valid JSON"),
        (b'{"msg": -Infinity}', "UsageError: malformed JSON: -Infinity is not valid JSON"),
        (b'{"msg": 1e999}', "ParamError: parameter 'msg' expects str, got inf"),
        (b'{"msg": "a", "msg": "b"}', "UsageError: malformed JSON: duplicate key 'msg'"),
        (
            '{"msg": "caf\u00e9"}'.encode("latin-1"),
            "UsageError: body is not UTF-8 (invalid continuation byte at byte 12)",
        ),
        (b'{"msg": "\xff\xfe"}', "UsageError: body is not UTF-8 (invalid start byte at byte 9)"),
        ('{"msg": "hi"}'.encode("utf-16"), "UsageError: body is not UTF-8 (invalid start byte at byte 0)"),
    ],
    ids=[
        "nul",
        "lone-high-surrogate",
        "lone-low-surrogate",
        "200k-brackets",
        "200k-brackets-in-a-value",
        "100k-open-objects",
        "nan",
        "minus-infinity",
        "overflowing-float",
        "duplicate-key",
        "latin-1",
        "invalid-bytes",
        "utf-16",
    ],
)
def test_hostile_bodies_are_a_400_never_a_500(server: Server, body: bytes, text: str) -> None:
    assert_text(server.client.post("/tools/pub.echo", content=body, headers=JSON), 400, text)


def test_nul_and_surrogates_inside_nested_values_are_a_400_naming_the_param(tmp_path: Path) -> None:
    catalog = """\
version: 1
group: pub
tools:
  - name: nest
    public: true
    exec: printf '%s' {{ items | quote }}
    params:
      - name: items
        type: list
"""
    from starlette.testclient import TestClient

    from support.app import load_settings, write_test_catalog
    from toolrun.server.run import build_app

    path = write_test_catalog(tmp_path / "nested", catalog)
    app = build_app(load_settings(tmp_path / "toolrun-home"), [str(path)])
    with TestClient(app, base_url=BASE_URL) as client:
        for body in (b'{"items": ["ok", "a\\u0000"]}', b'{"items": [{"k\\ud800": 1}]}'):
            response = client.post("/tools/pub.nest", content=body, headers=JSON)
            assert response.status_code == 400
            assert response.text.startswith("ParamError: parameter 'items': ")
        deep = b'{"items": ' + b"[" * 100 + b"]" * 100 + b"}"
        assert_text(
            client.post("/tools/pub.nest", content=deep, headers=JSON),
            400,
            "ParamError: parameter 'items': nested more than 64 levels deep",
        )


def test_a_bom_before_the_json_is_accepted(server: Server) -> None:
    response = server.client.post("/tools/pub.echo", content=b'\xef\xbb\xbf{"msg": "bom"}', headers=JSON)
    assert response.status_code == 200
    assert response.text == "bom"


# -- 413, 415, 408 ---------------------------------------------------------------------------------------


def test_413_when_the_body_is_over_max_body_bytes(make: Callable[..., Server]) -> None:
    server = make({"max_body_bytes": 100})
    big = b'{"msg": "' + b"x" * 200 + b'"}'
    assert_text(
        server.client.post("/tools/pub.echo", content=big, headers=JSON),
        413,
        "PayloadTooLarge: request body is larger than 100 bytes",
    )
    assert server.client.post("/tools/pub.echo", content=b'{"msg": "' + b"x" * 80 + b'"}', headers=JSON).text == (
        "x" * 80
    )


def test_413_also_when_a_chunked_body_without_content_length_grows_too_big(make: Callable[..., Server]) -> None:
    server = make({"max_body_bytes": 100})

    def chunks() -> Iterator[bytes]:
        yield b'{"msg": "'
        for _ in range(20):
            yield b"x" * 20
        yield b'"}'

    response = server.client.post("/tools/pub.echo", content=chunks(), headers=JSON)
    assert_text(response, 413, "PayloadTooLarge: request body is larger than 100 bytes")


@pytest.mark.parametrize(
    ("content_type", "shown"),
    [
        ("text/plain", "'text/plain'"),
        ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),
        ("multipart/form-data; boundary=x", "'multipart/form-data'"),
    ],
)
def test_415_when_a_post_body_is_not_declared_json(server: Server, content_type: str, shown: str) -> None:
    response = server.client.post("/tools/pub.echo", content=b'{"msg": "hi"}', headers={"content-type": content_type})
    assert_text(response, 415, f"UnsupportedMediaType: Content-Type must be application/json, not {shown}")


def test_415_when_a_body_comes_without_any_content_type(server: Server) -> None:
    response = server.client.post("/tools/pub.echo", content=b'{"msg": "hi"}', headers={"content-type": ""})
    assert_text(response, 415, "UnsupportedMediaType: Content-Type must be application/json, not 'missing'")


def test_json_with_a_charset_or_a_json_suffix_type_is_accepted(server: Server) -> None:
    for content_type in ("application/json; charset=utf-8", "Application/JSON", "application/vnd.api+json"):
        response = server.client.post(
            "/tools/pub.echo", content=b'{"msg": "ok"}', headers={"content-type": content_type}
        )
        assert response.status_code == 200, content_type


def test_408_when_the_client_stalls_while_sending_its_body(tmp_path: Path) -> None:
    app, _ = build(tmp_path, {"request_timeout": 0.2})
    never = asyncio.Event

    async def main() -> httpx.Response:
        stall = never()

        async def body() -> AsyncIterator[bytes]:
            yield b'{"msg": '
            await stall.wait()

        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            return await client.post("/tools/pub.echo", content=body(), headers=JSON)

    response = asyncio.run(main())
    assert_text(response, 408, "RequestTimeout: request body not received within 0.2 seconds")


# -- the guard: 403 cross-origin POST, 400 bad Host ---------------------------------------------------------


def test_403_for_a_post_from_a_foreign_origin(server: Server) -> None:
    headers = {**JSON, "Origin": "http://evil.example"}
    response = server.client.post("/tools/pub.echo", json={"msg": "hi"}, headers=headers)
    assert_text(response, 403, "Forbidden: cross-origin request from 'http://evil.example' is not allowed")


def test_a_same_origin_post_and_a_cross_origin_get_are_allowed(server: Server) -> None:
    same = server.client.post("/tools/pub.echo", json={"msg": "hi"}, headers={"Origin": BASE_URL})
    assert same.status_code == 200
    get = server.client.get("/tools", headers={"Origin": "http://evil.example"})
    assert get.status_code == 200
    assert "access-control-allow-origin" not in get.headers  # no CORS by default


def test_an_allowed_origin_may_post_and_gets_cors_headers(make: Callable[..., Server]) -> None:
    server = make({"allowed_origins": ["http://ui.example"]})
    response = server.client.post("/tools/pub.echo", json={"msg": "hi"}, headers={"Origin": "http://ui.example"})
    assert response.status_code == 200
    assert response.headers["access-control-allow-origin"] == "http://ui.example"
    # A page of that origin may read the exit code (and the request id, and Retry-After) of the answer.
    exposed = [h.strip() for h in response.headers["access-control-expose-headers"].split(",")]
    assert {"X-Toolrun-Exit-Code", "X-Request-Id", "Retry-After"} <= set(exposed)
    assert response.headers["x-toolrun-exit-code"] == "0"
    preflight = server.client.options("/tools/pub.echo", headers={"Origin": "http://ui.example"})
    assert preflight.status_code == 204
    assert "X-API-Key" in preflight.headers["access-control-allow-headers"]


@pytest.mark.parametrize("host", ["evil.example", "attacker.test:8080", "127.0.0.1.evil.example", ""])
def test_400_for_a_host_header_that_is_not_allowed(server: Server, host: str) -> None:
    response = server.client.get("/healthz", headers={"host": host})
    assert_text(response, 400, "Invalid host header")


def test_loopback_host_names_with_ports_are_allowed(server: Server) -> None:
    for host in ("127.0.0.1:8080", "localhost", "LOCALHOST:1", "[::1]:8080"):
        assert server.client.get("/healthz", headers={"host": host}).status_code == 200, host


# -- 429, 500, 503 -------------------------------------------------------------------------------------------


def test_429_is_plain_text_with_the_seconds_and_a_retry_after_header(make: Callable[..., Server]) -> None:
    server = make({"rate_limit.enabled": True, "rate_limit.calls": 2, "rate_limit.window": 30})
    freeze_limiter(server.parts, at=30 * 1000 + 5.5)  # 24.5 s left in the window
    for _ in range(2):
        server.client.post("/tools/pub.noargs")
    response = server.client.post("/tools/pub.noargs")
    assert_text(response, 429, "RateLimited: rate limit exceeded for 'pub.noargs'; retry after 25 seconds")
    assert response.headers["retry-after"] == "25"


def test_500_is_a_type_message_line_or_the_traceback_with_debug(make: Callable[..., Server]) -> None:
    assert_text(make().client.post("/tools/pub.boom"), 500, "ValueError: kaput")
    debug = make({"debug": True}).client.post("/tools/pub.boom")
    assert debug.status_code == 500
    assert debug.headers["content-type"] == TEXT
    lines = debug.text.rstrip("\n").splitlines()
    assert lines[0] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: kaput"


def test_503_when_max_concurrent_calls_are_all_running(tmp_path: Path) -> None:
    app, parts = build(tmp_path, {"max_concurrent_calls": 1, "queue_timeout": 0})
    module = fns()

    async def main() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        module.STARTED = asyncio.Event()
        module.RELEASE = asyncio.Event()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            first = asyncio.create_task(client.post("/tools/pub.hold", json={}))
            await asyncio.wait_for(module.STARTED.wait(), 10)
            busy = await client.post("/tools/pub.echo", json={"msg": "hi"})
            module.RELEASE.set()
            held = await first
            after = await client.post("/tools/pub.echo", json={"msg": "hi"})
            return held, busy, after

    held, busy, after = asyncio.run(main())
    assert_text(busy, 503, "Overloaded: server busy: 1 tool process already running; retry shortly")
    assert busy.headers["retry-after"] == "1"
    assert (held.status_code, held.text) == (200, "released")
    assert (after.status_code, after.text) == (200, "hi")
    assert parts.service.running == 0


def test_a_call_beyond_the_cap_waits_for_a_free_slot_within_queue_timeout(tmp_path: Path) -> None:
    app, parts = build(tmp_path, {"max_concurrent_calls": 1, "queue_timeout": 30})
    module = fns()

    async def parked() -> None:
        while parts.service.waiting == 0:  # yield to the loop until the second call waits in the queue
            await asyncio.sleep(0)

    async def main() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        module.STARTED = asyncio.Event()
        module.RELEASE = asyncio.Event()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            first = asyncio.create_task(client.post("/tools/pub.hold", json={}))
            await asyncio.wait_for(module.STARTED.wait(), 10)
            queued = asyncio.create_task(client.post("/tools/pub.echo", json={"msg": "queued"}))
            await asyncio.wait_for(parked(), 10)
            # The queue holds at most max_concurrent callers: the next one is refused at once.
            refused = await client.post("/tools/pub.echo", json={"msg": "refused"})
            module.RELEASE.set()
            return await first, await queued, refused

    held, queued, refused = asyncio.run(main())
    assert (held.status_code, held.text) == (200, "released")
    assert (queued.status_code, queued.text) == (200, "queued")
    assert_text(refused, 503, "Overloaded: server busy: 1 tool process already running; retry shortly")
    assert (parts.service.running, parts.service.waiting) == (0, 0)


# -- /readyz 503 ----------------------------------------------------------------------------------------------


def test_readyz_503_body_is_exactly_degraded(server: Server) -> None:
    async def broken() -> None:
        raise RuntimeError("redis://secret-host:6379 refused")

    server.parts.checks["cache"] = broken
    assert_json(server.client.get("/readyz"), 503, b'{"status":"degraded"}')
