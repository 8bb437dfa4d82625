"""Small things a first-time user notices: plain summaries in `list`, one JSON shape from `call --json`."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write_catalog
from helpers_servers import clean_env, toolrun_cli

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
