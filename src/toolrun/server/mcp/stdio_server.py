"""`toolrun serve --stdio`: the MCP door over stdin/stdout for desktop agents, wired from the settings.

The HTTP server's wiring is run.py's; this is the same service behind the MCP door alone, with stdout
carrying only the protocol (mcp/stdio.py holds every line read to the JSON rule of every door).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable, Sequence
from typing import Any

from ... import telemetry
from ...access import Access
from ...access.audit import open_audit
from ...models import Identity
from ...service import ToolService, catalog_paths
from ...settings import Settings
from ...state import SharedState
from ...words import plural
from ..accesslog import configure_logging
from ..run import log_catalog_warnings, protect_process

log = logging.getLogger("toolrun.server")


def serve_stdio(settings: Settings, catalog: Sequence[str] | None = None) -> None:
    """MCP over stdin/stdout for desktop agents: stdout carries only the protocol.

    The key and the catalog are checked before the MCP SDK is imported (it is slow to import),
    so a misconfigured desktop client gets its error at once."""
    import os

    from ...errors import Unauthorized

    signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # a closed pipe to a tool's stdin is an error, not our death
    configure_logging(settings.log_level, settings.log_format)
    telemetry.setup(os.environ)  # OTEL_* variables: off (nothing imported) unless they ask for traces
    access = Access.from_settings(settings)
    state = SharedState(settings, keys=access.store)
    service = ToolService.from_paths(
        catalog_paths(catalog, settings),
        settings,
        access=access,
        limiter=state.limiter(),
        sessions=state.sessions(),
        audit=open_audit(settings.audit_log),
    )
    log_catalog_warnings(service)
    service.use_jobs(settings, access)
    given = os.environ.get("TOOLRUN_API_KEY")
    raw_key = (given or "").strip()
    if given is not None and not raw_key:
        # An MCP client's `${env:TOOLRUN_API_KEY}` or `${input:...}` of nothing: meant to act for a key's user, it
        # would act as the local operator, with every tool. Only a variable left out means the operator.
        raise Unauthorized(
            "TOOLRUN_API_KEY is set but empty: give a key, or leave the variable out of the environment to act as "
            "the local operator"
        )
    if raw_key:
        try:
            identity = access.identify_now(raw_key, "required", "stdio")
        except Unauthorized:
            raise Unauthorized("TOOLRUN_API_KEY is not a valid, unexpired, unrevoked key") from None
    else:
        identity = Identity.operator()
    protect_process()  # before any tool runs; after the checks, so a failed start prints only its reason

    import anyio
    from mcp.server.stdio import stdio_server

    from .door import McpDoor, build_server, new_stdio_session
    from .stream import StreamHub

    who = _checked_identity(access, raw_key, identity) if raw_key else (lambda ctx: identity)
    door = McpDoor(
        service,
        who,
        direct=settings.mcp_direct,
        stdio_session=new_stdio_session(),
        approval_round=settings.mcp_approval_round,
    )
    # Only its subscriptions/listen is used here: how a 2026-07-28 client over stdio hears of a reload.
    streams = StreamHub(
        None, keepalive=settings.mcp_stream_keepalive, write_timeout=0, max_streams=settings.mcp_max_streams
    )
    server = build_server(door, list_changed=True, listen=streams.listen)
    log.info("MCP over stdio as %s, %s", identity.username, plural(len(service.list(identity)), "tool"))
    if (problem := service.sandbox_problem()) is not None:
        log.warning("%s; their calls fail", problem)

    from ...catalog.reload import Reloader
    from ...service import load_options

    reloader = Reloader(service, catalog_paths(catalog, settings), load_options(settings))
    reloader.listeners.append(door.catalog_changed)
    reloader.listeners.append(streams.catalog_changed)

    import mcp_types
    from mcp.shared.message import SessionMessage

    from .stdio import StrictLines, claim_stdin

    lines = StrictLines(anyio.wrap_file(claim_stdin()))  # the JSON rule of every door, before the SDK parses

    async def main() -> None:
        transport = stdio_server(stdin=lines)  # type: ignore[arg-type]  # any async iterable of lines will do
        async with reloader.running(settings.reload_interval), transport as (read_stream, write_stream):

            async def send(raw: dict[str, Any]) -> None:
                message = mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
                await write_stream.send(SessionMessage(message))

            lines.send = send
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        telemetry.shutdown()


RECHECK = 1.0  # seconds: how long the key store's word on TOOLRUN_API_KEY is trusted


def _checked_identity(access: Access, raw_key: str, identity: Identity) -> Callable[[Any], Identity]:
    """`identify(ctx)` for a stdio client with TOOLRUN_API_KEY: the key store's word, asked again at most once a
    second, so a key revoked or expired (or a user's groups changed) while the server runs applies within a
    second, as over HTTP, where each request is checked; a stdio session can last for days."""
    import time

    from ...errors import Unauthorized

    known, checked = identity, time.monotonic()

    def identify(ctx: Any) -> Identity:
        nonlocal known, checked
        now = time.monotonic()
        if now - checked >= RECHECK:
            try:
                known = access.identify_now(raw_key, "required", "stdio")
            except Unauthorized:
                raise Unauthorized("TOOLRUN_API_KEY is no longer a valid key (revoked or expired)") from None
            checked = now
        return known

    return identify
