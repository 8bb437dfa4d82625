"""Catalog traps that used to validate clean: curl options that fight the shorthand, a command that
breaks the YAML, warnings nobody sees at start, deliberate warnings, examples that break their own
params' rules. (validate-catalog's transcripts of each are golden files: curl_options, yaml_command,
allow_warnings, shell_shapes, generated_examples.)"""

from __future__ import annotations

import json
import typing
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.servers import ToolrunServer, clean_env, toolrun_cli, wait_until
from toolrun import catalog as catalog_mod
from toolrun.catalog.schema import ToolDef
from toolrun.errors import WARNING_CODES

LOUD = """\
group: ops
tools:
  - name: greet
    exec: echo hi {{ who }}
    params: [{name: who, type: str}]
  - name: split
    description: words is split into words on purpose
    exec: printf '%s\\n' {{ words }}
    allow_warnings: [unquoted-param]
    params: [{name: words, type: str}]
"""


def test_every_warning_name_is_in_the_schema_and_documented() -> None:
    annotation = ToolDef.model_fields["allow_warnings"].annotation
    listed = typing.get_args(annotation)[0]  # list[WarningCode] | None -> list[WarningCode]
    names = typing.get_args(typing.get_args(listed)[0])
    assert sorted(names) == sorted(WARNING_CODES)
    docs = (Path(__file__).parent.parent / "docs" / "catalog.md").read_text(encoding="utf-8")
    assert [name for name in WARNING_CODES if f"`{name}`" not in docs] == []


def test_an_acknowledged_warning_is_gone_and_the_others_stay(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, LOUD)
    _, problems = catalog_mod.check([path])
    assert [(p.key, p.code) for p in problems] == [("ops.greet", "unquoted-param")]


def test_serve_prints_the_catalog_warnings_at_start_and_after_a_reload(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, LOUD)
    with ToolrunServer(tmp_path, path, {"SVC_RELOAD_INTERVAL": "0.2"}) as server:
        server.start()
        log = wait_until(lambda: server.log() if "[unquoted-param]" in server.log() else "", 10, "the warning")
        lines = [line for line in log.splitlines() if "ops." in line and "warning" in line]
        assert len(lines) == 1
        assert "ops.greet: warning: param 'who' (str) is interpolated without `| quote`" in lines[0]
        assert "allow_warnings" in log and "validate-catalog --strict" in log
        path.write_text(LOUD + "  - {name: later, exec: 'echo {{ x }}', params: [{name: x, type: str}]}\n")
        wait_until(lambda: "ops.later: warning:" in server.log(), 10, "the reloaded catalog's warning")


def test_serve_stdio_prints_the_catalog_warnings_on_stderr(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = write_catalog(tmp_path, LOUD)
    done = subprocess.run(
        [sys.executable, "-m", "toolrun", "serve", "--stdio", "-c", str(path)],
        env=clean_env(tmp_path / "home"),
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == ""  # stdout is the protocol
    assert "ops.greet: warning: param 'who'" in done.stderr and "ops.split" not in done.stderr


def test_call_prints_the_warnings_of_the_tool_it_calls(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, LOUD)
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("call", "ops.greet", "who=x; echo INJECTED", "-c", str(path), env=env)
    assert done.returncode == 0
    assert done.stdout == "hi x\nINJECTED\n"  # what the warning is about
    assert done.stderr.startswith("toolrun: ") and "ops.greet: warning: param 'who'" in done.stderr
    quiet = toolrun_cli("call", "ops.split", "words=a b", "-c", str(path), env=env)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "a\nb\n", "")


def test_the_curl_shorthand_prints_the_body_despite_dash_o(tmp_path: Path) -> None:
    """What the `-o` warning is about: the tool does not do what it says."""
    require_binary("curl")
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"THE BODY")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        text = "group: web\ntools:\n  - name: code\n    curl: -o /dev/null -w '%{http_code}' -- {{ url | quote }}\n"
        text += "    params: [{name: url, type: str}]\n"
        path = write_catalog(tmp_path, text)
        env = clean_env(tmp_path / "home")
        url = f"http://127.0.0.1:{server.server_port}/"
        done = toolrun_cli("call", "web.code", f"url={url}", "-c", str(path), env=env)
        assert done.stdout == "THE BODY200"
        assert "`-o` in a `curl:` value" in done.stderr
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("param", "example"),
    [
        ("{name: file, type: str, pattern: '/tmp/[a-z0-9_]+\\.log'}", "file='/tmp/a.log'"),
        ("{name: repo, type: str, pattern: '~/[A-Za-z0-9_./-]+'}", "repo='~/a'"),
        ("{name: unit, type: str, pattern: '[a-z0-9@._-]+'}", "unit='text'"),
        ("{name: n, type: int, min: 5, max: 100}", "n=5"),
        ("{name: n, type: int, max: -3}", "n=-3"),
        ("{name: ratio, type: float, min: 0.25}", "ratio=0.25"),
        ("{name: mode, type: str, enum: [fast, slow]}", "mode='fast'"),
        ("{name: code, type: str, min: 6}", "code='textte'"),
        ("{name: tags, type: list, pattern: '[0-9]+', min: 2}", "tags=['0', '0']"),
        ("{name: word, type: str, pattern: '\\p{Greek}+'}", ""),
    ],
)
def test_a_generated_example_obeys_the_param_rules_or_is_left_out(param: str, example: str, tmp_path: Path) -> None:
    text = f"group: g\ntools:\n  - name: t\n    stdin: true\n    exec: cat\n    params:\n      - {param}\n"
    path = write_catalog(tmp_path, text)
    catalog, problems = catalog_mod.check([path])
    tool = catalog.tools["g.t"]
    assert tool.example == f"g.t({example})"
    assert [p.code for p in problems] == ([] if example else ["example-left-out"])
    if example:  # the example call is a call the tool accepts
        import ast

        from toolrun import params

        call = ast.parse(tool.example, mode="eval").body
        assert isinstance(call, ast.Call)
        params.validate(tool, {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg})


def test_validate_catalog_without_a_file_checks_the_catalog_the_other_commands_use(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    work = tmp_path / "w"
    work.mkdir()
    import subprocess
    import sys

    def run(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "toolrun", "validate-catalog", *args],
            env={**env, **(extra or {})},
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )

    none = run()
    assert none.returncode == 2 and "no catalog: pass FILE, set SVC_CATALOG" in none.stderr
    write_catalog(work, LOUD)
    here = run()
    assert here.returncode == 0 and here.stdout.startswith("tools.yaml:4:")
    assert here.stderr == "valid: 2 tools, 0 errors, 1 warning\n"
    other = write_catalog(tmp_path, "group: g\ntools:\n  - {name: t, exec: echo}\n", "other.yaml")
    chosen = run(extra={"SVC_CATALOG": str(other)})
    assert (chosen.returncode, chosen.stderr) == (0, "valid: 1 tool, 0 errors, 0 warnings\n")
    assert json.loads(run("--format", "json").stdout)["tools"] == 2


def test_init_shows_validate_catalog_strict_for_ci(tmp_path: Path) -> None:
    done = toolrun_cli("init", str(tmp_path / "tools.yaml"), env=clean_env(tmp_path / "home"))
    assert done.returncode == 0
    assert "validate-catalog --strict" in (tmp_path / "tools.yaml").read_text()
    assert f"in CI: toolrun validate-catalog --strict {tmp_path / 'tools.yaml'}" in done.stderr


def test_a_yaml_error_names_the_tool_whatever_the_order_of_its_fields(tmp_path: Path) -> None:
    text = """\
group: g
tools:
  - name: first
    exec: "true"
  - params:
      - name: file
        type: str
        description: the file
    name: second
    exec: grep -c foo: {{ file | quote }}
  - name: third
    exec: echo {{ x: y }}
"""
    _, problems = catalog_mod.check([write_catalog(tmp_path, text)])
    errors = [(p.line, p.key, p.message.split(";")[0]) for p in problems if p.severity == "error"]
    assert errors[:2] == [
        (10, "g.second", "YAML syntax error: mapping values are not allowed in this context"),
        (12, "g.third", "YAML syntax error: mapping values are not allowed in this context"),
    ]


def test_a_json_style_escape_in_a_quoted_value_gets_its_own_hint_not_quote_it(tmp_path: Path) -> None:
    """A description copied from JSON (an emoji as a surrogate pair) is already quoted: the hint says what mends it."""
    text = 'group: g\ntools:\n  - name: rocket\n    description: "launch \\ud83d\\ude80"\n    exec: echo hi\n'
    _, problems = catalog_mod.check([write_catalog(tmp_path, text)])
    [problem] = [p for p in problems if p.severity == "error"]
    assert problem.key == "g.rocket" and "invalid Unicode character escape" in problem.message
    assert "surrogate pair" in problem.message and "`\\U0001F680`" in problem.message
    assert "quote it (" not in problem.message  # it is quoted already
    (tmp_path / "ok").mkdir()
    fixed = write_catalog(tmp_path / "ok", text.replace("\\ud83d\\ude80", "\\U0001F680"))
    assert [p for p in catalog_mod.check([fixed])[1] if p.severity == "error"] == []


def test_a_yaml_error_that_quoting_does_not_mend_is_reported_once() -> None:
    from toolrun.catalog.yamlhints import repair

    text = "tools:\n  - name: t\n    exec: a: b\n"
    fixed = repair(text, (2,))
    assert fixed is not None and fixed[0].splitlines()[2] == '    exec: "a: b"' and fixed[2] == 2
    assert repair(fixed[0], (2,), skip=(2,)) is None
