"""The `toolrun` console script: completion requests for tool keys and params are answered here,
before the Typer app is imported (see complete.py); everything else goes to the CLI."""

from __future__ import annotations

import os
import sys


def main() -> None:
    from . import speedups
    from .errors import UsageError

    try:
        speedups.check()  # TOOLRUN_SPEEDUPS names only known speedups
    except UsageError as exc:
        print(f"toolrun: {exc}", file=sys.stderr)
        raise SystemExit(exc.exit_code) from None
    if "_TOOLRUN_COMPLETE" in os.environ:
        from .complete import fast

        fast()  # exits when the request was about tool keys or params
    from .cli import main as cli_main

    cli_main()
