"""`toolrun jobs list|show|approve|deny|cancel|tail`, and the wait of `toolrun call` on a job (docs/jobs.md).

Local (the jobs in this machine's shared state, the operator's identity) or with `--url` (the server's
REST routes, the key's identity): both through the client of every command (cli/client.py).
A local `jobs approve` runs the approved call in this process, to its end, and prints its result.
"""

from __future__ import annotations

import json
import sys
import time
import unicodedata
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .client import open_client
from .common import CatalogOpt, JsonOpt, app, exit_code, fail, print_json

if TYPE_CHECKING:
    from .client import Client

jobs_app = typer.Typer(help="Calls that wait for approval or run in the background: list, show, decide, follow.")
app.add_typer(jobs_app, name="jobs")

FINAL = ("succeeded", "failed", "timed_out", "cancelled", "denied", "expired")
POLL = 0.5


def terminal_text(text: str) -> str:
    """`text` as a terminal shows it, with every control and format character (an escape sequence, the one-byte
    CSI U+009B, a carriage return, a bidi override) written out as `\\x1b`, `\\u202e`: a requester's argument must
    not rewrite the command an approver reads. Newlines and tabs stay."""
    if text.isascii() and text.isprintable():
        return text
    out = []
    for c in text:
        if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf"):
            out.append(c)
        else:
            out.append(f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
    return "".join(out)


def describe_state(view: dict[str, Any]) -> str:
    line = f"job {view['job']} ({view['tool']}): {view['status']}"
    if view.get("decided_by"):
        line += f" by {view['decided_by']}"
    if view.get("reason"):
        line += f": {view['reason']}"
    if view.get("error"):
        line += f" ({view['error']})"
    return terminal_text(line)


TIME_FIELDS = ("created", "updated", "expires_at", "decided_at", "started", "finished")


def iso(moment: Any) -> Any:
    """A job's time (Unix seconds) as ISO 8601 in UTC, `2026-11-28T04:30:00Z`; anything else as it is."""
    if isinstance(moment, (int, float)) and not isinstance(moment, bool):
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))
    return moment


def with_iso(view: dict[str, Any]) -> dict[str, Any]:
    """A job view for people and scripts: its times in ISO 8601."""
    return {k: iso(v) if k in TIME_FIELDS else v for k, v in view.items()}


def shown_output(stream: Any, text: str) -> str:
    """A job's output as `stream` takes it: to a terminal, with control and format characters written out
    (`terminal_text`): the job may be another person's, and its output holds what that person sent wherever the tool
    echoes an argument (an escape sequence would rewrite the lines an approver reads, set the clipboard); to a
    pipe or a file, exactly as the tool printed it."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return terminal_text(text) if terminal else text


def _new_output(view: dict[str, Any], printed: list[int]) -> None:
    """Write what the running job printed since the last look: stdout to stdout, stderr to stderr."""
    output = view.get("output") or {}
    for i, (name, stream) in enumerate((("stdout", sys.stdout), ("stderr", sys.stderr))):
        head = output.get(f"{name}_head", "")
        if len(head) > printed[i] and not output.get(f"{name}_tail"):
            stream.write(shown_output(stream, head[printed[i] :]))
            stream.flush()
            printed[i] = len(head)


def wait_for(jobs: Client, job_id: str, show_output: bool = False, hold: bool = False) -> dict[str, Any]:
    """Poll the job until it ends; each change of its state on stderr (a script reads the job id there too),
    and with `show_output` what it prints as it runs. With `hold` (the requester's `toolrun call`), each poll
    renews the requester's hold on its request."""
    last = ""
    printed = [0, 0]
    while True:
        view: dict[str, Any] = _held(jobs, job_id) if hold else jobs.job(job_id)
        hold = hold and view.pop("_held", True)
        state = describe_state(view)
        if state != last and view["status"] not in FINAL:
            hint = (
                f" (an approver runs: toolrun jobs approve {job_id})" if view["status"] == "awaiting_approval" else ""
            )
            sys.stderr.write(state + hint + "\n")
            sys.stderr.flush()
            last = state
        if show_output:
            _new_output(view, printed)
        if view["status"] in FINAL:
            view["_printed"] = printed
            return view
        time.sleep(POLL)


def _held(jobs: Client, job_id: str) -> dict[str, Any]:
    """Renew the hold; a server older than holds (no such route: 404) is polled without one from then on."""
    from ..errors import NotFound

    try:
        return jobs.job_action(job_id, "hold")
    except NotFound:
        return {**jobs.job(job_id), "_held": False}  # the job itself is not found: NotFound, as before


def finish(view: dict[str, Any], as_json: bool, printed: tuple[int, int] = (0, 0)) -> None:
    """Print a finished job's result as `toolrun call` prints a result (less what `printed` says was shown
    already, of stdout and of stderr), and exit with its code."""
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
        sys.stdout.write(shown_output(sys.stdout, text[printed[0] :]))
        sys.stdout.flush()
        if ex is not None:
            sys.stderr.write(shown_output(sys.stderr, ex.stderr[printed[1] :]))
        elif text and not text.endswith("\n"):
            sys.stdout.write("\n")
    if not call.ok and ex is not None:
        raise typer.Exit(exit_code(ex.returncode, ex.timed_out))


def _table(views: list[dict[str, Any]]) -> None:
    for view in views:
        who = view.get("requester") or "(anonymous)"
        line = f"{view['job']}  {view['status']:<17}  {view['tool']}  {who}  {iso(view['created'])}"
        sys.stdout.write(terminal_text(line) + "\n")


def show_text(view: dict[str, Any]) -> str:
    """A job for people: its state, who asked and when, what it runs, the decision, its output or result."""
    lines = [describe_state(view)]
    asked = f"requested by {view.get('requester') or '(anonymous)'} at {iso(view['created'])}"
    if view["status"] == "awaiting_approval":
        asked += f"; approvers: {', '.join(view['approvers'])}"
        if view.get("expires_at"):
            asked += f"; expires at {iso(view['expires_at'])}"
    lines.append(asked)
    if view.get("args"):
        lines.append("args: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in view["args"].items()))
    plan = view.get("plan") or {}
    if plan.get("command"):
        lines.append(f"command: {plan['command']}")
    if view.get("can_decide"):
        lines.append(f"you may decide: toolrun jobs approve {view['job']} (or deny)")
    output = view.get("output") or {}
    for name in ("stdout", "stderr"):
        text = output.get(f"{name}_head", "") + ("…" + output[f"{name}_tail"] if output.get(f"{name}_tail") else "")
        if text:
            lines += [f"{name} so far:", *("  " + line for line in text.splitlines())]
    result = view.get("result")
    if result is not None:
        lines.append(f"result: HTTP {result['status']}, exit code {result.get('exit_code')}")
        lines += ["  " + line for line in str(result.get("body", "")).splitlines()]
    lines.append(f"updated at {iso(view['updated'])}")
    return terminal_text("\n".join(lines)) + "\n"


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
    """Jobs you may see, newest first: your calls, and the calls of the tools you approve (times in ISO 8601,
    UTC)."""
    from ..errors import ToolrunError, UsageError
    from ..jobrecord import STATES

    if status is not None and status not in STATES:
        fail(UsageError(f"--status must be one of {', '.join(STATES)}"))
    try:
        views = open_client(catalog).jobs(status, limit)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json([with_iso(v) for v in views])
    else:
        _table(views)


@jobs_app.command("show")
def show(job: JobArg, catalog: CatalogOpt = None, as_json: JsonOpt = False) -> None:
    """One job: state, who asked, parameters, the command it runs (approvers), its output or result."""
    from ..errors import ToolrunError

    try:
        view = open_client(catalog).job(job)
    except ToolrunError as exc:
        fail(exc)
    if as_json:
        print_json(with_iso(view))
    else:
        sys.stdout.write(show_text(view))


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
    """Follow a job: its state changes on stderr, its output as it comes (stdout and stderr), then its result,
    its final state on stderr after the last output line, and its exit code."""
    from ..errors import ToolrunError

    try:
        view = wait_for(open_client(catalog), job, show_output=True)
    except ToolrunError as exc:
        fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    printed = view.pop("_printed", [0, 0])
    _new_output(view, printed)  # the last lines, stderr's too (a text result holds stdout only)
    try:
        finish(view, as_json, (printed[0], printed[1]))
    finally:
        if view.get("result") is not None:  # finish() already said how a job without a result ended
            sys.stdout.flush()
            sys.stderr.write(describe_state(view) + "\n")
