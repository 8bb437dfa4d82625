"""Small things a first-time user notices: plain summaries in `list`, one JSON shape from `call --json`."""

from __future__ import annotations

import json
from pathlib import Path

from support.catalogs import write_catalog
from support.servers import clean_env, toolrun_cli

CATALOG = """\
group: demo
tools:
  - name: fmt
    description: |
      Print the **disk** usage of a `path`, see [the docs](https://example.com).

      More *detail* here.
    exec: echo {{ n }}
    params:
      - {name: n, type: int}
"""


def test_list_shows_the_summary_as_plain_text(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, CATALOG)
    done = toolrun_cli("list", "-c", str(path), env=clean_env(tmp_path / "home"))
    assert done.returncode == 0
    assert done.stdout.splitlines()[1].split(None, 2)[2].rstrip() == "Print the disk usage of a path, see the docs."
    as_json = toolrun_cli("list", "-c", str(path), "--json", env=clean_env(tmp_path / "home"))
    assert json.loads(as_json.stdout)[0]["description"].startswith("Print the **disk**")  # JSON keeps the source


def test_call_json_prints_one_error_object_when_the_call_cannot_run(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, CATALOG)
    env = clean_env(tmp_path / "home")
    bad = toolrun_cli("call", "demo.fmt", "n=x", "--json", "-c", str(path), env=env)
    assert bad.returncode == 2
    assert json.loads(bad.stdout) == {
        "key": "demo.fmt",
        "ok": False,
        "error": "parameter 'n' expects int, got str 'x'",
        "type": "ParamError",
    }
    warning, error = bad.stderr.splitlines()
    assert error == "toolrun: parameter 'n' expects int, got str 'x'"
    assert warning.endswith(
        "demo.fmt: warning: param 'n' (int) starts a word before `--`: a negative value like -5 "
        "is read as an option; put `--` before it or set `min: 0` [negative-number]"
    )
    unknown = toolrun_cli("call", "demo.nope", "--json", "-c", str(path), env=env)
    assert unknown.returncode == 2
    body = json.loads(unknown.stdout)
    assert (body["ok"], body["type"], body["error"]) == (False, "NotFound", "no tool 'demo.nope'")
    broken = write_catalog(tmp_path, "group: g\ntools:\n  - {name: t}\n", "broken.yaml")
    failed = toolrun_cli("call", "g.t", "--json", "-c", str(broken), env=env)
    body = json.loads(failed.stdout)
    assert failed.returncode == 2 and body["type"] == "CatalogError" and body["problems"]
    ok = toolrun_cli("call", "demo.fmt", "n=3", "--json", "-c", str(path), env=env)
    assert ok.returncode == 0 and json.loads(ok.stdout)["stdout"] == "3\n"


def test_a_param_written_as_an_option_gets_the_name_equals_value_form(tmp_path: Path) -> None:
    text = "group: ops\ntools:\n  - name: du\n    exec: echo {{ max_depth }} -- {{ path | quote }}\n"
    text += "    params: [{name: path, type: str}, {name: max_depth, type: int, default: 1, min: 0}]\n"
    path = write_catalog(tmp_path, text)
    env = clean_env(tmp_path / "home")
    for words, hint in [
        (["--path", "/"], "--path: tool params are written name=value, without dashes: path=/"),
        (["--path=/tmp"], "--path=/tmp: tool params are written name=value, without dashes: path=/tmp"),
        (["--path", "my dir"], "--path: tool params are written name=value, without dashes: 'path=my dir'"),
        (
            ["path=/", "--max-depth", "2"],
            "--max-depth: tool params are written name=value, without dashes: max_depth=2",
        ),
        (["--jsn", "path=/"], "no such option: --jsn (did you mean --json? tool params are written name=value)"),
    ]:
        done = toolrun_cli("call", "ops.du", *words, "-c", str(path), env=env)
        assert (done.returncode, done.stdout) == (2, ""), words
        assert done.stderr == f"toolrun: {hint}\n", words
    before = toolrun_cli("call", "--jsn", "ops.du", "path=/", "-c", str(path), env=env)
    assert (before.returncode, before.stderr) == (
        2,
        "toolrun: no such option: --jsn (did you mean --json? tool params are written name=value)\n",
    )
    works = toolrun_cli("call", "ops.du", "path=/dev/null", "--json", "-c", str(path), env=env)
    assert works.returncode == 0 and json.loads(works.stdout)["ok"] is True


def test_help_placeholders_read_as_words() -> None:
    import re

    import typer.main

    from toolrun.cli import app

    command = typer.main.get_command(app)
    helps: dict[str, str] = {}

    def walk(group: object, prefix: str) -> None:
        for name, sub in getattr(group, "commands", {}).items():
            if getattr(sub, "commands", None):
                walk(sub, f"{prefix}{name} ")
            else:
                helps[prefix + name] = typer.testing.CliRunner().invoke(app, [*f"{prefix}{name}".split(), "-h"]).stdout

    import typer.testing

    walk(command, "")
    assert len(helps) > 15
    for name, text in helps.items():
        assert not re.search(r"<[a-z\[\]]+>|\{[a-z_]+\}", text), f"toolrun {name} --help:\n{text}"
    assert "Usage: toolrun call [OPTIONS] KEY [ARGS]..." in helps["call"]
    assert "-c, --catalog FILE" in helps["call"] and "-i, --input FILE" in helps["call"]
    assert "Usage: toolrun validate-catalog [OPTIONS] [FILES]..." in helps["validate-catalog"]
    assert (
        "--port INTEGER" in helps["serve"]
        and "Usage: toolrun access explain [OPTIONS] USER TOOL" in helps["access explain"]
    )


def test_counts_agree_with_their_number() -> None:
    from toolrun.errors import Overloaded, RateLimited, RequestTimeout
    from toolrun.words import plural, seconds

    assert [plural(n, "tool") for n in (0, 1, 2)] == ["0 tools", "1 tool", "2 tools"]
    assert plural(1, "match") == "1 match" and plural(3, "match") == "3 matches"
    assert (seconds(1), seconds(0.2), seconds(30)) == ("1 second", "0.2 seconds", "30 seconds")
    assert str(RateLimited("t.x", 1)).endswith("retry after 1 second")
    assert str(Overloaded(1)) == "server busy: 1 tool process already running; retry shortly"
    assert str(RequestTimeout(1)) == "request body not received within 1 second"
