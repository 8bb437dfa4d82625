"""The plain HTTP routes, row by row and rule by rule (spec sections 4, 5 and 7), in-process."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.app import ALL_KEYS, OPS_KEYS, PUBLIC_KEYS, Server, freeze_limiter, servers
from support.http import JSON
from support.servers import free_port

UNAUTHORIZED = {"error": "unauthorized"}
NOT_FOUND = {"error": "not found"}
ENTRY_FIELDS = ["description", "example", "groups", "key", "params", "return_type"]


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


@pytest.fixture
def server(make: Callable[..., Server]) -> Server:
    return make()


def keys_of(entries: list[dict[str, object]]) -> list[object]:
    return [e["key"] for e in entries]


# -- /healthz and /readyz -------------------------------------------------------------------------


def test_healthz_answers_ok(server: Server) -> None:
    response = server.client.get("/healthz")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == {"status": "ok"}


def test_healthz_makes_no_backend_calls_so_it_stays_ok_when_every_check_fails(server: Server) -> None:
    async def broken() -> None:
        raise RuntimeError("down")

    server.parts.checks = dict.fromkeys(server.parts.checks, broken)
    assert server.client.get("/readyz").status_code == 503
    assert server.client.get("/healthz").json() == {"status": "ok"}


def test_readyz_is_ok_when_every_check_passes(server: Server) -> None:
    # catalog: the last reload; sandbox: the sandboxed tools (none here) can run
    assert set(server.parts.checks) == {"search", "cache", "loader", "catalog", "sandbox"}
    response = server.client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_readyz_is_degraded_when_a_check_raises_and_logs_which_one_server_side_only(
    server: Server, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken() -> None:
        raise ConnectionError("index file is gone")

    server.parts.checks["search"] = broken
    with caplog.at_level(logging.WARNING, logger="toolrun"):
        response = server.client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "degraded"}
    assert "search" not in response.text and "index" not in response.text
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("toolrun")]
    assert any("search" in m and "index file is gone" in m for m in logged), logged


def test_readyz_is_degraded_when_a_check_hangs_past_the_readiness_timeout(
    make: Callable[..., Server], caplog: pytest.LogCaptureFixture
) -> None:
    server = make({"readiness_timeout": 0.05})

    async def hangs() -> None:
        await asyncio.Event().wait()

    server.parts.checks["cache"] = hangs
    with caplog.at_level(logging.WARNING, logger="toolrun"):
        response = server.client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "degraded"}
    assert "cache" not in response.text
    assert any("cache" in r.getMessage() and "TimeoutError" in r.getMessage() for r in caplog.records)


def test_readyz_is_ok_again_once_the_check_recovers(server: Server) -> None:
    healthy = server.parts.checks["loader"]

    async def broken() -> None:
        raise OSError("disk")

    server.parts.checks["loader"] = broken
    assert server.client.get("/readyz").status_code == 503
    server.parts.checks["loader"] = healthy
    assert server.client.get("/readyz").status_code == 200


# -- /whoami and the required mode ------------------------------------------------------------------


def test_whoami_returns_the_identity_record_of_the_key(server: Server) -> None:
    key = server.key("alice", ["ops", "dev"], email="alice@example.com")
    response = server.client.get("/whoami", headers={"X-API-Key": key})
    assert response.status_code == 200
    assert response.json() == {
        "username": "alice",
        "email": "alice@example.com",
        "groups": ["dev", "ops"],
        "tools": OPS_KEYS,
    }


def test_whoami_without_a_key_is_401(server: Server) -> None:
    response = server.client.get("/whoami")
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED


def test_whoami_gives_the_same_401_for_missing_invalid_expired_and_revoked_keys(server: Server) -> None:
    store = server.parts.access
    good = server.key("alice", ["ops"])
    expired = server.key("bob", ["ops"], expires_in=-1.0)
    revoked, record = store.create_key("carol", ["ops"])
    assert store.revoke(record.prefix)
    forged = good[:-4] + ("AAAA" if not good.endswith("AAAA") else "BBBB")
    attempts: list[dict[str, str]] = [
        {},
        {"X-API-Key": "not-a-key"},
        {"X-API-Key": forged},
        {"X-API-Key": "trk_zzzzzzzzzz_" + "x" * 43},
        {"X-API-Key": expired},
        {"X-API-Key": revoked},
        {"Authorization": f"Bearer {expired}"},
        {"Authorization": "Basic dXNlcjpwYXNz"},
    ]
    bodies = set()
    for headers in attempts:
        response = server.client.get("/whoami", headers=headers)
        assert response.status_code == 401, headers
        assert response.headers["content-type"] == "application/json"
        bodies.add(response.content)
    assert bodies == {b'{"error":"unauthorized"}'}
    assert server.client.get("/whoami", headers={"X-API-Key": good}).status_code == 200


def test_a_key_stops_working_the_moment_it_is_revoked(server: Server) -> None:
    key, record = server.parts.access.create_key("alice", [])
    assert server.client.get("/whoami", headers={"X-API-Key": key}).status_code == 200
    server.parts.access.revoke(record.prefix)
    assert server.client.get("/whoami", headers={"X-API-Key": key}).status_code == 401


# -- key sources (spec 5) ------------------------------------------------------------------------------


def test_each_key_source_alone_resolves_the_user(server: Server) -> None:
    key = server.key("alice", [])
    for kwargs in (
        {"headers": {"X-API-Key": key}},
        {"headers": {"Authorization": f"Bearer {key}"}},
        {"headers": {"Authorization": f"bearer {key}"}},
        {"params": {"api-key": key}},
    ):
        response = server.client.get("/whoami", **kwargs)  # type: ignore[arg-type]
        assert response.status_code == 200, kwargs
        assert response.json()["username"] == "alice"


def test_key_sources_apply_in_priority_order_x_api_key_then_bearer_then_query(server: Server) -> None:
    header_key = server.key("alice", [])
    bearer_key = server.key("bob", [])
    query_key = server.key("carol", [])

    def who(headers: dict[str, str], query: bool) -> str:
        params = {"api-key": query_key} if query else {}
        response = server.client.get("/whoami", headers=headers, params=params)
        assert response.status_code == 200
        return str(response.json()["username"])

    both_headers = {"X-API-Key": header_key, "Authorization": f"Bearer {bearer_key}"}
    assert who(both_headers, query=True) == "alice"
    assert who({"Authorization": f"Bearer {bearer_key}"}, query=True) == "bob"
    assert who({"X-API-Key": header_key}, query=True) == "alice"
    assert who({}, query=True) == "carol"


def test_a_header_key_wins_over_the_query_key_even_when_the_header_key_is_bad(server: Server) -> None:
    query_key = server.key("carol", [])
    response = server.client.get("/whoami", headers={"X-API-Key": "bogus"}, params={"api-key": query_key})
    assert response.status_code == 401
    assert response.json() == UNAUTHORIZED


def test_anonymous_routes_never_resolve_a_key(server: Server) -> None:
    for path in ("/healthz", "/readyz", "/metrics"):
        assert server.client.get(path, headers={"X-API-Key": "garbage"}).status_code == 200, path
        assert server.client.get(path, params={"api-key": "garbage"}).status_code == 200, path


def test_optional_routes_refuse_a_key_that_does_not_resolve_instead_of_calling_anonymously(
    server: Server,
) -> None:
    # A key that is given must resolve, on every route that reads keys: an invalid, expired or
    # revoked key used to run the call in an anonymous bucket, silently.
    expired = server.key("erin", [], expires_in=0.001)
    revoked = server.key("rita", [])
    server.parts.access.revoke(revoked.split("_")[1])
    time.sleep(0.01)  # let the 1 ms key expire
    for bad in ("garbage", expired, revoked):
        for method, path in [("GET", "/tools"), ("GET", "/tools/pub.echo"), ("GET", "/search?q=echo")]:
            response = server.client.request(method, path, headers={"X-API-Key": bad})
            assert response.status_code == 401, (bad, path)
            assert response.json() == UNAUTHORIZED
        response = server.client.post("/tools/pub.echo", json={"msg": "hi"}, headers={"X-API-Key": bad})
        assert response.status_code == 401, bad
        response = server.client.get("/tools", params={"api-key": bad})
        assert response.status_code == 401, bad
    assert server.client.get("/tools").status_code == 200  # no key at all is still anonymous


# -- /tools ---------------------------------------------------------------------------------------------


def test_tools_lists_entries_as_json_by_default_sorted_by_key(server: Server) -> None:
    response = server.client.get("/tools")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    entries = response.json()
    assert keys_of(entries) == sorted(keys_of(entries)) == PUBLIC_KEYS
    assert all(sorted(e) == ENTRY_FIELDS for e in entries)


def test_a_tool_entry_has_the_fields_of_spec_2_1_and_2_2(server: Server) -> None:
    entries = {e["key"]: e for e in server.client.get("/tools").json()}
    assert entries["pub.echo"] == {
        "key": "pub.echo",
        "groups": ["pub", "public"],
        "params": [
            {"name": "msg", "type": "str", "required": True, "default": None, "description": "", "example": "hi"}
        ],
        "return_type": "str | (int, str, str)",
        "description": "Print a message back.",
        "example": "pub.echo(msg='hi')",
    }
    assert entries["pub.boom"]["return_type"] == "str"


def test_tools_format_json_md_and_html(server: Server) -> None:
    as_json = server.client.get("/tools", params={"format": "json"})
    assert as_json.json() == server.client.get("/tools").json()
    md = server.client.get("/tools", params={"format": "md"})
    assert md.status_code == 200
    assert md.headers["content-type"].startswith("text/markdown")
    positions = [md.text.index(f"`{key}`") for key in PUBLIC_KEYS]
    assert positions == sorted(positions)
    assert "pub.echo(msg: str) -> str | (int, str, str)" in md.text
    html = server.client.get("/tools", params={"format": "html"})
    assert html.status_code == 200
    assert html.headers["content-type"].startswith("text/html")
    assert "<code>pub.echo</code>" in html.text
    assert "str | (int, str, str)" in html.text
    assert "ops.restart" not in md.text + html.text


def test_tools_with_an_unknown_format_is_400(server: Server) -> None:
    response = server.client.get("/tools", params={"format": "yaml"})
    assert response.status_code == 400
    assert response.headers["content-type"] == "application/json"
    assert "format" in response.json()["error"]


# -- scoping (spec 4 rule 2) --------------------------------------------------------------------------------


def test_anonymous_callers_see_public_tools_only(server: Server) -> None:
    assert keys_of(server.client.get("/tools").json()) == PUBLIC_KEYS


def test_a_user_sees_the_tools_of_their_groups_and_the_public_ones(server: Server) -> None:
    key = server.key("alice", ["ops"])
    assert keys_of(server.client.get("/tools", headers={"X-API-Key": key}).json()) == OPS_KEYS


def test_an_admin_sees_every_tool(server: Server) -> None:
    key = server.key("root", ["admin"])
    assert keys_of(server.client.get("/tools", headers={"X-API-Key": key}).json()) == ALL_KEYS


def test_search_applies_the_same_scoping_as_tools(server: Server) -> None:
    ops = server.key("alice", ["ops"])
    admin = server.key("root", ["admin"])

    def found(query: str, key: str | None) -> list[object]:
        headers = {"X-API-Key": key} if key else {}
        response = server.client.get("/search", params={"q": query, "limit": 100}, headers=headers)
        assert response.status_code == 200
        return keys_of(response.json()["items"])

    assert found("", None) == PUBLIC_KEYS
    assert found("", ops) == OPS_KEYS
    assert found("", admin) == ALL_KEYS
    assert found("payroll", None) == []
    assert found("payroll", ops) == []
    assert found("payroll", admin) == ["finance.payroll"]
    assert found("restart", None) == []
    assert found("restart", ops) == ["ops.restart"]


def test_search_pages_carry_has_more_and_next_offset_with_a_default_size_of_10(server: Server) -> None:
    admin = server.key("root", ["admin"])
    page = server.client.get("/search", headers={"X-API-Key": admin}).json()
    assert page["limit"] == 10
    assert page["has_more"] is False and page["next_offset"] is None
    first = server.client.get("/search", params={"limit": 4}, headers={"X-API-Key": admin}).json()
    assert (first["has_more"], first["next_offset"], first["total"]) == (True, 4, len(ALL_KEYS))
    second = server.client.get("/search", params={"limit": 4, "offset": 4}, headers={"X-API-Key": admin}).json()
    third = server.client.get("/search", params={"limit": 4, "offset": 8}, headers={"X-API-Key": admin}).json()
    assert third["has_more"] is False and third["next_offset"] is None
    assert keys_of(first["items"] + second["items"] + third["items"]) == ALL_KEYS


def test_search_ranks_a_matching_tool_first(server: Server) -> None:
    items = server.client.get("/search", params={"q": "message"}).json()["items"]
    assert keys_of(items)[0] == "pub.echo"


@pytest.mark.parametrize("query", ['disk"', "*", "a OR b", "NEAR(", "'; DROP TABLE", "\u00e9t\u00e9", "x" * 500, " "])
def test_search_never_errors_on_odd_query_text(server: Server, query: str) -> None:
    response = server.client.get("/search", params={"q": query})
    assert response.status_code == 200
    assert response.json()["query"] == query


def test_search_rejects_bad_paging_values_with_400(server: Server) -> None:
    for params in ({"limit": "0"}, {"limit": "101"}, {"offset": "-1"}, {"offset": "x"}):
        response = server.client.get("/search", params=params)
        assert response.status_code == 400, params
        assert set(response.json()) == {"error"}


# -- GET /tools/{key} -----------------------------------------------------------------------------------------


def test_get_tool_returns_one_entry(server: Server) -> None:
    response = server.client.get("/tools/pub.echo")
    assert response.status_code == 200
    assert response.json() == next(e for e in server.client.get("/tools").json() if e["key"] == "pub.echo")


def test_get_tool_gives_the_same_404_for_unknown_and_inaccessible_keys(server: Server) -> None:
    ops = server.key("alice", ["ops"])
    cases = [
        ("/tools/no.such", {}),
        ("/tools/ops.restart", {}),
        ("/tools/finance.payroll", {"X-API-Key": ops}),
    ]
    for path, headers in cases:
        response = server.client.get(path, headers=headers)
        assert response.status_code == 404, path
        assert response.content == b'{"error":"not found"}'
    assert server.client.get("/tools/ops.restart", headers={"X-API-Key": ops}).status_code == 200


# -- POST /tools/{key} -----------------------------------------------------------------------------------------


def test_post_tool_returns_the_result_as_plain_text(server: Server) -> None:
    response = server.client.post("/tools/pub.echo", json={"msg": "hello world"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == "hello world"


def test_post_tool_passes_shell_metacharacters_through_quoted(server: Server) -> None:
    nasty = "$(touch /tmp/pwned); `id` | cat && rm -rf ~ 'quoted' \"double\""
    assert server.client.post("/tools/pub.echo", json={"msg": nasty}).text == nasty


def test_an_exec_failure_is_a_200_whose_text_is_the_tuple_repr(server: Server) -> None:
    response = server.client.post("/tools/pub.fail", content=b"", headers=JSON)
    assert response.status_code == 200
    assert response.text == "(3, 'out', 'err')"


def test_an_exec_answer_carries_its_exit_code_in_a_header_in_text_and_in_json(server: Server) -> None:
    done = server.client.post("/tools/pub.echo", json={"msg": "hi"})
    assert (done.text, done.headers["x-toolrun-exit-code"]) == ("hi", "0")
    failed = server.client.post("/tools/pub.fail", json={})
    assert (failed.status_code, failed.text) == (200, "(3, 'out', 'err')")  # the body stays the spec's
    assert failed.headers["x-toolrun-exit-code"] == "3"
    as_json = server.client.post("/tools/pub.fail", json={}, headers={"accept": "application/json"})
    assert as_json.json()["returncode"] == 3 and as_json.headers["x-toolrun-exit-code"] == "3"


def test_an_fn_tool_or_an_error_answer_carries_no_exit_code(server: Server) -> None:
    fn = server.client.post("/tools/pub.remember", json={"value": "x"})
    assert fn.status_code == 200 and "x-toolrun-exit-code" not in fn.headers
    refused = server.client.post("/tools/pub.echo", json={})
    assert refused.status_code == 400 and "x-toolrun-exit-code" not in refused.headers


def test_a_timeout_is_exit_code_minus_1_and_a_curl_tool_gives_curls_exit_code(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from support.app import BASE_URL, load_settings, write_test_catalog
    from toolrun.server.run import build_app

    closed = free_port()  # a port nothing listens on: curl exits 7 (could not connect)
    text = (
        "version: 1\ngroup: pub\ntools:\n"
        "  - {name: slow, public: true, exec: sleep 5, timeout: 0.2}\n"
        f"  - {{name: fetch, public: true, curl: 'http://127.0.0.1:{closed}/'}}\n"
    )
    catalog = write_test_catalog(tmp_path / "catalog", text)
    app = build_app(load_settings(tmp_path / "home"), [str(catalog)])
    with TestClient(app, base_url=BASE_URL) as client:
        slow = client.post("/tools/pub.slow", json={})
        assert (slow.status_code, slow.text) == (200, "(-1, '', 'timeout after 0.2s')")
        assert slow.headers["x-toolrun-exit-code"] == "-1"
        fetch = client.post("/tools/pub.fetch", json={}, headers={"accept": "application/json"})
        assert fetch.status_code == 200 and fetch.json()["returncode"] == 7
        assert fetch.headers["x-toolrun-exit-code"] == "7"


def test_the_exit_code_header_is_in_the_openapi_document(server: Server) -> None:
    doc = server.client.get("/openapi.json").json()
    for path in ("/tools/{key}", "/tools/pub.echo"):
        header = doc["paths"][path]["post"]["responses"]["200"]["headers"]["X-Toolrun-Exit-Code"]
        assert header["schema"] == {"type": "integer"} and "fn tools" in header["description"]


def test_an_empty_body_is_accepted_for_a_tool_without_required_params(server: Server) -> None:
    assert server.client.post("/tools/pub.noargs").text == "ok"
    assert server.client.post("/tools/pub.noargs", content=b"", headers=JSON).text == "ok"
    assert server.client.post("/tools/pub.noargs", json={}).text == "ok"


def test_params_are_coerced_to_the_declared_type(server: Server) -> None:
    assert server.client.post("/tools/pub.count", json={"n": "42"}).text == "42"
    assert server.client.post("/tools/pub.count", json={"n": 7.0}).text == "7"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"{", "UsageError: malformed JSON"),
        (b'{"msg": "hi"} trailing', "UsageError: malformed JSON"),
        (b"[1, 2]", "UsageError: body must be a JSON object of parameter name to value, not an array"),
        (b'"hi"', "UsageError: body must be a JSON object of parameter name to value, not a string"),
        (b"null", "UsageError: body must be a JSON object of parameter name to value, not null"),
        (b"42", "UsageError: body must be a JSON object of parameter name to value, not a number"),
    ],
)
def test_post_tool_rejects_malformed_or_non_object_bodies_with_plain_400(
    server: Server, body: bytes, expected: str
) -> None:
    response = server.client.post("/tools/pub.echo", content=body, headers=JSON)
    assert response.status_code == 400
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text.startswith(expected)
    assert "\n" not in response.text


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({}, "ParamError: missing required parameter 'msg' (str) for pub.echo"),
        ({"msg": "hi", "extra": 1}, "ParamError: unknown parameter 'extra' for pub.echo (accepted: msg)"),
        ({"msg": ["a"]}, "ParamError: parameter 'msg' expects str, got list"),
    ],
)
def test_a_parameter_error_is_a_400_naming_the_parameter(
    server: Server, args: dict[str, object], expected: str
) -> None:
    response = server.client.post("/tools/pub.echo", json=args)
    assert response.status_code == 400
    assert response.text == expected


def test_an_int_param_given_text_is_a_400_naming_it(server: Server) -> None:
    response = server.client.post("/tools/pub.count", json={"n": "many"})
    assert response.status_code == 400
    assert response.text == "ParamError: parameter 'n' expects int, got str 'many'"


def test_post_tool_gives_the_same_plain_404_for_unknown_and_inaccessible_keys(server: Server) -> None:
    ops = server.key("alice", ["ops"])
    for key, headers in (
        ("zz.qq", {}),
        ("ops.restart", {}),
        ("finance.payroll", {"X-API-Key": ops}),
    ):
        unknown = server.client.post(f"/tools/{key}", json={}, headers=headers)
        assert unknown.status_code == 404
        assert unknown.headers["content-type"] == "text/plain; charset=utf-8"
        assert unknown.text == f"NotFound: no tool {key!r}"
    assert server.client.post("/tools/ops.restart", json={"service": "web"}, headers={"X-API-Key": ops}).text == (
        "restarted web"
    )


def test_the_404_hint_only_suggests_tools_the_caller_can_see(server: Server) -> None:
    anonymous = server.client.post("/tools/ops.restar", json={})
    assert anonymous.text == "NotFound: no tool 'ops.restar'"
    ops = server.key("alice", ["ops"])
    hinted = server.client.post("/tools/ops.restar", json={}, headers={"X-API-Key": ops})
    assert hinted.status_code == 404
    assert "ops.restart" in hinted.text


def test_a_raising_fn_tool_is_a_500_with_a_one_line_summary(server: Server) -> None:
    response = server.client.post("/tools/pub.boom", json={})
    assert response.status_code == 500
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == "ValueError: kaput"


def test_with_debug_on_a_raising_tool_returns_the_full_traceback(make: Callable[..., Server]) -> None:
    server = make({"debug": True})
    response = server.client.post("/tools/pub.boom", json={})
    assert response.status_code == 500
    assert response.text.startswith("Traceback (most recent call last):")
    assert 'raise ValueError("kaput")' in response.text
    assert response.text.rstrip().endswith("ValueError: kaput")


def test_post_tool_runs_identity_only_so_session_values_never_persist(server: Server) -> None:
    first = server.client.post("/tools/pub.remember", json={"value": "one"})
    second = server.client.post("/tools/pub.remember", json={"value": "two"})
    assert (first.text, second.text) == ("unset|False", "unset|False")


# -- rate limits (spec 4 rule 4, spec 8) --------------------------------------------------------------------------


def test_rate_limit_is_off_by_default(server: Server) -> None:
    for _ in range(5):
        assert server.client.post("/tools/pub.noargs").status_code == 200


def test_the_third_call_in_a_window_of_two_is_a_429_with_retry_after(make: Callable[..., Server]) -> None:
    server = make({"rate_limit.enabled": True, "rate_limit.calls": 2, "rate_limit.window": 60})
    freeze_limiter(server.parts, at=time.time())
    assert [server.client.post("/tools/pub.noargs").status_code for _ in range(2)] == [200, 200]
    limited = server.client.post("/tools/pub.noargs")
    assert limited.status_code == 429
    assert limited.headers["content-type"] == "text/plain; charset=utf-8"
    seconds = int(limited.headers["retry-after"])
    assert 1 <= seconds <= 60
    unit = "second" if seconds == 1 else "seconds"
    assert limited.text == f"RateLimited: rate limit exceeded for 'pub.noargs'; retry after {seconds} {unit}"


def test_rate_limit_buckets_are_per_user_and_per_tool(make: Callable[..., Server]) -> None:
    server = make({"rate_limit.enabled": True, "rate_limit.calls": 2})
    freeze_limiter(server.parts, at=time.time())
    alice = {"X-API-Key": server.key("alice", [])}
    bob = {"X-API-Key": server.key("bob", [])}
    for _ in range(2):
        assert server.client.post("/tools/pub.noargs", headers=alice).status_code == 200
    assert server.client.post("/tools/pub.noargs", headers=alice).status_code == 429
    assert server.client.post("/tools/pub.echo", json={"msg": "x"}, headers=alice).status_code == 200
    assert server.client.post("/tools/pub.noargs", headers=bob).status_code == 200
    assert server.client.post("/tools/pub.noargs").status_code == 200  # anonymous: bucketed by address


# -- /users --------------------------------------------------------------------------------------------------------


def test_users_is_admin_only(server: Server) -> None:
    plain = server.key("alice", ["ops"])
    for headers in ({}, {"X-API-Key": "garbage"}, {"X-API-Key": plain}):
        response = server.client.get("/users", headers=headers)
        assert response.status_code == 401
        assert response.json() == UNAUTHORIZED
    admin = server.key("root", ["admin"], email="root@example.com")
    response = server.client.get("/users", headers={"X-API-Key": admin})
    assert response.status_code == 200
    assert response.json() == [
        {"username": "alice", "email": "", "groups": ["ops"]},
        {"username": "root", "email": "root@example.com", "groups": ["admin"]},
    ]


def test_users_with_keys_true_adds_key_metadata_and_never_the_hash_or_the_key(server: Server) -> None:
    alice_key, alice_record = server.parts.access.create_key("alice", ["ops"], expires_in=3600)
    admin = server.key("root", ["admin"])
    response = server.client.get("/users", params={"keys": "true"}, headers={"X-API-Key": admin})
    assert response.status_code == 200
    users = {u["username"]: u for u in response.json()}
    assert set(users["alice"]["key"]) == {"prefix", "created_at", "expires_at"}
    assert users["alice"]["key"]["prefix"] == alice_record.prefix
    assert users["alice"]["key"]["expires_at"].endswith("Z")
    assert users["root"]["key"]["expires_at"] is None
    for raw in (alice_key, admin):
        digest = hashlib.sha256(raw.encode()).hexdigest()
        for secret in (raw, digest, raw.split("_", 2)[2], digest[:16]):
            assert secret not in response.text


def test_users_without_keys_param_has_no_key_field(server: Server) -> None:
    admin = server.key("root", ["admin"])
    for params in ({}, {"keys": "false"}):
        users = server.client.get("/users", params=params, headers={"X-API-Key": admin}).json()
        assert all("key" not in u for u in users)


# -- /metrics ---------------------------------------------------------------------------------------------------------


def samples(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = server.client.get("/metrics")
    assert response.status_code == 200
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics_counts_one_call_once_with_its_duration(server: Server) -> None:
    response = server.client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=")
    assert "# TYPE svc_tool_calls_total counter" in response.text
    assert "# TYPE svc_tool_call_duration_seconds histogram" in response.text
    server.client.post("/tools/pub.echo", json={"msg": "hi"})
    found = samples(server)
    assert found[("svc_tool_calls_total", (("outcome", "ok"), ("tool", "pub.echo")))] == 1.0
    assert found[("svc_tool_call_duration_seconds_count", (("tool", "pub.echo"),))] == 1.0
    assert found[("svc_tool_call_duration_seconds_sum", (("tool", "pub.echo"),))] > 0


def test_metrics_label_each_outcome(server: Server) -> None:
    server.client.post("/tools/pub.fail")
    server.client.post("/tools/pub.boom")
    server.client.post("/tools/pub.echo", json={})
    found = samples(server)
    assert found[("svc_tool_calls_total", (("outcome", "error"), ("tool", "pub.fail")))] == 1.0
    assert found[("svc_tool_calls_total", (("outcome", "exception"), ("tool", "pub.boom")))] == 1.0
    assert found[("svc_tool_calls_total", (("outcome", "invalid"), ("tool", "pub.echo")))] == 1.0


def test_a_flood_of_unknown_or_hidden_keys_adds_no_series(server: Server) -> None:
    before = set(samples(server))
    for i in range(50):
        assert server.client.post(f"/tools/made.up{i}", json={}).status_code == 404
        assert server.client.get(f"/tools/made.up{i}").status_code == 404
    assert server.client.post("/tools/finance.payroll").status_code == 404
    assert set(samples(server)) == before
    assert "made.up" not in server.client.get("/metrics").text


def test_metrics_never_show_an_api_key(server: Server) -> None:
    key = server.key("alice", [])
    server.client.post("/tools/pub.echo", json={"msg": "x"}, headers={"X-API-Key": key})
    assert key not in server.client.get("/metrics").text


# -- /openapi.json ----------------------------------------------------------------------------------------------------


def test_openapi_json_documents_every_route(server: Server) -> None:
    response = server.client.get("/openapi.json")
    assert response.status_code == 200
    doc = response.json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) >= {
        "/healthz",
        "/readyz",
        "/whoami",
        "/tools",
        "/tools/{key}",
        "/users",
        "/metrics",
        "/search",
    }
