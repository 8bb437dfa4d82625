"""Optional OpenTelemetry tracing: the switch, read from the standard OTEL_* environment variables.

Tracing is on when the environment asks for trace export and the `otel` extra is installed
(`pip install 'toolrun[otel]'`):

- `OTEL_SDK_DISABLED=true` turns it off, whatever else is set;
- `OTEL_TRACES_EXPORTER` names the exporters (`otlp`, `console`; `none` is off);
- without it, `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` turns on `otlp`;
- everything else (sampler, resource, headers, timeouts, batching, propagators) is the SDK's own
  reading of the same variables.

Off, nothing of OpenTelemetry is imported here, and every hook in the hot paths is one check of
`TRACING is None`. On, `setup` installs the SDK's tracer provider globally (the MCP SDK's own
`tools/call` spans use it too) and `TRACING` holds the `otel.Tracing` that makes toolrun's spans.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import UsageError

if TYPE_CHECKING:
    from ..models import CallOrigin, CallResult, Identity, ToolSpec
    from .otel import CallSpan, Tracing

F = TypeVar("F", bound=Callable[..., object])

log = logging.getLogger("toolrun.telemetry")

EXPORTERS = ("otlp", "console")
# The OTLP exporter the `otel` extra ships speaks protobuf over HTTP.
PROTOCOLS = ("http/protobuf",)

TRACING: Tracing | None = None


def exporters(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The span exporters the environment asks for; () when tracing is off.

    Raises UsageError for an exporter or an OTLP protocol this build cannot serve."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    raw = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if not raw:
        endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
        endpoint = endpoint or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
        names: tuple[str, ...] = ("otlp",) if endpoint.strip() else ()
    else:
        names = tuple(dict.fromkeys(n.strip().lower() for n in raw.split(",") if n.strip() and n.strip() != "none"))
    for name in names:
        if name not in EXPORTERS:
            raise UsageError(
                f"OTEL_TRACES_EXPORTER names {name!r}: toolrun exports traces with {', '.join(EXPORTERS)} "
                "(or none); send them to an OpenTelemetry Collector to reach other back ends"
            )
    if "otlp" in names:
        for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            protocol = environ.get(var, "").strip().lower()
            if protocol:
                if protocol not in PROTOCOLS:
                    raise UsageError(
                        f"{var}={protocol}: toolrun exports OTLP over HTTP (http/protobuf); point "
                        "OTEL_EXPORTER_OTLP_ENDPOINT at the collector's OTLP/HTTP port (4318 by default)"
                    )
                break
    return names


def setup(environ: Mapping[str, str]) -> Tracing | None:
    """Turn tracing on when `environ` asks for it (see the module docstring); the Tracing, or None.

    Configured but without the `otel` extra, a warning says so and the server runs without traces."""
    global TRACING
    names = exporters(environ)
    if not names:
        return None
    try:
        from .otel import Tracing
    except ImportError as exc:
        log.warning(
            "tracing is configured (OTEL_* environment variables) but OpenTelemetry is not installed (%s): "
            "install it with `pip install 'toolrun[otel]'`; serving without traces",
            exc.name or exc,
        )
        return None
    if TRACING is None:
        TRACING = Tracing.start(names, environ)
        log.info("tracing on: spans go to %s", " and ".join(destination(name, environ) for name in names))
    return TRACING


def destination(exporter: str, environ: Mapping[str, str]) -> str:
    """Where an exporter's spans go, in words for the log."""
    if exporter == "console":
        return "stderr (console)"
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if not endpoint:
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or "http://localhost:4318"
        endpoint = base.rstrip("/") + "/v1/traces"
    return f"{endpoint} (OTLP/HTTP)"


def shutdown() -> None:
    """Export the spans still queued and stop tracing (at the end of a serving process)."""
    global TRACING
    tracing, TRACING = TRACING, None
    if tracing is not None:
        tracing.shutdown()


# -- the hooks of the core: each one check of TRACING when tracing is off ---------------------------------


def current_traceparent() -> str:
    """The W3C traceparent of the current span ("" when tracing is off or outside a trace): a job keeps its
    requester's, and its run's span links to it."""
    return "" if TRACING is None else TRACING.current_traceparent()


def start_call(tool: ToolSpec, identity: Identity, origin: CallOrigin | None) -> CallSpan | None:
    """The span of a tool call, current until `end_call`; None when tracing is off."""
    return None if TRACING is None else TRACING.start_call(tool, identity, origin)


def end_call(
    span: CallSpan | None, outcome: str, result: CallResult | None, error: type[BaseException] | None, seconds: float
) -> None:
    if span is not None:
        span.end(outcome, result, error, seconds)


def into_tool(kind: str, command: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
    """The command and environment of an exec or curl tool, carrying the current trace context when tracing is on:
    `TRACEPARENT` and `TRACESTATE` in the environment, and for a curl tool `traceparent` and `tracestate` headers."""
    if TRACING is None:
        return command, env
    return TRACING.into_tool(kind, command, env)


def carried(fn: F) -> F:
    """`fn` as it is when tracing is off; on, `fn` made to run in the current context from another thread."""
    return fn if TRACING is None else TRACING.carried(fn)


def join_baggage(meta: Mapping[str, Any] | None) -> object | None:
    """An MCP request's `_meta` baggage made current for its tool call (the MCP SDK's span joins the `_meta` trace
    but not its baggage); a token for `leave`, None when there is none or tracing is off."""
    return None if TRACING is None or not meta or "baggage" not in meta else TRACING.join_baggage(meta)


def leave(token: object | None) -> None:
    if token is not None and TRACING is not None:
        TRACING.leave(token)


def current_trace_id() -> str:
    """The current trace's id (32 hex digits); "" when tracing is off or outside a trace."""
    return "" if TRACING is None else TRACING.current_trace_id()
