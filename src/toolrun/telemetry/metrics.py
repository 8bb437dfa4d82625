"""Prometheus metrics on the server's own registry (never the global one).

- ``svc_tool_calls_total{tool, outcome}``: one per call, whatever the door (HTTP or MCP).
  ``outcome`` is one of ok, error (non-zero exit), timeout, exception (the tool raised),
  invalid (parameter error), rate_limited, overloaded, cancelled (the client went away).
- ``svc_tool_call_duration_seconds{tool}``: wall time of each call.
- ``svc_tool_output_truncated_total{tool}``: calls whose stdout or stderr went over the output cap.
- ``svc_catalog_reloads_total{outcome}``: catalog reloads of the server, ``ok`` or ``error`` (the old
  catalog kept). With workers, each reload of the server counts once: every worker reloads, but only
  the first worker (slot 0, and its replacement) counts (see toolrun.catalog.reload).

Labels only ever take catalog keys: an unknown key is refused before anything is counted, so a
flood of made-up keys adds no series.

With several worker processes (`serve --workers N`) every worker writes its values to files in one
directory (prometheus-client's multiprocess mode) and /metrics, whichever worker answers, sums the
files of all of them, those of workers that have exited included (a counter never goes back).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

disable_created_metrics()  # type: ignore[no-untyped-call]

OUTCOMES = ("ok", "error", "timeout", "exception", "invalid", "rate_limited", "overloaded")
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self, multiprocess_dir: str | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        own: CollectorRegistry | None = self.registry
        if multiprocess_dir is not None:
            import os

            from prometheus_client import multiprocess, values

            # Values are files named by the writing process's pid, in this directory; the value class
            # is the library's module global, read when each labelled child is created (after this).
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = multiprocess_dir
            values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
            multiprocess.MultiProcessCollector(self.registry, path=multiprocess_dir)  # type: ignore[no-untyped-call]
            own = None
        self.calls = Counter(
            "svc_tool_calls_total",
            "Tool calls, by tool key and outcome.",
            ["tool", "outcome"],
            registry=own,
        )
        self.duration = Histogram(
            "svc_tool_call_duration_seconds",
            "Wall time of tool calls in seconds.",
            ["tool"],
            buckets=BUCKETS,
            registry=own,
        )
        self.truncated = Counter(
            "svc_tool_output_truncated_total",
            "Tool calls whose stdout or stderr went over the output cap (head and tail kept).",
            ["tool"],
            registry=own,
        )
        self.reloads = Counter(
            "svc_catalog_reloads_total",
            "Catalog reloads by outcome: ok, or error (the previous catalog keeps serving).",
            ["outcome"],
            # Registered on the registry only without workers: with them, the multiprocess collector already
            # sums every worker's files, and a second registration rendered this process's own value as a
            # second family (a scrape read one worker's count).
            registry=own,
        )
        if multiprocess_dir is None:
            self.count_reloads()

        # The labelled children, looked up once per (tool, outcome): `labels()` costs more than the update.
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}

    def observe(self, key: str, outcome: str, seconds: float) -> None:
        children = self._children.get((key, outcome))
        if children is None:
            children = (self.calls.labels(key, outcome), self.duration.labels(key))
            self._children[(key, outcome)] = children
        children[0].inc()
        children[1].observe(seconds)

    def observe_truncated(self, key: str) -> None:
        self.truncated.labels(key).inc()

    def count_reloads(self) -> None:
        """Both reload series from now on (0 until a reload). With forked workers, called in the one
        worker that counts the server's reloads, after the fork: a value created before it would be a
        slot in the parent's file, not the worker's."""
        for outcome in ("ok", "error"):
            self.reloads.labels(outcome)

    def observe_reload(self, outcome: str) -> None:
        self.reloads.labels(outcome).inc()

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))
