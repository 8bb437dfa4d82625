"""/metrics: the two series of spec 4 rule 6, on the server's own registry, valid for promtool."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from support.app import Server, servers
from support.binaries import require_binary
from toolrun.telemetry.metrics import OUTCOMES, Metrics


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
        "svc_jobs",
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


FORKED_WORKERS = """
import os, sys
from toolrun.telemetry.metrics import Metrics
metrics = Metrics(sys.argv[1])
for worker in range(2):
    pid = os.fork()
    if pid == 0:
        if worker == 0:
            metrics.count_reloads()
            metrics.observe_reload("ok")
        metrics.observe_truncated("a.b")
        metrics.observe("a.b", "ok", 0.01)
        os._exit(0)
    os.waitpid(pid, 0)
sys.stdout.write(metrics.render().decode())
"""


def test_with_forked_workers_each_family_is_rendered_once_with_the_sum_over_the_workers(tmp_path: Path) -> None:
    """Multiprocess mode: a family registered both on the registry and through the collector came out twice,
    the second time with the answering process's own value (a scrape read 2 reloads where 4 were counted)."""
    import sys

    done = subprocess.run(
        [sys.executable, "-c", FORKED_WORKERS, str(tmp_path)], capture_output=True, text=True, check=True
    )
    lines = done.stdout.splitlines()
    for family in ("svc_tool_calls_total", "svc_tool_output_truncated_total", "svc_catalog_reloads_total"):
        assert lines.count(f"# TYPE {family} counter") == 1, done.stdout
    assert 'svc_tool_output_truncated_total{tool="a.b"} 2.0' in lines
    assert 'svc_tool_calls_total{outcome="ok",tool="a.b"} 2.0' in lines
    assert 'svc_catalog_reloads_total{outcome="ok"} 1.0' in lines
    assert 'svc_catalog_reloads_total{outcome="error"} 0.0' in lines
