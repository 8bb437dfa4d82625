"""Regenerate the shell completion scripts in this directory from the Typer app.

Run `make completions` (or `.venv/bin/python completions/generate.py`); `--check` exits 1 and
names the stale files instead of writing them. tests/test_completions.py runs the check.

The scripts come from the app's own `--show-completion SHELL` option, run in-process with
`prog_name="toolrun"` and Typer's shell detection turned off, so the output never depends on
the shell, the terminal or the directory this runs from.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DETECTION_OFF = "_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"
FILES = {"bash": "toolrun.bash", "zsh": "_toolrun", "fish": "toolrun.fish"}


def script(shell: str) -> str:
    """The completion script for one shell, exactly as `toolrun --show-completion SHELL` prints it."""
    from typer.testing import CliRunner  # noqa: TID251 (a build script, not the core)

    from toolrun.cli import app

    # Read when Typer turns the app into a click command (inside invoke); restored afterwards, since
    # it also changes the --help text of the completion options.
    saved = os.environ.get(DETECTION_OFF)
    os.environ[DETECTION_OFF] = "1"
    try:
        result = CliRunner().invoke(app, ["--show-completion", shell], prog_name="toolrun")
    finally:
        if saved is None:
            del os.environ[DETECTION_OFF]
        else:
            os.environ[DETECTION_OFF] = saved
    if result.exit_code != 0 or not result.stdout.strip():
        raise RuntimeError(f"toolrun --show-completion {shell} failed ({result.exit_code}): {result.output}")
    return result.stdout


def scripts() -> dict[str, str]:
    """File name -> expected content, for every supported shell."""
    return {name: script(shell) for shell, name in FILES.items()}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, content in scripts().items():
        path = HERE / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == content:
            continue
        stale.append(name)
        if not check:
            path.write_text(content, encoding="utf-8")
            print(f"wrote completions/{name}")
    if check and stale:
        print("stale: " + ", ".join(f"completions/{n}" for n in stale) + " (run `make completions`)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
