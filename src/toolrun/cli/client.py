"""The one client interface of the CLI's commands, and the factory that picks its implementation.

A command asks `open_client` for a `Client` and calls it: it never knows whether the tools are the local
catalog's (`LocalClient` in cli/client_local.py: the one ToolService, as the operator) or a running server's
(`toolrun.cli.client_remote.Remote`: the REST routes, as the API key's owner). The server is a command's own `--url`,
else toolrun's `--url` / `$TOOLRUN_URL`; without one the client is local.

Both implementations answer in the local commands' terms: ToolSpecs, tool entries and search pages as the
HTTP door sends them, CallResults, and the same ToolrunError classes (so errors exit with the same codes).
Neither is imported before it is picked: the remote client never loads the ToolService, the local one
never loads urllib's HTTP client.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from .common import SERVER, fail

if TYPE_CHECKING:
    from ..models import CallResult, ToolSpec

Called: TypeAlias = "tuple[CallResult | None, dict[str, Any]]"
"""What a call answered: its result and the JSON payload `toolrun call --json` prints; a call that became
a job (approval) is `(None, {"job": ID, "status": STATE})`."""


class Client(Protocol):
    """What the commands ask of the tools, wherever they are."""

    def list(self, group: str | None = None) -> builtins.list[ToolSpec]:
        """The tools the caller may see (those tagged `group` only, with one)."""

    def describe(self, key: str) -> ToolSpec:
        """One tool the caller may see; NotFound for an unknown or hidden one."""

    def entry(self, key: str) -> dict[str, Any]:
        """The tool's entry as GET /tools/{key} answers it (with whether its host can enforce its sandbox)."""

    def warnings(self, key: str) -> builtins.list[str]:
        """What the catalog check found about this tool, to show before a call (a server keeps its own)."""

    def search(
        self, query: str, offset: int = 0, limit: int = 10, min_score: float | None = None, explain: bool = False
    ) -> dict[str, Any]:
        """A page as GET /search answers it, plus `tools`: the page's ToolSpecs (`min_score` None: the default)."""

    def plan(self, key: str, args: dict[str, Any]) -> dict[str, Any]:
        """What the call would run (`--dry-run`), running nothing."""

    def call(self, key: str, args: dict[str, Any]) -> Called:
        """Run the tool, or start the job its call becomes (see `Called`)."""

    def explain(self, user: str, tool: str) -> dict[str, Any]:
        """Why `user` may or may not see and call `tool` (`toolrun access explain`)."""

    def jobs(self, status: str | None = None, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        """The jobs the caller may see, newest first, as GET /jobs answers them (in state `status` only, with one):
        every page, or the `limit` newest."""

    def job(self, job_id: str) -> dict[str, Any]:
        """One job as GET /jobs/{id} answers it."""

    def job_action(self, job_id: str, action: str, reason: str = "") -> dict[str, Any]:
        """approve, deny or cancel a job: the job as it is after."""


def open_client(
    catalog: builtins.list[str] | None = None,
    *,
    url: str | None = None,
    api_key: str | None = None,
    audit: bool = False,
) -> Client:
    """The client of every command: the server of `url`, else of toolrun's --url; the local catalog without one.

    A URL that is not http(s) exits as the commands' errors do. `audit` writes an audit record of each call
    run here (the server of `--url` keeps its own)."""
    url = url or SERVER["url"]
    if not url:
        from .client_local import LocalClient

        return LocalClient(catalog, audit=audit)
    from ..errors import ToolrunError
    from .client_remote import Remote

    try:
        return Remote(url, api_key or SERVER["api_key"])
    except ToolrunError as exc:
        fail(exc)
