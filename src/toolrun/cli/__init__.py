"""The `toolrun` command: parse, ask the one client, print.

One module per command group: common (the Typer app, shared options, errors to exit codes),
fastcoerce, helpwords (help placeholders), init, browse (list, describe, search), call, examples
(test), validate (validate-catalog), keys, users, serve (serve, mcp-config), access (access explain,
keys test), jobs. Every command asks client.open_client for its client: client_local (the one
in-process ToolService) or, with --url, toolrun.cli.client_remote (the server's REST routes). Importing this
package registers every command on `app`.
"""

from __future__ import annotations

import os
import signal
import sys

from .common import app

# Importing a command module registers its commands; this order is the order of `toolrun --help`.
# isort: off
from . import init, browse, call, testrun, validate, serve, keys, users, accesscmds, jobcmds  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    sys.stderr.write(f"{code}\n")
    return 1


def main() -> None:
    """The console script: run the command, flush, and leave without interpreter teardown.

    Tearing down the modules a command imported (typer, jinja2, asyncio, the server stack) costs
    tens of milliseconds, a quarter of a `toolrun call`, and a worker thread of a timed-out fn tool
    would even hold the exit up. Everything a command writes is flushed first; an unexpected
    exception still ends the normal way, with its traceback.
    """
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        app()
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except KeyboardInterrupt:
        status = 130
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    guard = sys.modules.get("toolrun.exec.procguard")
    if guard is not None:  # a `toolrun call` ended normally: its watchdog kills nothing (procguard.stand_down)
        guard.stand_down()
    os._exit(status)
