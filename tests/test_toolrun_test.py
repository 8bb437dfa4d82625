"""`toolrun test` and `toolrun init`, run as the real command on real catalogs."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

from support.catalogs import write_catalog
from support.servers import clean_env, toolrun_cli

CATALOG = """\
group: demo
tools:
  - name: echo
    exec: printf '%s' {{ text | quote }}
    params:
      - {name: text, type: str}
    examples:
      - name: hello
        args: {text: hello}
        expect: {stdout: hello}
      - name: wrong
        args: {text: bye}
        expect: {stdout_matches: "^hel+o$"}
  - name: wipe
    exec: touch {{ marker | quote }}
    params:
      - {name: marker, type: str}
    examples:
      - args: {marker: MARKER}
        safe: false
  - name: status
    exec: "echo '{\\"state\\": \\"up\\", \\"n\\": 3}'"
    examples:
      - name: up
        args: {}
        expect: {json: {state: up, n: 3}}
"""


def _catalog(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "wiped"
    return write_catalog(tmp_path, CATALOG.replace("MARKER", str(marker))), marker


def test_text_report_one_line_per_example_a_summary_and_exit_1(tmp_path: Path) -> None:
    path, marker = _catalog(tmp_path)
    done = toolrun_cli("test", str(path), env=clean_env(tmp_path / "home"))
    lines = done.stdout.splitlines()
    assert done.returncode == 1, done.stderr
    assert lines[0].startswith("PASS  demo.echo[hello] (")
    assert lines[1].startswith("FAIL  demo.echo[wrong] (")
    assert lines[1].endswith("stdout does not match /^hel+o$/: 'bye'")
    assert lines[2].startswith("PASS  demo.status[up] (")  # in key order
    assert lines[3] == "SKIP  demo.wipe[1]: marked safe: false (run with --all)"
    assert lines[4].startswith("2 passed, 1 failed, 1 skipped in ")
    assert not marker.exists()


def test_all_runs_the_unsafe_examples_and_key_filters(tmp_path: Path) -> None:
    path, marker = _catalog(tmp_path)
    done = toolrun_cli("test", str(path), "--all", "-k", "wipe", env=clean_env(tmp_path / "home"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0].startswith("PASS  demo.wipe[1] (")
    assert marker.exists()


def test_junit_report_validates_as_junit_xml(tmp_path: Path) -> None:
    path, _ = _catalog(tmp_path)
    done = toolrun_cli("test", str(path), "--format", "junit", env=clean_env(tmp_path / "home"))
    assert done.returncode == 1
    root = ET.fromstring(done.stdout)  # the whole of stdout is the XML document
    assert root.tag == "testsuites"
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "4",
        "failures": "1",
        "errors": "0",
        "skipped": "1",
    }
    (suite,) = root
    assert suite.tag == "testsuite" and suite.get("name") == str(path)
    for case in suite:
        assert case.tag == "testcase"
        assert set(case.attrib) >= {"classname", "name", "time", "file", "line"}
        float(case.get("time") or "x")
        assert all(child.tag in ("failure", "error", "skipped") for child in case)
    assert "1 failed" in done.stderr


def test_github_annotations_point_at_the_failing_example(tmp_path: Path) -> None:
    path, _ = _catalog(tmp_path)
    done = toolrun_cli("test", str(path), "--format", "github", env=clean_env(tmp_path / "home"))
    annotations = [line for line in done.stdout.splitlines() if line.startswith("::")]
    file = str(path).replace(":", "%3A").replace(",", "%2C")
    assert annotations == [
        f"::error file={file},line=11,col=9::demo.echo[wrong]: stdout does not match /^hel+o$/: 'bye'"
    ]


def test_a_bad_example_fails_the_load_like_validate_catalog(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, CATALOG.replace("args: {text: bye}", "args: {txt: bye}"))
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("test", str(path), env=env)
    assert done.returncode == 2
    expected = f"{path}:12:16: demo.echo: example 'wrong': unknown parameter 'txt' for demo.echo (accepted: text)"
    assert done.stderr.splitlines() == [expected]
    checked = toolrun_cli("validate-catalog", str(path), env=env)
    assert checked.returncode == 1 and checked.stdout.splitlines() == [expected]


def test_no_examples_is_not_a_failure(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, "group: g\ntools:\n  - {name: t, exec: 'true'}\n")
    done = toolrun_cli("test", str(path), env=clean_env(tmp_path / "home"))
    assert (done.returncode, done.stdout) == (0, "no examples: add `examples:` to a tool\n")


def test_bad_format_is_a_usage_error(tmp_path: Path) -> None:
    path, _ = _catalog(tmp_path)
    done = toolrun_cli("test", str(path), "--format", "xml", env=clean_env(tmp_path / "home"))
    assert done.returncode == 2
    assert done.stderr == "toolrun: --format must be text, junit or github, not 'xml'\n"


def test_init_writes_a_starter_that_validates_and_whose_examples_pass(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    work = tmp_path / "project"
    work.mkdir()
    done = toolrun_cli("init", str(work / "tools.yaml"), env=env)
    assert done.returncode == 0, done.stderr
    text = (work / "tools.yaml").read_text()
    assert text.startswith("# yaml-language-server: $schema=catalog.schema.json\n")
    assert "\n$schema: catalog.schema.json\n" in text
    assert {"exec:", "curl:", "fn:"} <= {word for word in text.split() if word.endswith(":")}
    assert (work / "catalog.schema.json").is_file() and (work / "tools_fns.py").is_file()
    checked = toolrun_cli("validate-catalog", str(work / "tools.yaml"), env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stderr == "valid: 3 tools, 0 errors, 0 warnings\n"
    tested = toolrun_cli("test", str(work / "tools.yaml"), env=env)
    assert tested.returncode == 0, tested.stdout
    assert tested.stdout.splitlines()[-1].startswith("3 passed in ")
    again = toolrun_cli("init", str(work / "tools.yaml"), env=env)
    assert again.returncode == 2 and "already exist" in again.stderr
    assert toolrun_cli("init", str(work / "tools.yaml"), "--force", env=env).returncode == 0


def test_init_schema_is_the_one_of_this_version(tmp_path: Path) -> None:
    from toolrun.catalog.schema import catalog_json_schema_text

    done = toolrun_cli("init", str(tmp_path / "cat.yaml"), env={**clean_env(tmp_path / "home"), "PWD": os.getcwd()})
    assert done.returncode == 0
    assert (tmp_path / "catalog.schema.json").read_text() == catalog_json_schema_text()
    assert "fn: cat_fns:greet" in (tmp_path / "cat.yaml").read_text()


def test_the_behaviour_hints_decide_which_examples_run_without_all(tmp_path: Path) -> None:
    text = """\
group: h
tools:
  - name: reads
    read_only: true
    exec: echo r
    examples: [{expect: {stdout: "r\\n"}}]
  - name: writes
    read_only: false
    exec: echo w
    examples: [{expect: {stdout: "w\\n"}}]
  - name: wipes
    destructive: true
    exec: echo d
    examples: [{expect: {stdout: "d\\n"}}, {name: dry, safe: true, expect: {stdout: "d\\n"}}]
"""
    path = write_catalog(tmp_path, text)
    env = clean_env(tmp_path / "home")
    done = toolrun_cli("test", str(path), env=env)
    assert done.returncode == 0, done.stdout
    lines = done.stdout.splitlines()
    assert lines[0].startswith("PASS  h.reads[1]")
    assert lines[1] == "SKIP  h.wipes[1]: destructive tool (run with --all)"
    assert lines[2].startswith("PASS  h.wipes[dry]")
    assert lines[3] == "SKIP  h.writes[1]: tool is not read-only (run with --all)"
    everything = toolrun_cli("test", str(path), "--all", env=env)
    assert everything.stdout.splitlines()[-1].startswith("4 passed in ")
