"""`toolrun jobs list|show|approve|deny|cancel|tail`, and the wait of `toolrun call` on a job (docs/jobs.md).

Local (the jobs in this machine's shared state, the operator's identity) or with `--url` (the server's
REST routes, the key's identity): both through the client of every command (cli/client.py).
A local `jobs approve` runs the approved call in this process, to its end, and prints its result.
"""

from __future__ import annotations

import json
import sys
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .client import open_client
from .common import CatalogOpt, JsonOpt, app, fail, print_json

if TYPE_CHECKING:
    from .client import Client

jobs_app = typer.Typer(help="Calls that wait for approval or run in the background: list, show, decide, follow.")
app.add_typer(jobs_app, name="jobs")

FINAL = ("succeeded", "failed", "timed_out", "cancelled", "denied", "expired")
POLL = 0.5


def describe_state(view: dict[str, Any]) -> str:
    line = f"job {view['job']} ({view['tool']}): {view['status']}"
    if view.get("decided_by"):
        line += f" by {view['decided_by']}"
    if view.get("reason"):
        line += f": {view['reason']}"
    if view.get("error"):
        line += f" ({view['error']})"
    return line


def wait_for(jobs: Client, job_id: str, show_output: bool = False) -> dict[str, Any]:
    """Poll the job until it ends; progress on stderr when it is a terminal (or with `show_output`)."""
    last = ""
    printed = 0
    tty = sys.stderr.isatty()
    while True:
        view: dict[str, Any] = jobs.job(job_id)
        state = describe_state(view)
        if state != last and (tty or show_output):
            hint = (
                f" (an approver runs: toolrun jobs approve {job_id})" if view["status"] == "awaiting_approval" else ""
            )
            sys.stderr.write(state + hint + "\n")
            last = state
        if show_output:
            head = (view.get("output") or {}).get("stdout_head", "")
            if len(head) > printed and not (view.get("output") or {}).get("stdout_tail"):
                sys.stdout.write(head[printed:])
                sys.stdout.flush()
                printed = len(head)
        if view["status"] in FINAL:
            view["_printed"] = printed
            return view
        time.sleep(POLL)


def finish(view: dict[str, Any], as_json: bool, printed: int = 0) -> None:
    """Print a finished job's result as `toolrun call` prints a result, and exit with its code."""
    from .call import exit_code
    from .client_remote import result_from_payload

    result = view.get("result")
    if result is None:
        if as_json:
            print_json(view)
        sys.stderr.write(f"toolrun: {describe_state(view)}\n")
        raise typer.Exit(1)
    body = result["body"]
    if result["status"] != 200:
        try:
            error = json.loads(body)
            text = f"{error['type']}: {error['error']}"
        except (ValueError, KeyError, TypeError):
            text = body
        sys.stderr.write(f"toolrun: {text}\n")
        raise typer.Exit(1 if result["status"] >= 500 else 2)
    payload = json.loads(body) if result["content_type"].startswith("application/json") else {"text": body}
    if as_json:
        print_json(payload)
    call = result_from_payload(view["tool"], payload)
    ex = call.exec
    if not as_json:
        from ..formatting import result_text

        text = ex.stdout if ex is not None else result_text(call.value)
        sys.stdout.write(text[printed:])
        if ex is not None and not call.ok:
            sys.stderr.write(ex.stderr)
        elif ex is None and text and not text.endswith("\n"):
            sys.stdout.write("\n")
    if not call.ok and ex is not None:
        raise typer.Exit(exit_code(ex.returncode, ex.timed_out))


def _table(views: list[dict[str, Any]]) -> None:
    for view in views:
        created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(view["created"]))
        who = view.get("requester") or "(anonymous)"
        sys.stdout.write(f"{view['job']}  {view['status']:<17}  {view['tool']}  {who}  {created}\n")


ReasonOpt = Annotated[str, typer.Option("--reason", "-r", help="Why (recorded in the job and the audit trail).")]
JobArg = Annotated[str, typer.Argument(help="The job id (from `toolrun jobs list`, or the call's answer).")]


@jobs_app.command("list")
def list_jobs(
    status: Annotated[str | None, typer.Option("--status", help="Only jobs in this state.")] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the LIMIT newest jobs (default: every page).")
    ] = None,
    catalog: CatalogOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Jobs you may see, newest first: your calls, and the calls of the tools you approve."""
    from ..errors import ToolrunError

    try:
        views = open_client(catalog).jobs(status, limit)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json(views)
    else:
        _table(views)


@jobs_app.command("show")
def show(job: JobArg, catalog: CatalogOpt = None) -> None:
    """One job as JSON: state, parameters, the command it runs (approvers), its output or result."""
    from ..errors import ToolrunError

    try:
        print_json(open_client(catalog).job(job))
    except ToolrunError as exc:
        fail(exc)


def _act(action: str, job: str, reason: str, catalog: list[str] | None, as_json: bool) -> None:
    from ..errors import ToolrunError

    try:
        view = open_client(catalog).job_action(job, action, reason)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json(view)
    else:
        sys.stderr.write(describe_state(view) + "\n")


@jobs_app.command("approve")
def approve(job: JobArg, reason: ReasonOpt = "", catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Approve a call awaiting approval (never your own); locally, it runs here to its end."""
    _act("approve", job, reason, catalog, as_json)


@jobs_app.command("deny")
def deny(job: JobArg, reason: ReasonOpt = "", catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Deny a call awaiting approval, with a reason."""
    _act("deny", job, reason, catalog, as_json)


@jobs_app.command("cancel")
def cancel(job: JobArg, reason: ReasonOpt = "", catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Cancel a job awaiting approval or running (its processes are killed)."""
    _act("cancel", job, reason, catalog, as_json)


@jobs_app.command("tail")
def tail(job: JobArg, catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """Follow a job: its state changes on stderr, its output on stdout, then its result and exit code."""
    from ..errors import ToolrunError

    try:
        view = wait_for(open_client(catalog), job, show_output=True)
    except ToolrunError as exc:
        fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    finish(view, as_json, int(view.pop("_printed", 0)))
