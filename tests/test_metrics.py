"""/metrics: the two series of spec 4 rule 6, on the server's own registry, valid for promtool."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from conftest import require_binary
from http_support import Server, servers
from toolrun.metrics import OUTCOMES, Metrics


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    with servers(tmp_path) as factory:
        yield factory


def exercised(server: Server) -> str:
    """/metrics after calls with several outcomes."""
    client = server.client
    client.post("/tools/pub.echo", json={"msg": "hi"})
    client.post("/tools/pub.echo", json={"msg": "again"})
    client.post("/tools/pub.fail")
    client.post("/tools/pub.boom")
    client.post("/tools/pub.count", json={"n": "x"})
    client.post("/tools/no.such", json={})
    response = client.get("/metrics")
    assert response.status_code == 200
    return response.text


def test_metrics_output_passes_promtool_check_metrics(make: Callable[..., Server]) -> None:
    promtool = require_binary("promtool")
    text = exercised(make())
    done = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip() == "" and done.stderr.strip() == "", done.stdout + done.stderr


def test_an_idle_server_exposes_the_two_families_and_passes_promtool(make: Callable[..., Server]) -> None:
    promtool = require_binary("promtool")
    text = make().client.get("/metrics").text
    assert "# HELP svc_tool_calls_total" in text
    assert "# HELP svc_tool_call_duration_seconds" in text
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr


def test_metrics_have_no_created_series_and_only_the_svc_families(make: Callable[..., Server]) -> None:
    text = exercised(make())
    assert "_created" not in text
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    assert names <= {
        "svc_tool_calls_total",
        "svc_tool_call_duration_seconds_bucket",
        "svc_tool_call_duration_seconds_count",
        "svc_tool_call_duration_seconds_sum",
        "svc_tool_output_truncated_total",
        "svc_catalog_reloads_total",
    }


def test_counts_are_per_tool_and_outcome(make: Callable[..., Server]) -> None:
    text = exercised(make())
    assert 'svc_tool_calls_total{outcome="ok",tool="pub.echo"} 2.0' in text
    assert 'svc_tool_calls_total{outcome="error",tool="pub.fail"} 1.0' in text
    assert 'svc_tool_calls_total{outcome="exception",tool="pub.boom"} 1.0' in text
    assert 'svc_tool_calls_total{outcome="invalid",tool="pub.count"} 1.0' in text
    assert 'svc_tool_call_duration_seconds_count{tool="pub.echo"} 2.0' in text
    assert 'svc_tool_call_duration_seconds_bucket{le="+Inf",tool="pub.echo"} 2.0' in text
    assert "no.such" not in text


def test_each_server_has_its_own_registry_never_the_global_one(make: Callable[..., Server]) -> None:
    first, second = make(), make()
    first.client.post("/tools/pub.noargs")
    assert "pub.noargs" in first.client.get("/metrics").text
    assert "pub.noargs" not in second.client.get("/metrics").text
    assert REGISTRY.get_sample_value("svc_tool_calls_total", {"tool": "pub.noargs", "outcome": "ok"}) is None


def test_metrics_observe_records_one_count_and_one_duration() -> None:
    metrics = Metrics()
    for outcome in OUTCOMES:
        metrics.observe("a.b", outcome, 0.002)
    registry = metrics.registry
    for outcome in OUTCOMES:
        assert registry.get_sample_value("svc_tool_calls_total", {"tool": "a.b", "outcome": outcome}) == 1.0
    assert registry.get_sample_value("svc_tool_call_duration_seconds_count", {"tool": "a.b"}) == len(OUTCOMES)
