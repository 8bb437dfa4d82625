"""The CLI door: list, describe, call (coercion, results, exit codes, --dry-run), catalog discovery, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.catalogs import EXAMPLES, write_catalog
from toolrun.cli import app

CATALOG = """
group: ops
tools:
  - name: echo
    description: |
      Print a message.

      Second paragraph with **markdown**.
    public: true
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
        description: The message.
        example: hello
  - name: show
    description: Echo every validated parameter back as JSON (stdin mode).
    stdin: true
    exec: cat
    params:
      - {name: n, type: int}
      - {name: ratio, type: float, default: 0.5}
      - {name: flag, type: bool, default: false}
      - {name: items, type: list, required: false}
      - {name: opts, type: dict, required: false}
      - {name: text, type: str, required: false}
  - name: fail
    groups: [sre]
    exec: printf 'partial out'; printf 'bad thing\\n' >&2; exit 3
  - name: slow
    exec: sleep 5
    timeout: 0.2
  - name: touch
    description: Create a file.
    exec: touch -- {{ path | quote }}
    env: {SECRET_TOKEN: hunter2}
    limits: {cpu: 5, memory: 256M}
    timeout: 9
    params:
      - {name: path, type: str}
  - name: post
    group: web
    description: Send the params on stdin.
    stdin: true
    exec: cat >/dev/null; echo posted {{ url | quote }}
    params:
      - {name: url, type: str}
      - {name: body, type: dict, required: false}
  - name: add
    group: py
    fn: cli_fns_add:add
"""
FNS = '''
def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b
'''


@pytest.fixture()
def catalog(tmp_path: Path) -> Path:
    (tmp_path / "cli_fns_add.py").write_text(FNS, encoding="utf-8")
    return write_catalog(tmp_path, CATALOG)


def run(catalog: Path, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args, "-c", str(catalog)], input=input)
    return result.exit_code, result.stdout, result.stderr


# -- list -------------------------------------------------------------------------------------


def test_list_prints_a_table_of_keys_groups_and_summaries(catalog: Path) -> None:
    code, out, err = run(catalog, "list")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == ["key", "groups", "description"]
    keys = [line.split()[0] for line in lines[1:] if line.strip()]
    assert keys == ["ops.echo", "ops.fail", "ops.show", "ops.slow", "ops.touch", "py.add", "web.post"]
    echo = next(line for line in lines if line.startswith("ops.echo"))
    assert "ops, public" in echo and "Print a message." in echo and "Second paragraph" not in out


def test_list_json_prints_the_spec_entries_sorted_by_key(catalog: Path) -> None:
    code, out, _ = run(catalog, "list", "--json")
    assert code == 0
    entries = json.loads(out)
    assert [e["key"] for e in entries] == sorted(e["key"] for e in entries)
    assert all(list(e) == ["key", "groups", "params", "return_type", "description", "example"] for e in entries)
    add = next(e for e in entries if e["key"] == "py.add")
    assert add["return_type"] == "int" and add["example"] == "py.add(a=1)"


def test_list_group_shows_only_tools_tagged_with_the_group(catalog: Path) -> None:
    code, out, _ = run(catalog, "list", "--group", "sre", "--json")
    assert code == 0
    assert [e["key"] for e in json.loads(out)] == ["ops.fail"]
    code, out, err = run(catalog, "list", "--group", "nobody")
    assert code == 0 and "no tools in group 'nobody'" in err


def test_list_escapes_rich_markup_in_catalog_text(tmp_path: Path) -> None:
    path = write_catalog(
        tmp_path, "group: ops\ntools:\n  - name: a\n    description: '[bold red]x[/] done'\n    exec: 'true'\n"
    )
    code, out, _ = run(path, "list")
    assert code == 0 and "[bold red]x[/] done" in out


# -- describe ---------------------------------------------------------------------------------


def test_describe_shows_signature_params_return_type_description_and_example(catalog: Path) -> None:
    code, out, err = run(catalog, "describe", "ops.show")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (  # the signature of MCP's describe_tools and search, then the return type
        "ops.show(n: int, ratio: float = 0.5, flag: bool = false, items?: list, opts?: dict, text?: str)"
        " -> str | (int, str, str)"
    )
    # The exec return type in words, under it: a new user need not guess what the tuple is.
    at = lines.index("returns: str | (int, str, str)")
    assert " ".join(line.strip() for line in lines[at + 1 : at + 3]) == (
        "the command's standard output when it exits with code 0; otherwise the tuple (exit code, stdout, "
        "stderr), where exit code -1 means the timeout stopped it"
    )
    assert "Echo every validated parameter back as JSON" in out
    params = lines[lines.index("params:") + 1 :]
    for line in (
        "  n: int, required",
        "  ratio: float, default 0.5",
        "  flag: bool, default false",
        "  items: list, optional",
    ):
        assert line in params
    assert "example: ops.show(n=1)" in out


CONSTRAINED = """
group: ops
tools:
  - name: git_log
    title: Recent commits
    read_only: true
    idempotent: true
    description: Show the last commits of a repository.
    exec: git -C {{ repo | quote }} log --oneline -n {{ n }} {% if level %}{{ level | quote }}{% endif %}
    params:
      - {name: repo, type: str, description: Path of the repository., pattern: "/[A-Za-z0-9_./-]+"}
      - {name: n, type: int, default: 5, min: 1, max: 100, description: How many commits.}
      - {name: level, type: str, enum: [debug, info], required: false}
      - {name: name, type: str, min: 2, required: false}
      - {name: tags, type: list, max: 3, required: false}
  - name: add
    fn: cli_fns_add:add
"""


def test_describe_shows_each_params_constraints_and_the_tools_hints_as_mcp_and_the_ui_do(tmp_path: Path) -> None:
    (tmp_path / "cli_fns_add.py").write_text(FNS, encoding="utf-8")
    catalog = write_catalog(tmp_path, CONSTRAINED)
    code, out, err = run(catalog, "describe", "ops.git_log")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == (
        "ops.git_log(repo: str [~/[A-Za-z0-9_./-]+], n: int = 5 [1..100], level?: str [debug|info], "
        "name?: str [len 2..], tags?: list [len ..3]) -> str | (int, str, str)"
    )
    assert "title: Recent commits" in lines and "hints: read-only, idempotent" in lines
    end = next(i for i, line in enumerate(lines) if line.startswith("example: ops.git_log("))
    params = lines[lines.index("params:") + 1 : end - 1]
    assert params == [
        "  repo: str, required",
        "    Path of the repository.",
        "    must match: /[A-Za-z0-9_./-]+",
        "  n: int, default 5",
        "    How many commits.",
        "    between 1 and 100",
        "  level: str, optional",
        "    one of: debug, info",
        "  name: str, optional",
        "    at least 2 characters",
        "  tags: list, optional",
        "    at most 3 items",
    ]
    # --json is the tool entry, which carries the same constraints and hints.
    code, out, _ = run(catalog, "describe", "ops.git_log", "--json")
    entry = json.loads(out)
    assert code == 0
    assert entry["annotations"] == {"title": "Recent commits", "read_only": True, "idempotent": True}
    assert [{k: p.get(k) for k in ("pattern", "enum", "min", "max") if k in p} for p in entry["params"]] == [
        {"pattern": "/[A-Za-z0-9_./-]+"},
        {"min": 1, "max": 100},
        {"enum": ["debug", "info"]},
        {"min": 2},
        {"max": 3},
    ]
    # An fn tool's declared return type needs no words; no hints, no hints line.
    code, out, _ = run(catalog, "describe", "ops.add")
    assert code == 0 and "returns: int" in out.splitlines()
    assert "hints:" not in out and "the command's standard output" not in out


def test_describe_renders_the_description_as_markdown(catalog: Path) -> None:
    code, out, _ = run(catalog, "describe", "ops.echo")
    assert code == 0
    assert "Second paragraph with markdown." in out and "**" not in out
    assert "example: ops.echo(msg='hello')" in out


def test_describe_json_is_the_spec_entry(catalog: Path) -> None:
    code, out, _ = run(catalog, "describe", "ops.echo", "--json")
    assert code == 0
    assert json.loads(out) == {
        "key": "ops.echo",
        "groups": ["ops", "public"],
        "params": [
            {
                "name": "msg",
                "type": "str",
                "required": True,
                "default": None,
                "description": "The message.",
                "example": "hello",
            }
        ],
        "return_type": "str | (int, str, str)",
        "description": "Print a message.\n\nSecond paragraph with **markdown**.\n",
        "example": "ops.echo(msg='hello')",
    }


def test_describe_an_unknown_key_suggests_close_keys(catalog: Path) -> None:
    code, out, err = run(catalog, "describe", "ops.ecko")
    assert code == 2
    assert out == "" and err.startswith("toolrun: no tool 'ops.ecko'; did you mean ops.echo")


# -- call ---------------------------------------------------------------------------------------


def test_call_prints_the_result_verbatim(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "ops.echo", "msg=  two  spaces; $HOME `x` 'q'")
    assert code == 0, err
    assert out == "  two  spaces; $HOME `x` 'q'"
    assert err == ""


def test_call_coerces_text_arguments_to_the_declared_types(catalog: Path) -> None:
    words = ["n=42", "ratio=2", "flag=yes", "items=a", "items=b c", 'opts={"k": [1, 2]}', "text=007"]
    code, out, err = run(catalog, "call", "ops.show", *words)
    assert code == 0, err
    assert json.loads(out) == {
        "n": 42,
        "ratio": 2.0,
        "flag": True,
        "items": ["a", "b c"],
        "opts": {"k": [1, 2]},
        "text": "007",
    }


def test_call_reads_raw_json_values_with_colon_equals(catalog: Path) -> None:
    code, out, _ = run(catalog, "call", "ops.show", "n:=7", 'items:=[1, "x", null]', "flag:=true", "text:=12")
    assert code == 0
    values = json.loads(out)
    assert (values["n"], values["items"], values["flag"], values["text"]) == (7, [1, "x", None], True, "12")


def test_call_reads_arguments_from_a_json_file_and_words_override_it(catalog: Path, tmp_path: Path) -> None:
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"n": 1, "text": "from file", "opts": {"a": 1}}))
    code, out, _ = run(catalog, "call", "ops.show", "--input", str(args), "text=from word")
    assert code == 0
    values = json.loads(out)
    assert (values["n"], values["text"], values["opts"]) == (1, "from word", {"a": 1})


def test_call_reads_arguments_from_stdin_with_input_dash(catalog: Path) -> None:
    code, out, _ = run(catalog, "call", "ops.echo", "--input", "-", input='{"msg": "from stdin"}')
    assert code == 0 and out == "from stdin"


def test_call_input_must_be_a_json_object(catalog: Path) -> None:
    code, _, err = run(catalog, "call", "ops.echo", "--input", "-", input="[1, 2]")
    assert code == 2 and "expected a JSON object" in err
    code, _, err = run(catalog, "call", "ops.echo", "--input", "-", input="{nope")
    assert code == 2 and "--input: not valid JSON" in err


def test_a_failing_command_splits_its_streams_and_exits_with_its_code(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "ops.fail")
    assert code == 3
    assert out == "partial out"
    assert err == "bad thing\n"


def test_a_timeout_exits_124_with_the_timeout_message(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "ops.slow")
    assert code == 124
    assert out == "" and err == "timeout after 0.2s\n"


def test_call_json_prints_one_structured_result(catalog: Path) -> None:
    code, out, _ = run(catalog, "call", "ops.fail", "--json")
    assert code == 3
    result = json.loads(out)
    assert result["key"] == "ops.fail" and result["ok"] is False
    assert result["result"] == {"returncode": 3, "stdout": "partial out", "stderr": "bad thing\n"}
    assert (result["returncode"], result["timed_out"], result["truncated"]) == (3, False, False)
    code, out, _ = run(catalog, "call", "ops.echo", "msg=hi", "--json")
    assert code == 0 and json.loads(out)["result"] == "hi"


def test_an_fn_tool_result_prints_as_json_text(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "py.add", "a=40")
    assert code == 0, err
    assert out == "42\n"
    code, out, _ = run(catalog, "call", "py.add", "a=1", "b:=2", "--json")
    assert code == 0 and json.loads(out)["result"] == 3


def test_call_an_unknown_key_suggests_close_keys_and_exits_2(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "ops.eco", "msg=x")
    assert code == 2
    assert out == "" and "no tool 'ops.eco'; did you mean ops.echo" in err


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("n=abc", "parameter 'n' expects int"),
        ("ratio=fast", "parameter 'ratio' expects float"),
        ("flag=maybe", "parameter 'flag' expects bool"),
        ("opts=not-json", "parameter 'opts' expects dict"),
        ("nope=1", "unknown parameter 'nope'"),
        ("n", "is not of the form name=value"),
    ],
)
def test_a_bad_argument_names_the_param_and_type_and_exits_2(catalog: Path, word: str, expected: str) -> None:
    code, out, err = (
        run(catalog, "call", "ops.show", "n=1", word) if word != "n" else run(catalog, "call", "ops.show", "n")
    )
    assert code == 2
    assert out == "" and expected in err and "Traceback" not in err


def test_a_missing_required_param_is_named(catalog: Path) -> None:
    code, _, err = run(catalog, "call", "ops.show")
    assert code == 2 and "missing required parameter 'n' (int)" in err


def test_dry_run_shows_the_plan_and_runs_nothing(catalog: Path, tmp_path: Path) -> None:
    target = tmp_path / "created-by-the-tool"
    code, out, err = run(catalog, "call", "ops.touch", f"path={target}", "--dry-run")
    assert code == 0, err
    assert not target.exists()
    lines = out.splitlines()
    assert f"command: touch -- {target}" in lines
    assert "timeout: 9s" in lines
    assert "limits: cpu=5, memory=268435456, output=10485760" in lines
    assert "stdin: (none: /dev/null)" in lines
    assert any(line.startswith("cwd: ") for line in lines)
    env_line = next(line for line in lines if line.startswith("env: "))
    assert "SECRET_TOKEN" in env_line and "PATH" in env_line
    assert "hunter2" not in out


def test_dry_run_shows_the_stdin_json_of_a_stdin_tool(catalog: Path) -> None:
    code, out, _ = run(catalog, "call", "web.post", "url=http://x", 'body:={"a": 1}', "--dry-run", "--json")
    assert code == 0
    plan = json.loads(out)
    assert plan["command"] == "cat >/dev/null; echo posted http://x"
    assert json.loads(plan["stdin"]) == {"url": "http://x", "body": {"a": 1}}
    assert isinstance(plan["env"], list) and all(isinstance(name, str) for name in plan["env"])


def test_dry_run_still_validates_params(catalog: Path) -> None:
    code, out, err = run(catalog, "call", "ops.touch", "--dry-run")
    assert code == 2 and out == "" and "missing required parameter 'path'" in err


# -- where the catalog comes from --------------------------------------------------------------


def _catalog_named(directory: Path, group: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return write_catalog(directory, f"group: {group}\ntools:\n  - name: t\n    exec: 'true'\n")


def _keys(*args: str) -> list[str]:
    result = CliRunner().invoke(app, ["list", "--json", *args])
    assert result.exit_code == 0, result.output
    return [e["key"] for e in json.loads(result.stdout)]


def test_catalog_discovery_order_is_flag_env_config_then_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _isolated_home: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    _catalog_named(tmp_path, "cwd")
    assert _keys() == ["cwd.t"]
    config = _isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config_catalog = _catalog_named(tmp_path / "c", "config")
    config.write_text(f"catalog = [{json.dumps(str(config_catalog))}]\n")
    assert _keys() == ["config.t"]
    env_a, env_b = _catalog_named(tmp_path / "ea", "enva"), _catalog_named(tmp_path / "eb", "envb")
    monkeypatch.setenv("SVC_CATALOG", f"{env_a}{os.pathsep}{env_b}")
    assert _keys() == ["enva.t", "envb.t"]
    flag_a, flag_b = _catalog_named(tmp_path / "fa", "flaga"), _catalog_named(tmp_path / "fb", "flagb")
    assert _keys("--catalog", str(flag_a), "-c", str(flag_b)) == ["flaga.t", "flagb.t"]


def test_no_catalog_anywhere_explains_where_to_put_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == 2
    assert "no catalog: pass --catalog FILE, set SVC_CATALOG" in result.stderr


def test_a_broken_catalog_prints_problem_lines_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_catalog(tmp_path, "group: ops\ntools:\n  - name: a\n    exce: 'true'\n  - name: b\n    exec: echo {{ x }}\n")
    result = CliRunner().invoke(app, ["call", "ops.a"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        "tools.yaml:4:5: ops.a: unknown field 'exce' (did you mean 'exec'?)\n"
        "tools.yaml:6:19: ops.b: template uses 'x', which is not a declared param\n"
    )


def test_a_bad_config_file_is_a_one_line_error(tmp_path: Path, _isolated_home: Path) -> None:
    config = _isolated_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("catalog = [\n")
    result = CliRunner().invoke(app, ["list"])
    assert result.exit_code == 2
    assert result.stderr.startswith("toolrun: config file ") and "Traceback" not in result.stderr


# -- the real console script --------------------------------------------------------------------


def test_the_console_script_runs_disk_usage_on_the_example_catalog(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 50_000)
    toolrun = Path(sys.executable).parent / "toolrun"
    proc = subprocess.run(
        [str(toolrun), "call", "ops.disk_usage", f"path={tmp_path}", "-c", str(EXAMPLES)],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr
    size, path = proc.stdout.rstrip("\n").split("\t")
    assert path == str(tmp_path) and size[-1] in "KM"
    assert proc.stderr == ""


def test_a_stdin_tool_that_exits_without_reading_does_not_kill_toolrun_call(tmp_path: Path) -> None:
    """The console script restores SIGPIPE's default action; writing a payload nobody reads must still be EPIPE."""
    catalog = write_catalog(
        tmp_path,
        "group: t\ntools:\n  - name: ignore\n    exec: printf done\n    stdin: true\n"
        "    params:\n      - {name: data, type: str}\n",
    )
    payload = tmp_path / "in.json"
    payload.write_text(json.dumps({"data": "x" * 3_000_000}), encoding="utf-8")
    toolrun = Path(sys.executable).parent / "toolrun"
    env = {**os.environ, "TOOLRUN_HOME": str(tmp_path / "home")}
    for _ in range(3):  # the child usually exits before the 3 MB are written; each run is a chance
        done = subprocess.run(
            [str(toolrun), "call", "-c", str(catalog), "t.ignore", "--input", str(payload)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert (done.returncode, done.stdout) == (0, "done"), done.stderr


def test_a_successful_command_keeps_its_warnings_on_stderr(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "group: ops\ntools:\n  - name: warn\n    exec: echo result; echo low disk >&2\n")
    code, out, err = run(catalog, "call", "ops.warn")
    assert code == 0
    assert out == "result\n"
    assert err == "low disk\n"
