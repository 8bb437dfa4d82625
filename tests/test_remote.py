"""The remote CLI's client, and POST /tools/{key} answering JSON, against a real `toolrun serve`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.catalogs import write_catalog
from support.http import JSON
from support.keys import create_key
from support.servers import ToolrunServer
from toolrun.cli.client_remote import Remote, RemoteError
from toolrun.errors import NotFound, ParamError, RateLimited, ToolFailed, Unauthorized

CATALOG = """\
group: demo
tools:
  - name: echo
    public: true
    read_only: true
    description: "Print **text**."
    exec: printf '%s' {{ text | quote }}
    allow_warnings: [unused-param]
    params:
      - {name: text, type: str, description: What to print}
      - {name: times, type: int, default: 1, min: 1, max: 9}
  - name: fail
    public: true
    exec: "echo out; echo err >&2; exit 7"
  - name: slow
    public: true
    exec: sleep 5
    timeout: 0.3
  - name: add
    public: true
    fn: remote_fns:add
    params:
      - {name: a, type: int}
      - {name: b, type: int}
  - name: boom
    public: true
    fn: remote_fns:divide
    params:
      - {name: a, type: int}
      - {name: b, type: int}
  - name: secret
    exec: echo hidden
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolrunServer]:
    tmp = tmp_path_factory.mktemp("remote")
    catalog = write_catalog(tmp, CATALOG)
    (tmp / "remote_fns.py").write_text(
        "def add(a: int, b: int) -> int:\n    return a + b\n\n\n"
        "def divide(a: int, b: int) -> float:\n    return a / b\n"
    )
    with ToolrunServer(tmp / "server", catalog, {"SVC_RATE_LIMIT_ENABLED": True, "SVC_RATE_LIMIT_CALLS": 5}) as srv:
        srv.start()
        yield srv


def test_post_with_accept_json_gives_the_structured_result(server: ToolrunServer) -> None:
    headers = {**JSON, "accept": "application/json"}
    answer = httpx.post(server.url + "/tools/demo.fail", headers=headers, content=b"{}")
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert (body["returncode"], body["stdout"], body["stderr"], body["timed_out"]) == (7, "out\n", "err\n", False)
    assert body["ok"] is False and body["key"] == "demo.fail" and body["seconds"] > 0
    plain = httpx.post(server.url + "/tools/demo.fail", headers=JSON, content=b"{}")
    assert plain.headers["content-type"].startswith("text/plain")
    assert plain.text == "(7, 'out\\n', 'err\\n')"
    browser = httpx.post(server.url + "/tools/demo.fail", headers={**JSON, "accept": "*/*"}, content=b"{}")
    assert browser.text == plain.text
    # Either form carries the exit code in a header: no client needs to parse the tuple.
    assert answer.headers["x-toolrun-exit-code"] == plain.headers["x-toolrun-exit-code"] == "7"


def test_post_with_accept_json_gives_json_errors_with_the_same_status(server: ToolrunServer) -> None:
    headers = {**JSON, "accept": "application/json"}
    answer = httpx.post(server.url + "/tools/demo.echo", headers=headers, content=b'{"nope": 1}')
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "unknown parameter 'nope' for demo.echo (accepted: text, times)",
        "type": "ParamError",
    }
    missing = httpx.post(server.url + "/tools/demo.secret", headers=headers, content=b"{}")
    assert missing.status_code == 404 and missing.json()["type"] == "NotFound"


def test_remote_list_describe_and_search(server: ToolrunServer) -> None:
    remote = Remote(server.url)
    assert [t.key for t in remote.list()] == ["demo.add", "demo.boom", "demo.echo", "demo.fail", "demo.slow"]
    echo = remote.describe("demo.echo")
    assert [p.name for p in echo.params] == ["text", "times"]
    assert echo.params[1].type == "int" and echo.params[1].default == 1
    assert echo.kind == "exec" and remote.describe("demo.add").kind == "fn"
    # Constraints and hints come across too (`describe --url` shows them as the local one does).
    assert (echo.params[1].min, echo.params[1].max, echo.annotations) == (1, 9, {"read_only": True})
    page = remote.search("print text")
    assert page["tools"][0].key == "demo.echo"
    with pytest.raises(NotFound) as caught:
        remote.describe("demo.secret")
    assert str(caught.value) == "not found on the server"


def test_remote_call_results_carry_exit_codes_and_timeouts(server: ToolrunServer) -> None:
    remote = Remote(server.url)
    result, payload = remote.call("demo.echo", {"text": "hi"})
    assert result.ok and result.value == "hi" and payload["stdout"] == "hi"
    failed, _ = remote.call("demo.fail", {})
    assert failed.exec is not None and (failed.exec.returncode, failed.exec.stderr) == (7, "err\n")
    slow, _ = remote.call("demo.slow", {})
    assert slow.exec is not None and slow.exec.timed_out and slow.exec.returncode == -1
    added, payload = remote.call("demo.add", {"a": 2, "b": 3})
    assert added.value == "5" and payload["result"] == 5


def test_remote_errors_are_the_local_error_classes_with_the_servers_message(server: ToolrunServer) -> None:
    remote = Remote(server.url)
    with pytest.raises(ParamError) as param:
        remote.call("demo.echo", {"times": "x", "text": "a"})
    assert str(param.value).startswith("parameter 'times'")
    with pytest.raises(ToolFailed) as failed:
        remote.call("demo.boom", {"a": 1, "b": 0})
    assert failed.value.summary == "ZeroDivisionError: division by zero"
    with pytest.raises(NotFound):
        remote.call("demo.secret", {})
    refused = Remote(server.url, "trk_aaaaaaaaaa_" + "x" * 43)
    # A key that is given must resolve, on optional routes too: never a silent anonymous caller.
    with pytest.raises(Unauthorized, match="the server refused the API key"):
        refused.list()
    with pytest.raises(Unauthorized, match="the server refused the API key"):
        refused.describe("demo.secret")
    with pytest.raises(RemoteError, match="cannot reach"):
        Remote("http://127.0.0.1:9").list()


def test_an_api_key_reaches_the_users_tools_and_the_rate_limit_maps_to_429(server: ToolrunServer) -> None:
    key = create_key(server.env, "alice", "demo")
    remote = Remote(server.url, key)
    assert "demo.secret" in [t.key for t in remote.list()]
    outcomes: list[Any] = []
    with pytest.raises(RateLimited) as limited:
        for _ in range(10):
            outcomes.append(remote.call("demo.secret", {}))
    assert len(outcomes) == 5
    assert limited.value.retry_after >= 1
    assert "rate limit exceeded" in str(limited.value)


def test_remote_url_must_be_http(tmp_path: Path) -> None:
    from toolrun.errors import UsageError

    with pytest.raises(UsageError, match="expected http://host:port"):
        Remote("ftp://example.com")
    assert json.dumps({"ok": True})


# -- the remote CLI: `toolrun --url URL ...` as a real process, against the real server --------


def _local_and_remote(server: ToolrunServer, *args: str, key: str | None = None) -> tuple[Any, Any]:
    from support.servers import toolrun_cli

    env = {k: v for k, v in server.env.items() if k not in ("TOOLRUN_URL", "TOOLRUN_API_KEY")}
    local = toolrun_cli(*args, "-c", str(server.catalog), env=env)
    remote_env = {**env, "TOOLRUN_URL": server.url, **({"TOOLRUN_API_KEY": key} if key else {})}
    remote = toolrun_cli(*args, env=remote_env)
    return local, remote


def test_remote_describe_call_and_search_match_the_local_commands(server: ToolrunServer) -> None:
    key = create_key(server.env, "carol", "demo")
    for args in (
        ("describe", "demo.echo"),
        ("describe", "demo.echo", "--json"),
        ("call", "demo.echo", "text=hi there"),
        ("call", "demo.fail"),
        ("call", "demo.add", "a=2", "b=3"),
        ("call", "demo.echo", "text=x", "--json"),
        ("call", "demo.echo", "nope=1"),
        ("call", "demo.boom", "a=1", "b=0"),
        ("search", "print", "--json"),
        ("list", "--json"),
    ):
        local, remote = _local_and_remote(server, *args, key=key)
        if "--json" in args and args[0] == "call":
            local_body, remote_body = json.loads(local.stdout), json.loads(remote.stdout)
            local_body.pop("seconds"), remote_body.pop("seconds")
            assert local_body == remote_body, args
        else:
            assert remote.stdout == local.stdout, args
        assert (remote.returncode, remote.stderr) == (local.returncode, local.stderr), args


def test_remote_call_exit_codes_timeout_and_stderr(server: ToolrunServer) -> None:
    _, failed = _local_and_remote(server, "call", "demo.fail")
    assert (failed.returncode, failed.stdout, failed.stderr) == (7, "out\n", "err\n")
    local, slow = _local_and_remote(server, "call", "demo.slow")
    assert slow.returncode == local.returncode == 124
    assert slow.stderr == local.stderr == "timeout after 0.3s\n"


def test_remote_list_over_the_flag_and_the_errors(server: ToolrunServer, tmp_path: Path) -> None:
    from support.servers import clean_env, toolrun_cli

    env = clean_env(tmp_path / "home")
    listed = toolrun_cli("--url", server.url, "list", env=env)
    assert listed.returncode == 0
    assert [line.split()[0] for line in listed.stdout.splitlines()[1:]] == [
        "demo.add",
        "demo.boom",
        "demo.echo",
        "demo.fail",
        "demo.slow",
    ]
    assert "Print text." in listed.stdout  # the summary as plain text, not **text**
    hidden = toolrun_cli("--url", server.url, "call", "demo.secret", env=env)
    assert (hidden.returncode, hidden.stderr) == (2, "toolrun: not found on the server\n")
    refused = toolrun_cli("--url", server.url, "--api-key", "trk_aaaaaaaaaa_" + "x" * 43, "describe", "demo.x", env=env)
    assert refused.returncode == 2 and "the server refused the API key" in refused.stderr
    down = toolrun_cli("--url", "http://127.0.0.1:9", "list", env=env)
    assert down.returncode == 69 and down.stderr.startswith("toolrun: cannot reach http://127.0.0.1:9")
    local_only = toolrun_cli("--url", server.url, "validate-catalog", "x.yaml", env=env)
    assert local_only.returncode == 2 and "`validate-catalog` runs locally" in local_only.stderr
    dry = toolrun_cli("--url", server.url, "call", "demo.echo", "text=a", "--dry-run", env=env)
    assert dry.returncode == 2 and "--dry-run" in dry.stderr


def test_url_and_api_key_may_follow_the_command(server: ToolrunServer, tmp_path: Path) -> None:
    """`toolrun search disk --url URL` (as the docs write it) is `toolrun --url URL search disk`."""
    from support.servers import clean_env, toolrun_cli

    env = clean_env(tmp_path / "home")
    key = create_key(server.env, "dave", "demo")
    before = toolrun_cli("--url", server.url, "--api-key", key, "search", "print", "--json", env=env)
    after = toolrun_cli("search", "print", "--json", "--url", server.url, f"--api-key={key}", env=env)
    assert after.returncode == before.returncode == 0, after.stderr
    assert after.stdout == before.stdout and "demo.echo" in after.stdout
    called = toolrun_cli("call", "demo.echo", "--url", server.url, "text=hi", env=env)
    assert (called.returncode, called.stdout) == (0, "hi"), called.stderr
    listed = toolrun_cli("jobs", "list", "--url", server.url, "--api-key", key, env=env)
    assert listed.returncode == 0, listed.stderr


def test_hoisting_leaves_other_commands_and_values_alone() -> None:
    from toolrun.cli.common import hoist_server_options as hoist

    assert hoist(["search", "x", "--url", "U"]) == ["--url", "U", "search", "x"]
    assert hoist(["--url", "U", "call", "k", "--api-key=K"]) == ["--api-key=K", "--url", "U", "call", "k"]
    assert hoist(["access", "explain", "k", "--url", "U"]) == ["access", "explain", "k", "--url", "U"]
    assert hoist(["mcp-config", "--url", "U", "--api-key"]) == ["mcp-config", "--url", "U", "--api-key"]
    assert hoist(["call", "k", "--", "--url", "U"]) == ["call", "k", "--", "--url", "U"]
    assert hoist(["call", "k", "--url"]) == ["call", "k", "--url"]
