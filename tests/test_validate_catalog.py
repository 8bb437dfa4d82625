"""`toolrun validate-catalog`: golden files for broken catalogs, exit codes, --strict, --format.

Each case in tests/golden/ is a catalog file `<case>.yaml` (or a directory `<case>/`) with its
expected transcript in `<case>.out`. A first line `# args: ...` adds options. Cases run from the
golden directory, so the paths in the output are relative and stable.

Regenerate the transcripts after an intended change with:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/test_validate_catalog.py

then read the diff: every line and column in it was checked by hand once.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.catalogs import EXAMPLES
from toolrun.cli import app

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
CASES = sorted(
    [p.stem for p in GOLDEN.glob("*.yaml")] + [p.name for p in GOLDEN.iterdir() if p.is_dir() and p.name[0] != "_"]
)
# The broken catalogs the issue asks for, at least.
REQUIRED = {
    "yaml_syntax",
    "unknown_field",
    "missing_name",
    "no_command",
    "two_commands",
    "unknown_param_type",
    "default_wrong_type",
    "duplicate_keys",
    "jinja_syntax",
    "undeclared_var",
    "unused_param",
    "unquoted",
    "unquoted_strict",
    "unset_env",
    "fn_import",
    "bad_limits",
    "duplicate_field",
    "curl_options",
    "allow_warnings",
    "shell_shapes",
    "generated_examples",
    "yaml_command",
}


def transcript(case: str, monkeypatch: pytest.MonkeyPatch) -> str:
    target = f"{case}.yaml" if (GOLDEN / f"{case}.yaml").is_file() else case
    args: list[str] = []
    if target.endswith(".yaml"):
        first = (GOLDEN / target).read_text(encoding="utf-8").splitlines()[0]
        if first.startswith("# args:"):
            args = shlex.split(first.removeprefix("# args:"))
    for name in list(os.environ):
        if name.startswith("TOOLRUN_GOLDEN_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(GOLDEN)
    result = CliRunner().invoke(app, ["validate-catalog", *args, target])
    command = shlex.join(["toolrun", "validate-catalog", *args, target])
    return f"$ {command}\nexit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}"


def test_every_required_broken_catalog_has_a_golden_case() -> None:
    assert sorted(REQUIRED - set(CASES)) == []
    assert all((GOLDEN / f"{case}.out").is_file() or UPDATE for case in CASES)


@pytest.mark.parametrize("case", CASES)
def test_validate_catalog_output_matches_the_golden_file(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    actual = transcript(case, monkeypatch)
    expected_file = GOLDEN / f"{case}.out"
    if UPDATE:
        expected_file.write_text(actual, encoding="utf-8")
    assert actual == expected_file.read_text(encoding="utf-8")


def test_a_valid_catalog_exits_zero_with_no_problem_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    result = CliRunner().invoke(app, ["validate-catalog", "valid.yaml"])
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr == "valid: 1 tool, 0 errors, 0 warnings\n"


def test_the_example_catalog_is_valid_even_under_strict() -> None:
    result = CliRunner().invoke(app, ["validate-catalog", "--strict", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "0 errors, 0 warnings" in result.stderr


def test_warnings_alone_exit_zero_and_fail_under_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    assert CliRunner().invoke(app, ["validate-catalog", "unused_param.yaml"]).exit_code == 0
    assert CliRunner().invoke(app, ["validate-catalog", "--strict", "unused_param.yaml"]).exit_code == 1


def test_every_text_problem_line_is_file_line_col_key_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    files = [f"{case}.yaml" for case in sorted(REQUIRED) if (GOLDEN / f"{case}.yaml").is_file()]
    result = CliRunner().invoke(app, ["validate-catalog", *files])
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) >= len(files)
    for line in lines:
        file, row, col, key, message = line.split(":", 4)
        assert file in files and int(row) >= 1 and int(col) >= 1
        assert key.startswith(" ") and message.startswith(" ") and message.strip()


def test_json_format_lists_every_problem_with_its_severity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    result = CliRunner().invoke(app, ["validate-catalog", "--format", "json", "unquoted.yaml", "missing_name.yaml"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["valid"] is False and report["tools"] == 1
    assert [(p["file"], p["severity"]) for p in report["problems"]] == [
        ("missing_name.yaml", "error"),
        ("unquoted.yaml", "warning"),
        ("unquoted.yaml", "warning"),
        ("unquoted.yaml", "warning"),
    ]
    assert set(report["problems"][0]) == {"file", "line", "col", "key", "severity", "message", "code"}
    assert [p["code"] for p in report["problems"]] == [None, "unquoted-param", "unquoted-param", "negative-number"]


def test_github_format_turns_warnings_into_errors_under_strict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(GOLDEN)
    plain = CliRunner().invoke(app, ["validate-catalog", "-f", "github", "unused_param.yaml"])
    strict = CliRunner().invoke(app, ["validate-catalog", "-f", "github", "--strict", "unused_param.yaml"])
    assert (plain.exit_code, strict.exit_code) == (0, 1)
    assert plain.stdout.startswith("::warning file=unused_param.yaml,line=6,col=15::ops.date: ")
    assert strict.stdout.startswith("::error file=unused_param.yaml,line=6,col=15::ops.date: ")


def test_github_format_escapes_newlines_and_percent_signs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a,b.yaml").write_text("group: ops\ntools:\n  - name: t\n    exec: echo {{ x }}\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["validate-catalog", "-f", "github", "a,b.yaml"])
    assert result.exit_code == 1
    assert result.stdout == (
        "::error file=a%2Cb.yaml,line=4,col=19::ops.t: template uses 'x', which is not a declared param\n"
    )


def test_an_unknown_format_is_a_usage_error() -> None:
    result = CliRunner().invoke(app, ["validate-catalog", "--format", "xml", str(EXAMPLES)])
    assert result.exit_code == 2
    assert "--format must be text, json or github" in result.stderr


def test_a_missing_file_is_reported_as_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate-catalog", "nope.yaml"])
    assert result.exit_code == 1
    assert result.stdout == "nope.yaml:1:1: -: cannot read catalog: No such file or directory\n"


def test_a_warning_inside_a_block_scalar_points_at_the_line_of_the_use(tmp_path: Path) -> None:
    """The nested-quotes warning names the line where the value sits inside quotes, not the param's first use."""
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "group: ops\n"
        "tools:\n"
        "  - name: report\n"
        "    exec: |\n"
        "      echo {{ host | quote }}\n"
        "      date\n"
        "      uptime\n"
        '      echo "host is {{ host | quote }}"\n'
        "    params:\n"
        "      - {name: host, type: str}\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["validate-catalog", "--format", "json", str(catalog)])
    problems = [p for p in json.loads(result.stdout)["problems"] if p.get("code") == "nested-quotes"]
    assert [(p["line"], p["col"]) for p in problems] == [(8, 24)], result.stdout
