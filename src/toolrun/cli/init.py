"""`toolrun init`: a starter catalog with one tool of each kind, ready for validate-catalog and test."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import app, print_err

SCHEMA_FILE = "catalog.schema.json"

STARTER = """\
# yaml-language-server: $schema={schema}
# A toolrun catalog: edit it, then `toolrun validate-catalog {name}` and `toolrun test {name}`.
# In CI, `toolrun validate-catalog --strict {name}` also fails on warnings (an unquoted value...);
# a tool that means one lists its name (shown in brackets) in `allow_warnings:`.
$schema: {schema}
version: 1
group: starter                  # keys are <group>.<name>: starter.disk_usage
tools:
  # exec: a shell command (a template); pass every caller-supplied value through `| quote`.
  - name: disk_usage
    description: Report the disk usage of a path.
    read_only: true             # a hint for clients; `toolrun test` skips examples of tools that change things
    exec: du -sh -- {{{{ path | quote }}}}
    timeout: 10
    params:
      - name: path
        type: str
        default: .
        description: The file or directory to measure.
    examples:                   # `toolrun test` runs these
      - name: here
        args: {{path: .}}
        expect: {{exit_code: 0, stdout_matches: "\\\\s\\\\.$"}}
      - name: no such path
        args: {{path: /no/such/path}}
        expect: {{exit_code: 1, stderr_matches: "No such file"}}

  # curl: arguments to `curl -sS -o -` (a template too).
  - name: http_headers
    description: Fetch the HTTP headers of a URL (a HEAD request).
    read_only: true
    open_world: true            # it reaches beyond this host
    curl: -I -- {{{{ url | quote }}}}
    allow_warnings: [curl-url-host]   # the caller picks the host: serve this to trusted callers only
    timeout: 15
    params:
      - name: url
        type: str
        pattern: "https?://.+"
        example: https://example.com

  # fn: a Python function, module:function (the module next to this file, or importable).
  - name: greet
    description: Say hello; a Python function with typed parameters.
    read_only: true
    fn: {module}:greet
    examples:
      - args: {{name: Ada}}
        expect: {{stdout: "Hello, Ada!"}}
"""

FUNCTIONS = '''\
"""Python tools for the starter catalog (fn: {module}:greet)."""


def greet(name: str = "world", excited: bool = True) -> str:
    """Say hello to `name`."""
    return f"Hello, {{name}}{{'!' if excited else '.'}}"
'''


@app.command("init")
def init(
    path: Annotated[str, typer.Argument(help="The catalog file to write.")] = "tools.yaml",
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that exist.")] = False,
) -> None:
    """Write a starter catalog (one exec, one curl and one fn tool, with examples) and its JSON Schema."""
    from ..catalog.schema import catalog_json_schema_text

    target = Path(path)
    module = f"{target.stem.replace('-', '_').replace('.', '_')}_fns"
    files = {
        target: STARTER.format(schema=SCHEMA_FILE, name=target.name, module=module),
        target.parent / f"{module}.py": FUNCTIONS.format(module=module),
        target.parent / SCHEMA_FILE: catalog_json_schema_text(),
    }
    existing = [str(f) for f in files if f.exists()]
    if existing and not force:
        verb = "exists" if len(existing) == 1 else "exist"
        print_err(f"toolrun: {', '.join(existing)} already {verb}: pass --force to overwrite")
        raise typer.Exit(2)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        for file, text in files.items():
            file.write_text(text, encoding="utf-8")
    except OSError as exc:
        print_err(f"toolrun: cannot write {exc.filename}: {exc.strerror}")
        raise typer.Exit(1) from None
    for file in files:
        sys.stdout.write(f"wrote {file}\n")
    print_err(f"next: toolrun validate-catalog {target} && toolrun test {target} && toolrun list -c {target}")
    print_err(f"in CI: toolrun validate-catalog --strict {target} (warnings fail too) && toolrun test {target}")
