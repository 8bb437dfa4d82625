"""Holes that hostile callers and careless operators found (issue 10), each closed: in-process tests.

The tests that need a real `toolrun serve` (log lines, slow bodies, descriptors, processes, other
users) are in test_hardening_process.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from support.app import Server, servers
from toolrun.errors import UsageError
from toolrun.settings import Settings

UNAUTHORIZED = {"error": "unauthorized"}


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


def load(home: Path, **env: str) -> Settings:
    return Settings.load(environ={"TOOLRUN_HOME": str(home), **env})


# -- item 12: settings that would start a broken server are refused at start -------------------------------


@pytest.mark.parametrize(
    ("env", "value", "expected"),
    [
        ("SVC_RATE_LIMIT_WINDOW", "0", "whole seconds >= 1"),
        ("SVC_RATE_LIMIT_CALLS", "0", "an integer >= 1"),
        ("SVC_DEFAULT_TIMEOUT", "0", "seconds > 0"),
        ("SVC_DEFAULT_TIMEOUT", "nan", "seconds > 0"),
        ("SVC_REQUEST_TIMEOUT", "0", "seconds > 0"),
        ("SVC_READINESS_TIMEOUT", "-1", "seconds > 0"),
        ("SVC_MCP_APPROVAL_ROUND", "0", "seconds > 0 (at most 3600)"),
        ("SVC_MCP_APPROVAL_ROUND", "86400", "seconds > 0 (at most 3600)"),
        ("SVC_MAX_CONCURRENT_CALLS", "0", "an integer from 1 to 1000000"),
        ("SVC_QUEUE_TIMEOUT", "-1", "seconds from 0"),
        ("SVC_MAX_BODY_BYTES", "0", "bytes >= 1"),
        ("SVC_MAX_OUTPUT", "0", "bytes >= 1"),
        ("SVC_SHUTDOWN_GRACE", "-5", "seconds >= 0"),
        ("SVC_PORT", "70000", "an integer from 0 to 65535"),
        ("SVC_LOG_LEVEL", "loud", "debug, info, warning, error"),
        ("SVC_LOG_FORMAT", "xml", "text or json"),
    ],
)
def test_a_setting_out_of_range_is_refused_in_one_line_naming_it_and_the_range(
    tmp_path: Path, env: str, value: str, expected: str
) -> None:
    name = env[4:].lower().replace("rate_limit_", "rate_limit.")
    with pytest.raises(UsageError) as caught:
        load(tmp_path, **{env: value})
    message = str(caught.value)
    assert "\n" not in message
    assert f"setting {name} from {env}" in message, message
    assert expected in message, message


@pytest.mark.parametrize(
    "url", ["localhost:6379", "redis://", "redis://host:port/0", "redis://host/zero", "http://host", "unix://"]
)
def test_a_malformed_redis_url_is_refused_at_start_without_echoing_it(tmp_path: Path, url: str) -> None:
    with pytest.raises(UsageError) as caught:
        load(tmp_path, SVC_REDIS_URL=url.replace("host", "user:pw@host"))
    assert "setting redis_url from SVC_REDIS_URL: expected a redis://" in str(caught.value)
    assert "pw@" not in str(caught.value)


def test_good_redis_urls_are_accepted(tmp_path: Path) -> None:
    for url in ("redis://127.0.0.1:6379/0", "rediss://:secret@cache.internal", "unix:///run/redis.sock"):
        assert load(tmp_path, SVC_REDIS_URL=url).redis_url == url


def test_proxy_and_metrics_address_lists_must_be_addresses_or_networks(tmp_path: Path) -> None:
    allowed = load(tmp_path, SVC_FORWARDED_ALLOW_IPS="10.0.0.1,10.1.0.0/16,*").forwarded_allow_ips
    assert list(allowed) == ["10.0.0.1", "10.1.0.0/16", "*"]
    with pytest.raises(UsageError, match=r"setting forwarded_allow_ips .* got 'proxy\.local'"):
        load(tmp_path, SVC_FORWARDED_ALLOW_IPS="proxy.local")
    with pytest.raises(UsageError, match=r"setting metrics_allow_ips .* got '\*'"):
        load(tmp_path, SVC_METRICS_ALLOW_IPS="*")


def _toolrun(tmp_path: Path, *args: str, env: dict[str, str], prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = prelude + "import sys; from toolrun.cli import main; sys.argv = ['toolrun', *sys.argv[1:]]; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env={
            "PATH": "/usr/bin:/bin",
            "TOOLRUN_HOME": str(tmp_path),
            "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_serve_with_a_zero_rate_limit_window_exits_with_one_line(tmp_path: Path) -> None:
    done = _toolrun(tmp_path, "serve", "--port", "0", env={"SVC_RATE_LIMIT_WINDOW": "0"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "toolrun: setting rate_limit.window from SVC_RATE_LIMIT_WINDOW: expected whole seconds >= 1, got 0"
    ]


def test_a_redis_url_without_the_redis_package_names_the_extra_to_install(tmp_path: Path) -> None:
    # `redis` made unimportable, as on an install without the extra.
    block = "import sys; sys.modules['redis'] = None; "
    for args in (("serve", "--port", "0"), ("keys", "list")):
        done = _toolrun(tmp_path, *args, env={"SVC_REDIS_URL": "redis://127.0.0.1:1/0"}, prelude=block)
        assert done.returncode == 2, done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines == [
            "toolrun: setting redis_url needs the redis package, which is not installed: pip install 'toolrun[redis]'"
        ], done.stderr


def test_keys_list_with_redis_down_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    for args in (("keys", "list"), ("keys", "revoke", "abcdefghij")):
        done = _toolrun(tmp_path, *args, env={"SVC_REDIS_URL": "redis://127.0.0.1:1/0"})
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert lines[0].startswith("toolrun: shared state (Redis) unavailable"), lines


# -- item 14: duplicate Host headers ---------------------------------------------------------------------------


def test_duplicate_host_headers_are_refused_with_400_on_every_route(make: Callable[..., Server]) -> None:
    server = make()
    twice = [("host", "127.0.0.1"), ("host", "evil.example")]
    for method, path in [("GET", "/tools"), ("GET", "/healthz"), ("POST", "/tools/pub.noargs"), ("POST", "/mcp")]:
        response = server.client.request(method, path, headers=twice)
        assert response.status_code == 400, (method, path, response.status_code)
        assert "Duplicate Host header" in response.text
    assert server.client.get("/tools").status_code == 200


# -- item 16: /metrics can be protected ------------------------------------------------------------------------


def test_metrics_stays_anonymous_by_default(make: Callable[..., Server]) -> None:
    assert make().client.get("/metrics").status_code == 200


def test_metrics_token_requires_the_bearer_token(make: Callable[..., Server]) -> None:
    server = make({"metrics_token": "s3cret-scrape"})
    server.client.post("/tools/pub.noargs")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"X-API-Key": "s3cret-scrape"}):
        response = server.client.get("/metrics", headers=headers)
        assert response.status_code == 401, headers
        assert response.json() == UNAUTHORIZED
        assert "svc_tool_calls_total" not in response.text
    response = server.client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape"})
    assert response.status_code == 200
    assert 'svc_tool_calls_total{outcome="ok",tool="pub.noargs"}' in response.text


def test_metrics_allow_ips_answers_listed_addresses_only(make: Callable[..., Server]) -> None:
    # The in-process test client's address is "testclient": not an address in any list.
    refused = make({"metrics_allow_ips": ["10.0.0.0/8"]})
    response = refused.client.get("/metrics")
    assert response.status_code == 403
    assert response.json() == {"error": "forbidden"}
