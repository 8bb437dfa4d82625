"""The `toolrun` console script: completion requests for tool keys and params are answered here,
before the Typer app is imported (see complete.py); everything else goes to the CLI."""

from __future__ import annotations

import os


def main() -> None:
    if "_TOOLRUN_COMPLETE" in os.environ:
        from .complete import fast

        fast()  # exits when the request was about tool keys or params
    from .cli import main as cli_main

    cli_main()
