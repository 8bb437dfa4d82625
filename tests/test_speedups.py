"""The speed tricks form one table with one switch, `TOOLRUN_SPEEDUPS`, and each answers as its plain path does.

`make test` also runs the door tests with `TOOLRUN_SPEEDUPS=off` (on a worker of their own: tests/conftest.py): the
product must behave the same with every trick off, only slower. Here: the switch's syntax, its
start-up error, the table's own integrity, and the dispatcher's hot routes against the router.
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.app import Server, servers
from support.http import JSON
from support.speedups import HELD, build_without
from test_mcp_fast import call, modern_headers
from toolrun import speedups
from toolrun.errors import UsageError
from toolrun.exec import spawn

ROOT = Path(__file__).resolve().parent.parent


def test_on_off_and_a_list_of_names_turn_the_speedups_on_or_off() -> None:
    assert speedups.parse("") == speedups.parse("on") == speedups.parse(" ON ") == frozenset()
    assert speedups.parse("off") == frozenset(speedups.NAMES)
    assert speedups.parse("coalesce, mcp_fast_path") == {"coalesce", "mcp_fast_path"}


def test_an_unknown_name_is_an_error_naming_it_and_listing_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        speedups.parse("coalesce,turbo")
    message = str(caught.value)
    assert "'turbo'" in message and "TOOLRUN_SPEEDUPS" in message
    assert all(name in message for name in speedups.NAMES)
    with pytest.raises(KeyError, match="turbo"):
        speedups.on("turbo")  # a typo in the code that asks is no silent "on"


def test_toolrun_refuses_to_start_with_an_unknown_speedup(tmp_path: Path) -> None:
    env = {**os.environ, "TOOLRUN_HOME": str(tmp_path), "TOOLRUN_SPEEDUPS": "coalesce,turbo"}
    done = subprocess.run(
        [sys.executable, "-m", "toolrun", "list"], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 2, done.stderr
    assert "unknown speedup 'turbo'" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_off_in_the_environment_turns_every_trick_off_in_the_modules_that_hold_them(tmp_path: Path) -> None:
    probe = (
        "from toolrun.exec import executor, render, spawn; from toolrun import speedups\n"
        "from toolrun.server import protocol\n"
        "print(sorted(speedups.OFF) == sorted(speedups.NAMES), executor.DIRECT_EXEC, executor.HAS_PIDFD,\n"
        "      executor.THREADED_FROM > 10**9, spawn.LIBC is None, render.PLAIN_RENDER, protocol.COALESCE,\n"
        "      '+'.join(c.__name__ for c in protocol.http_protocol(1.0).__bases__))\n"
    )
    for value, expected in (
        ("off", "True False False True True False False SafeHttpToolsProtocol"),
        ("coalesce", f"False True True False {spawn._load() is None} True False IdleTimerHttpToolsProtocol"),
        (
            "",
            f"False True True False {spawn._load() is None} True True "
            "CoalescingHttpToolsProtocol+IdleTimerHttpToolsProtocol",
        ),
    ):
        env = {**os.environ, "TOOLRUN_HOME": str(tmp_path), "TOOLRUN_SPEEDUPS": value}
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
        assert done.stdout.strip() == expected, done.stderr


def test_every_row_names_what_it_replaces_its_gain_and_a_test_that_exists() -> None:
    assert len(set(speedups.NAMES)) == len(speedups.NAMES)
    for row in speedups.SPEEDUPS:
        assert re.fullmatch(r"[a-z_]+", row.name) and row.replaces and row.gain, row
        path, _, test = row.pinned_by.split(" ", 1)[0].partition("::")
        source = ROOT / path
        assert source.is_file(), f"{row.name}: {path} does not exist"
        if test:
            names = {n.name for n in ast.walk(ast.parse(source.read_text())) if isinstance(n, ast.FunctionDef)}
            assert test in names, f"{row.name}: {path} has no {test}"


def test_every_always_on_trick_names_code_that_exists_and_is_no_switchable_speedup() -> None:
    for row in speedups.ALWAYS_ON:
        assert row.does and row.why_always and row.name not in speedups.NAMES, row
        module, _, attribute = row.where.partition(":")
        found: object = importlib.import_module(module)
        for part in attribute.split("."):
            found = getattr(found, part)


def test_override_turns_off_the_value_a_process_started_with_the_trick_off_holds(tmp_path: Path) -> None:
    assert set(HELD) <= set(speedups.NAMES)
    probe = "import importlib; print(repr([getattr(importlib.import_module(m), a) for m, a, _ in HELD.values()]))"
    env = {**os.environ, "TOOLRUN_HOME": str(tmp_path), "TOOLRUN_SPEEDUPS": "off"}
    script = f"from support.speedups import HELD; {probe}"  # run in tests/, where `support` is
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=ROOT / "tests", capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == repr([value for _, _, value in HELD.values()]), done.stderr


def test_tests_set_a_trick_s_value_only_through_the_helper() -> None:
    """No test file sets a trick's module-level value by name (an assignment to a name of HELD, or a setattr of
    one): they go through support/speedups.py, whose HELD the test above checks against a process started with
    the trick off."""
    names = "|".join(re.escape(attr) for _, attr, _ in HELD.values()) + "|OFF"
    assignment = re.compile(rf"\.({names})\s*=(?!=)|setattr\([^,]+,\s*[\"']({names})[\"']")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if path != ROOT / "tests" / "support" / "speedups.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if assignment.search(line)
    ]
    assert offenders == []


def test_the_switch_is_documented_with_every_speedup_name() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "TOOLRUN_SPEEDUPS=off" in readme
    assert all(f"`{name}`" in readme for name in speedups.NAMES)


# -- the dispatcher's hot routes (speedup `hot_routes`) against the router ------------------------------


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Server, Server]]:
    """The same server twice: with the hot routes, and with every request through the router."""
    with servers(tmp_path) as make:
        hot = make()
        build_without(monkeypatch, "hot_routes")
        plain = make()
        yield hot, plain


REQUEST_ID = {"X-Request-Id": "same-id"}


def _requests(key: str) -> list[tuple[str, str, dict[str, str], bytes | None]]:
    auth = {"X-API-Key": key}
    return [
        ("GET", "/healthz", {}, None),
        ("GET", "/tools/pub.echo", {}, None),
        ("GET", "/tools/pub.nothing", {}, None),
        ("GET", "/tools/pub.echo", {"X-API-Key": "trk_bad"}, None),
        ("POST", "/tools/pub.echo", {**JSON, **REQUEST_ID}, b'{"msg": "hi"}'),
        ("POST", "/tools/pub.echo", {**JSON, **REQUEST_ID, "Accept": "application/json"}, b'{"msg": "hi"}'),
        ("POST", "/tools/pub.fail", {**JSON, **REQUEST_ID, **auth}, b"{}"),
        ("POST", "/tools/pub.echo", {**JSON, **REQUEST_ID}, b'{"msg": '),
        ("POST", "/tools/pub.echo", {"Content-Type": "text/plain", **REQUEST_ID}, b"hi"),
        ("POST", "/tools/pub.nothing", {**JSON, **REQUEST_ID}, b"{}"),
        ("POST", "/mcp", modern_headers(key), call("execute", {"key": "pub.echo", "arguments": {"msg": "hi"}})),
        ("POST", "/mcp", modern_headers(key), b'{"jsonrpc": "2.0", "id": 1, "method": '),
        ("POST", "/mcp", modern_headers("trk_bad"), call("execute", {"key": "pub.echo"})),
    ]


def _seen(server: Server, method: str, path: str, headers: dict[str, str], body: bytes | None) -> tuple[object, ...]:
    """Status, headers and body; a call's duration (`"seconds": ...`) differs between any two calls."""
    response = server.client.request(method, path, headers=headers, content=body)
    assert response.headers["content-length"] == str(len(response.content))
    headers_seen = [(k, v) for k, v in response.headers.multi_items() if k != "content-length"]
    return response.status_code, headers_seen, re.sub(rb'"seconds": ?[0-9.e-]+', b'"seconds": 0', response.content)


def test_the_hot_routes_answer_as_the_router_does(
    pair: tuple[Server, Server], caplog: pytest.LogCaptureFixture
) -> None:
    hot, plain = pair
    key = hot.key("alice")
    requests = _requests(key)
    answers, logged = [], []
    for server in (hot, plain):
        caplog.clear()
        with caplog.at_level("INFO", logger="toolrun.access"):
            answers.append([_seen(server, *request) for request in requests])
        # The access log's lines, without their milliseconds: the same statuses on both roads.
        logged.append([re.sub(r" [\d.]+ms$", "", r.getMessage()) for r in caplog.records if r.name == "toolrun.access"])
    for request, a, b in zip(requests, answers[0], answers[1], strict=True):
        assert a == b, f"{request[:2]}: the hot route answered\n{a}\nthe router answered\n{b}"
    assert logged[0] == logged[1] and len(logged[0]) == len(requests)
    assert '"hi"' in json.dumps(json.loads(answers[0][10][2])["result"])  # the MCP call ran, on both roads
