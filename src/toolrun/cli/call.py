"""`toolrun call`: parse the arguments, call the tool, print the result verbatim."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .client import open_client
from .common import CatalogOpt, JsonOpt, app, exit_code, fail, print_err, print_json

if TYPE_CHECKING:
    from ..models import CallResult
    from .client import Called, Client


# Unknown options reach `args`, so that `--path /` gets a hint (`path=/`) instead of "No such option".
@app.command(context_settings={"ignore_unknown_options": True})
def call(
    key: Annotated[str, typer.Argument(help="Tool key, e.g. ops.disk_usage.")],
    args: Annotated[
        list[str] | None,
        typer.Argument(help="name=value (coerced to the declared type) or name:=JSON.", show_default=False),
    ] = None,
    catalog: CatalogOpt = None,
    input_file: Annotated[
        str | None,
        typer.Option(
            "--input", "-i", metavar="FILE", help="Read all arguments as one JSON object from a file, or - for stdin."
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show what would run, and run nothing.")] = False,
    as_json: JsonOpt = False,
    audit: Annotated[
        bool,
        typer.Option("--audit", help="Write an audit record of the call (to the audit_log setting, else stderr)."),
    ] = False,
    no_wait: Annotated[
        bool,
        typer.Option("--no-wait", help="A call that needs approval: print its job id instead of waiting."),
    ] = False,
) -> None:
    """Call a tool. The result goes to stdout verbatim; a failed command exits with its own code."""
    from ..errors import OutputInvalid, ToolrunError

    client = open_client(catalog, audit=audit)
    try:
        called = _call(client, key, args or [], input_file, dry_run, as_json)
        if called is None:  # --dry-run: the plan is printed
            return
        result, payload = called
        if result is None:
            return _job(client, payload, no_wait, as_json)
    except ToolrunError as exc:
        if as_json:
            print_json(error_object(key, exc))
        elif isinstance(exc, OutputInvalid):  # the raw text stays the caller's: on stdout, the reason on stderr
            sys.stdout.write(exc.output)
            sys.stdout.flush()
        fail(exc)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    note = _sandbox_note(client, key) if not result.ok and result.exec is not None else ""
    _print_result(result, payload, as_json, note)


def _sandbox_note(client: Client, key: str) -> str:
    """On stderr, for a failed sandboxed call: the profile it ran in and what that withholds (so that a "No such
    file" or "Couldn't connect" reads as the sandbox's doing)."""
    from ..exec.sandboxview import note
    from ..models import Sandbox

    try:
        shown = client.entry(key).get("sandbox")
        cwd = client.describe(key).cwd
    except Exception:  # the note is a courtesy: never fail the call's own answer for it
        return ""
    if not isinstance(shown, dict):
        return ""
    box = Sandbox(
        profile=str(shown.get("profile", "")),
        network=str(shown.get("network", "none")),
        readable=tuple(shown.get("readable") or ()),
        writable=tuple(shown.get("writable") or ()),
    )
    return note(key, box, cwd)


def _call(
    client: Client, key: str, words: list[str], input_file: str | None, dry_run: bool, as_json: bool
) -> Called | None:
    """Read the arguments against the tool's params, then run it (or print its plan: None)."""
    from ..params import parse_cli_args

    if key.startswith("-"):  # an unknown option before the key (known ones never get here)
        raise _no_such_option(key)
    tool = client.describe(key)
    for problem in client.warnings(key):
        print_err(f"toolrun: {problem}")
    values = _input_values(input_file)
    _refuse_option_words(tool, words)
    values.update(parse_cli_args(tool, words))
    if dry_run:
        plan = client.plan(key, values)
        if as_json:
            print_json(plan)
        else:
            sys.stdout.write(_plan_text(plan))
        return None
    return client.call(key, values)


def _print_result(result: CallResult, payload: dict[str, Any], as_json: bool, note: str = "") -> None:
    """The result verbatim (text) or its payload (--json); a failed command exits with its own code, `note`
    (a failed sandboxed call's) last on stderr."""
    from ..formatting import result_text

    ex = result.exec
    if as_json:
        print_json(payload)
        if note:
            print_err(note)
        raise typer.Exit(0 if result.ok else exit_code(ex.returncode if ex else 1, bool(ex and ex.timed_out)))
    if ex is not None and not result.ok:
        sys.stdout.write(ex.stdout)
        sys.stdout.flush()
        sys.stderr.write(ex.stderr if ex.stderr.endswith("\n") or not ex.stderr else ex.stderr + "\n")
        if note:
            print_err(note)
        raise typer.Exit(exit_code(ex.returncode, ex.timed_out))
    # A typed output (json, lines) is printed as indented JSON; anything else as the tool gave it.
    text = json.dumps(result.value, indent=2, ensure_ascii=False) + "\n" if result.typed else result_text(result.value)
    sys.stdout.write(text)
    if ex is None and text and not text.endswith("\n"):
        sys.stdout.write("\n")
    if ex is not None and ex.stderr:  # a command's warnings on success: stderr, as the command wrote them
        sys.stdout.flush()
        sys.stderr.write(ex.stderr if ex.stderr.endswith("\n") else ex.stderr + "\n")


_CALL_OPTIONS = ("--catalog", "--input", "--dry-run", "--json", "--audit", "--help")


def _input_values(input_file: str | None) -> dict[str, Any]:
    """The arguments of `--input FILE` (or `-`: stdin), a JSON object; {} without --input."""
    from ..errors import UsageError

    if input_file is None:
        return {}
    text = sys.stdin.read() if input_file == "-" else _read_text(input_file)
    try:
        loaded = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UsageError(f"--input: not valid JSON ({exc})") from None
    if not isinstance(loaded, dict):
        raise UsageError("--input: expected a JSON object of parameter name to value")
    return loaded


def _no_such_option(word: str) -> Exception:
    import difflib

    from ..errors import UsageError

    option = word.split("=", 1)[0]
    close = difflib.get_close_matches(option, _CALL_OPTIONS, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    return UsageError(f"no such option: {option} ({hint}tool params are written name=value)")


def _refuse_option_words(tool: Any, words: list[str]) -> None:
    """A word like `--path` among the arguments: say how a param is written (`path=/`), or that there is no such
    option."""
    from ..errors import UsageError

    for i, word in enumerate(words):
        if not word.startswith("-") or word == "-":
            continue
        name, eq, value = word.lstrip("-").partition("=")
        param = next((p for p in tool.params if p.name in (name, name.replace("-", "_"))), None)
        if param is None:
            raise _no_such_option(word)
        if not eq:
            following = words[i + 1] if i + 1 < len(words) else ""
            value = following if following and "=" not in following and not following.startswith("-") else "VALUE"
        raise UsageError(
            f"{word}: tool params are written name=value, without dashes: {shlex.join([f'{param.name}={value}'])}"
        )


def _job(client: Client, payload: dict[str, Any], no_wait: bool, as_json: bool) -> None:
    """The call became a job: its id (`--no-wait`), or its result once it ends."""
    from .jobcmds import finish

    if no_wait:
        if as_json:
            print_json(payload)
        else:
            sys.stdout.write(payload["job"] + "\n")
        return
    view = waiting(client, payload["job"])
    view.pop("_printed", None)
    finish(view, as_json)


class _Stopped(Exception):
    """SIGTERM or SIGHUP while `toolrun call` waits on its job."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def waiting(client: Client, job_id: str) -> dict[str, Any]:
    """Wait on the job, holding the request (docs/jobs.md): Ctrl-C, SIGTERM or SIGHUP withdraw it (the job is
    cancelled, and this says so); a kill that cannot be caught lets the hold lapse, which withdraws it too."""
    import signal

    from .jobcmds import describe_state, wait_for

    def stop(signum: int, _frame: Any) -> None:
        raise _Stopped(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        return wait_for(client, job_id, hold=True)
    except (KeyboardInterrupt, _Stopped) as exc:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        code = 128 + (exc.signum if isinstance(exc, _Stopped) else signal.SIGINT)
        try:
            view = client.job_action(job_id, "withdraw")
        except Exception as failed:  # the server is gone too: the hold lapses and withdraws it
            sys.stderr.write(f"toolrun: stopped waiting; job {job_id} could not be withdrawn now ({failed})\n")
            raise typer.Exit(code) from None
        sys.stderr.write(f"toolrun: stopped waiting: {describe_state(view)}\n")
        raise typer.Exit(code) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def error_object(key: str, exc: BaseException) -> dict[str, Any]:
    """`toolrun call --json` when the call fails before or instead of running: one JSON shape,
    `{key, ok: false, error, type}` (plus `problems` for a catalog that does not load)."""
    from ..errors import CatalogError, OutputInvalid, ToolFailed

    kind = type(exc.original).__name__ if isinstance(exc, ToolFailed) else type(exc).__name__
    message = str(exc.original) if isinstance(exc, ToolFailed) else str(exc)
    body: dict[str, Any] = {"key": key, "ok": False, "error": message, "type": kind}
    if isinstance(exc, CatalogError):
        body["problems"] = [str(p) for p in exc.problems]
    if isinstance(exc, OutputInvalid):
        body["output"] = exc.output
    return body


def _plan_text(plan: dict[str, Any]) -> str:
    """`--dry-run` as text: one `name: value` line each; the command last, verbatim."""
    lines: list[str] = []
    command = plan.get("command")
    for name, value in plan.items():
        if name == "command":
            continue
        if name == "env":
            shown = " ".join(value) + "  (names only; values are never shown)"
        elif name == "stdin" and value is None:
            shown = "(none: /dev/null)"
        elif name == "limits":
            shown = ", ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
        elif name == "timeout":
            shown = f"{value:g}s"
        elif name == "sandbox":
            from ..exec.sandbox import describe_text

            shown = describe_text(value)
        else:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"{name}: {shown}")
    text = "\n".join(lines) + "\n"
    if command is not None:
        body = command.rstrip("\n")
        text += f"command:\n{body}\n" if "\n" in body else f"command: {body}\n"
    return text


def _read_text(path: str) -> str:
    from ..errors import UsageError

    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--input {path}: {exc}") from None
