"""`toolrun access explain USER TOOL` and `toolrun keys test KEY`: who may see and call what, and why.

Both read the key store and the catalog directly (`access explain --url URL` asks a running server
instead); the reasoning is the core's (`toolrun.access.explain`), these commands only print it.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .client import open_client
from .common import CatalogOpt, JsonOpt, app, fail, make_service, open_access, operator_identity, print_err, print_json
from .keys import keys_app

access_app = typer.Typer(help="Explain who may see and call which tool, and why.")
app.add_typer(access_app, name="access")


@access_app.command("explain")
def access_explain(
    user: Annotated[
        str, typer.Argument(help="User name (`-` for an anonymous caller), or a bearer token (JWT) with OAuth on.")
    ],
    tool: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            metavar="URL",
            help="Ask this running server instead (it answers from its own settings and live buckets; "
            "needs an admin key). Default: toolrun's --url / $TOOLRUN_URL.",
            show_default=False,
        ),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", metavar="KEY", help="An admin's API key for --url.", show_default=False),
    ] = None,
) -> None:
    """Why USER may or may not see and call TOOL: groups against tags, public, keys, rate limit.

    Without --url it reads what the server reads (the config file, SVC_* variables, the key store) and says
    where each value came from; with --url it asks the running server. Exit 0 when the tool is visible and
    callable, 1 when it is not."""
    from ..access.explain import explain_text
    from ..errors import ToolrunError

    try:
        answer = open_client(catalog, url=url, api_key=api_key).explain(user, tool)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json(answer)
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
    from ..access.explain import key_report_text
    from ..errors import ToolrunError, UsageError

    try:
        access = open_access()
        if access.key_report(key.strip()) is None:
            raise UsageError("unknown key: no key in the store matches it (check for a typo or a cut-off paste)")
        tools = None
        try:
            tools = make_service(catalog).list(operator_identity())
        except ToolrunError as exc:
            if catalog:
                raise
            print_err(f"toolrun: {exc} (the tools are not listed)")
        report = access.key_report(key.strip(), tools)
        assert report is not None
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json(report)
    else:
        sys.stdout.write(key_report_text(report))
    raise typer.Exit(0 if report["valid"] else 1)
