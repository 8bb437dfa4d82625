"""toolrun's OpenTelemetry spans (the `otel` extra), made only when `telemetry.setup` turned tracing on.

Spans, named and dressed as the OpenTelemetry semantic conventions name these things:

- one SERVER span per HTTP request, `{method} {route}` (`http.request.method`, `http.route`,
  `url.path`, `url.scheme`, `http.response.status_code`, `client.address`, `user_agent.original`),
  joined to the caller's trace from its `traceparent` / `tracestate` / `baggage` headers;
- the MCP SDK's own SERVER span per MCP request (`tools/call {gen_ai.tool.name}`, `mcp.method.name`),
  joined to the caller's trace from the request's `params._meta`, on stdio and HTTP;
- one INTERNAL span per tool call, `execute_tool {key}` (`gen_ai.operation.name`, `gen_ai.tool.name`,
  `toolrun.door`, `toolrun.call.outcome`, `process.exit.code`, `toolrun.output.bytes`,
  `toolrun.output.truncated`, `error.type`), the child of the request's span.

The tool call's context reaches into the tool: `TRACEPARENT` and `TRACESTATE` in an exec tool's
environment, a `traceparent` (and `tracestate`) header on a curl tool's request, the current
OpenTelemetry context inside an fn tool (threads included).
"""

from __future__ import annotations

import contextvars
import logging
import shlex
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.textmap import TextMapPropagator, default_getter, default_setter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Span, SpanKind, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from .. import __version__
from ..formatting import output_bytes
from ..models import CallOrigin, CallResult, Identity, ToolSpec

_W3C = TraceContextTextMapPropagator()  # what a tool gets: traceparent and tracestate, whatever OTEL_PROPAGATORS says
_BAGGAGE = W3CBaggagePropagator()
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"})
_CARRIED = (b"traceparent", b"tracestate", b"baggage")
F = TypeVar("F", bound=Callable[..., object])
SHUTDOWN_WAIT = 3.0  # seconds a stopping server waits for its last spans to be exported

log = logging.getLogger("toolrun.telemetry")


def _links(traceparent: str) -> list[trace.Link] | None:
    """A link to the span `traceparent` names (a job's run links to the request that asked for it)."""
    context = trace.get_current_span(_W3C.extract({"traceparent": traceparent})).get_span_context()
    return [trace.Link(context, {"toolrun.link": "requested by"})] if context.is_valid else None


def _resource(environ: Mapping[str, str]) -> Resource:
    """`service.name` toolrun and `service.version` toolrun's, unless OTEL_SERVICE_NAME or
    OTEL_RESOURCE_ATTRIBUTES say otherwise (the SDK reads both)."""
    given = {pair.split("=", 1)[0].strip() for pair in environ.get("OTEL_RESOURCE_ATTRIBUTES", "").split(",")}
    if environ.get("OTEL_SERVICE_NAME", "").strip():
        given.add("service.name")
    defaults = {"service.name": "toolrun", "service.version": __version__}
    return Resource.create({k: v for k, v in defaults.items() if k not in given})


def _exporter(name: str) -> SpanExporter:
    if name == "console":  # stderr: under stdio MCP, stdout is the protocol
        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()  # endpoint, headers, timeout, compression: the OTEL_EXPORTER_OTLP_* variables


class CallSpan:
    """The span of one tool call, current from `start_call` until `end`."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span) -> None:
        self.span = span
        self.token = otel_context.attach(trace.set_span_in_context(span))

    @property
    def trace_id(self) -> str:
        return format(self.span.get_span_context().trace_id, "032x")

    def end(self, outcome: str, result: CallResult | None, error: type[BaseException] | None, seconds: float) -> None:
        span = self.span
        try:
            if span.is_recording():
                attributes: dict[str, Any] = {
                    "toolrun.call.outcome": outcome,
                    "toolrun.call.duration_ms": round(seconds * 1000, 3),
                    "toolrun.output.bytes": output_bytes(result),
                }
                ex = result.exec if result is not None else None
                if ex is not None:
                    attributes["process.exit.code"] = ex.returncode
                    attributes["toolrun.output.truncated"] = ex.truncated
                    if ex.truncated:
                        attributes["toolrun.output.bytes_dropped"] = ex.bytes_dropped
                if outcome != "ok":
                    attributes["error.type"] = error.__name__ if error is not None else outcome
                    span.set_status(StatusCode.ERROR, outcome)
                span.set_attributes(attributes)
        finally:
            otel_context.detach(self.token)
            span.end()


class RequestSpan:
    """The SERVER span of one HTTP request, current from `start_request` until `end`."""

    __slots__ = ("span", "token")

    def __init__(self, span: Span, parent: otel_context.Context | None) -> None:
        self.span = span
        # In the caller's context (its baggage with it), not only its span.
        self.token = otel_context.attach(trace.set_span_in_context(span, parent))

    def end(self, status: int, error: BaseException | None = None) -> None:
        span = self.span
        try:
            if span.is_recording():
                if status:
                    span.set_attribute("http.response.status_code", status)
                if status >= 500 or (error is not None and not status):
                    span.set_attribute("error.type", str(status) if status else type(error).__qualname__)
                    span.set_status(StatusCode.ERROR)
        finally:
            otel_context.detach(self.token)
            span.end()


class StringsOnly(TextMapPropagator):
    """The global propagator (OTEL_PROPAGATORS), reading only the string values of a carrier: an MCP request's
    `_meta` is JSON, and a `baggage` or `traceparent` that is a number or an object is ignored (as a malformed
    header is) instead of failing the request deep in the propagator."""

    def __init__(self, inner: TextMapPropagator) -> None:
        self.inner = inner

    def extract(self, carrier: Any, context: Any = None, getter: Any = default_getter) -> Any:
        if isinstance(carrier, Mapping):
            carrier = {k: v for k, v in carrier.items() if isinstance(v, str)}
        return self.inner.extract(carrier, context, getter)

    def inject(self, carrier: Any, context: Any = None, setter: Any = default_setter) -> None:
        self.inner.inject(carrier, context, setter)

    @property
    def fields(self) -> set[str]:
        return set(self.inner.fields)


class Tracing:
    """toolrun's tracer and what it puts into tools; `telemetry.TRACING` while tracing is on."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("toolrun", __version__)

    @classmethod
    def start(cls, exporters: Iterable[str], environ: Mapping[str, str]) -> Tracing:
        """A provider exporting in batches with each of `exporters`, installed as the global one."""
        provider = TracerProvider(resource=_resource(environ))
        for name in exporters:
            provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
        trace.set_tracer_provider(provider)
        if not isinstance(propagate.get_global_textmap(), StringsOnly):
            propagate.set_global_textmap(StringsOnly(propagate.get_global_textmap()))
        return cls(provider)

    def shutdown(self, wait: float = SHUTDOWN_WAIT) -> None:
        """Export what is queued, waiting at most `wait` seconds: a collector that does not answer must not
        hold a stopping server up for the exporter's whole timeout (10 s by default) and its retries."""
        stopping = threading.Thread(target=self.provider.shutdown, name="toolrun-otel-shutdown", daemon=True)
        stopping.start()
        stopping.join(wait)
        if stopping.is_alive():
            log.warning("tracing: the spans still queued were not exported in %gs (is the collector up?)", wait)

    # -- spans ---------------------------------------------------------------------------------

    def start_call(self, tool: ToolSpec, identity: Identity, origin: CallOrigin | None) -> CallSpan:
        """The span of a call of `tool`, a child of the current span (the request's)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.key,
            "toolrun.tool.kind": tool.kind,
            "toolrun.door": origin.door if origin is not None else "cli",
        }
        if origin is not None and origin.request_id:
            attributes["toolrun.request_id"] = origin.request_id
        if origin is not None and origin.job_id:
            attributes["toolrun.job.id"] = origin.job_id
        if not identity.anonymous:
            attributes["enduser.id"] = identity.username
        links = _links(origin.link) if origin is not None and origin.link else None
        span = self.tracer.start_span(
            f"execute_tool {tool.key}", kind=SpanKind.INTERNAL, attributes=attributes, links=links
        )
        return CallSpan(span)

    def start_request(
        self, scope: Mapping[str, Any], head: Mapping[bytes, bytes], path: str, route: str | None
    ) -> RequestSpan:
        """The SERVER span of an ASGI HTTP request, joined to the caller's trace (`path` with keys scrubbed;
        `head`: each header's first value by its lower-cased name, as the HTTP door reads it once)."""
        carrier: dict[str, str] = {}
        for field in _CARRIED:
            value = head.get(field)
            if value is not None:
                carrier[field.decode()] = value.decode("latin-1")
        agent = head.get(b"user-agent", b"").decode("latin-1")
        method = scope.get("method", "")
        known = method if method in _METHODS else "_OTHER"
        attributes: dict[str, Any] = {
            "http.request.method": known,
            "url.path": path,
            "url.scheme": scope.get("scheme", "http"),
            "network.protocol.version": scope.get("http_version", "1.1"),
        }
        if known != method:
            attributes["http.request.method_original"] = method
        if route is not None:
            attributes["http.route"] = route
        client = scope.get("client")
        if client:
            attributes["client.address"] = client[0]
        if agent:
            attributes["user_agent.original"] = agent
        name = f"{known} {route}" if route is not None else ("HTTP" if known == "_OTHER" else known)
        parent = propagate.extract(carrier) if carrier else None
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes)
        return RequestSpan(span, parent)

    # -- what reaches the tool -----------------------------------------------------------------

    @staticmethod
    def current_traceparent() -> str:
        """The W3C traceparent of the current span, or "" outside any trace."""
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        return carrier.get("traceparent", "")

    @staticmethod
    def current_trace_id() -> str:
        """The current trace's id (32 hex digits), or "" outside any trace."""
        context = trace.get_current_span().get_span_context()
        return format(context.trace_id, "032x") if context.is_valid else ""

    @staticmethod
    def into_tool(kind: str, command: str, env: dict[str, str]) -> tuple[str, dict[str, str]]:
        """`TRACEPARENT` (and `TRACESTATE`) of the current span in the tool's environment; for a curl tool,
        `traceparent` (and `tracestate`) headers too.

        A curl tool's command starts with `curl ` (the catalog builds it so); the headers go right after
        it, before the template's words, so they apply to each URL of the request."""
        carrier: dict[str, str] = {}
        _W3C.inject(carrier)
        if not carrier:
            return command, env
        env = {**env, **{name.upper(): value for name, value in carrier.items()}}
        if kind == "curl" and command.startswith("curl "):
            headers = " ".join(f"-H {shlex.quote(f'{name}: {value}')}" for name, value in carrier.items())
            command = f"curl {headers} {command[5:]}"
        return command, env

    @staticmethod
    def join_baggage(meta: Mapping[str, Any]) -> object | None:
        """The baggage of `meta` (an MCP request's `_meta`) added to the current context; a token for `leave`."""
        # Only a string is baggage: any other value (a number, a list, an object) is ignored, as a malformed
        # `baggage` header is, instead of failing the call.
        value = meta.get("baggage") if isinstance(meta, Mapping) else None
        if not isinstance(value, str):
            return None
        entries = baggage.get_all(_BAGGAGE.extract({"baggage": value}))
        if not entries:
            return None
        context = otel_context.get_current()
        for name, value in entries.items():
            context = baggage.set_baggage(name, value, context)
        return otel_context.attach(context)

    @staticmethod
    def leave(token: object) -> None:
        otel_context.detach(token)  # type: ignore[arg-type]

    @staticmethod
    def carried(fn: F) -> F:
        """`fn`, to be run by another thread inside the current context (the call's span current there too)."""
        copied = contextvars.copy_context()

        def run(*args: Any, **kwargs: Any) -> Any:
            return copied.run(fn, *args, **kwargs)

        return run  # type: ignore[return-value]
