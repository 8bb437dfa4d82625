"""`toolrun access explain USER TOOL` and `toolrun keys test KEY`: who may see and call what, and why.

Both read the key store and the catalog directly (no server); the reasoning is the core's
(`toolrun.explain`), these commands only print it.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import typer

from .common import CatalogOpt, JsonOpt, _err, _fail, _make_service, _operator, _print_json, _settings, app
from .keys import _store, keys_app

access_app = typer.Typer(help="Explain who may see and call which tool, and why.")
app.add_typer(access_app, name="access")


def _limiter(settings: Any, store: Any) -> Any:
    """The shared (Redis) limiter, whose buckets this process can read; None for in-memory buckets,
    which live in the server's own memory."""
    if not (settings["redis_url"] and settings["rate_limit.enabled"]):
        return None
    from ..redis_store import RedisLimiter  # type: ignore[import-not-found,unused-ignore]

    return RedisLimiter(store, int(settings["rate_limit.calls"]), float(settings["rate_limit.window"]))


@access_app.command("explain")
def access_explain(
    user: Annotated[str, typer.Argument(help="User name (`-` for an anonymous caller).")],
    tool: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Why USER may or may not see and call TOOL: groups against tags, public, keys, rate limit.

    Exit 0 when the tool is visible and callable, 1 when it is not."""
    import asyncio

    from ..errors import ToolrunError
    from ..explain import explain, explain_text

    try:
        settings = _settings()
        service = _make_service(catalog, settings)
        store = _store()
        answer = asyncio.run(
            explain(
                tool_key=tool,
                tool=service.catalog.tools.get(tool),
                username=user,
                store=store,
                limiter=_limiter(settings, store),
                settings=settings,
            )
        )
    except ToolrunError as exc:
        _fail(exc)
    if as_json:
        _print_json(answer)
    else:
        sys.stdout.write(explain_text(answer))
    raise typer.Exit(0 if answer["callable"] else 1)


@keys_app.command("test")
def keys_test(
    key: Annotated[str, typer.Argument(help="The whole API key (trk_...).")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Whose key this is, whether it works, and which tools it may call; no server needed.

    Exit 0 for a working key, 1 for a revoked or expired one, 2 for an unknown one."""
    from ..errors import ToolrunError, UsageError
    from ..explain import key_report, key_report_text

    try:
        found = _store().inspect(key.strip())
        if found is None:
            raise UsageError("unknown key: no key in the store matches it (check for a typo or a cut-off paste)")
        tools = None
        try:
            tools = _make_service(catalog).list(_operator())
        except ToolrunError as exc:
            if catalog:
                raise
            _err(f"toolrun: {exc} (the tools are not listed)")
    except ToolrunError as exc:
        _fail(exc)
    report = key_report(found[0], found[1], tools)
    if as_json:
        _print_json(report)
    else:
        sys.stdout.write(key_report_text(report))
    raise typer.Exit(0 if report["valid"] else 1)
