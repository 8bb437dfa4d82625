"""Tool examples: the core runner (real tool processes through the ToolService) and its reports."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import write_catalog
from support.procs import pids_matching
from support.servers import wait_until
from toolrun.catalog import LoadOptions, examples, load
from toolrun.models import Example, Expect, Identity, ToolSpec
from toolrun.service import ToolService

CATALOG = """\
group: demo
tools:
  - name: echo
    exec: printf '%s' {{ text | quote }}
    params:
      - {name: text, type: str}
  - name: json
    exec: "printf '{\\"a\\": {\\"b\\": [1, 2, {\\"c\\": \\"x\\"}]}, \\"ok\\": true}'"
  - name: fail
    exec: "echo oops >&2; exit 3"
  - name: slow
    exec: sleep 5
    timeout: 0.3
  - name: level
    exec: echo {{ level }}
    params:
      - {name: level, type: str, enum: [low, high]}
"""


@pytest.fixture
def service(tmp_path: Path) -> ToolService:
    path = write_catalog(tmp_path, CATALOG)
    return ToolService(load([path], os.environ, LoadOptions()))


def run(service: ToolService, key: str, *items: Example) -> list[examples.Outcome]:
    tool = dataclasses.replace(service.registry.tools[key], examples=items)
    return asyncio.run(_collect(service, [tool]))


async def _collect(service: ToolService, tools: list[ToolSpec], **kwargs: Any) -> list[examples.Outcome]:
    return [o async for o in examples.run(service, Identity.operator(), tools, **kwargs)]


def test_exact_stdout_and_regex_pass_and_a_wrong_one_fails_saying_what_came_out(service: ToolService) -> None:
    outcomes = run(
        service,
        "demo.echo",
        Example({"text": "hello"}, Expect(stdout="hello"), name="exact"),
        Example({"text": "hello world"}, Expect(stdout_matches=r"^hello\b")),
        Example({"text": "bye"}, Expect(stdout="hello"), name="wrong"),
    )
    assert [o.status for o in outcomes] == ["passed", "passed", "failed"]
    assert [o.name for o in outcomes] == ["demo.echo[exact]", "demo.echo[2]", "demo.echo[wrong]"]
    assert outcomes[2].message == "stdout is 'bye', expected 'hello'"


def test_exit_code_and_stderr_are_checked(service: ToolService) -> None:
    outcomes = run(
        service,
        "demo.fail",
        Example({}, Expect(exit_code=3, stderr_matches="oops")),
        Example({}),
    )
    assert outcomes[0].status == "passed"
    assert outcomes[1].status == "failed"
    assert outcomes[1].message == "exit code 3, expected 0 (stderr: 'oops')"


def test_a_tool_timeout_is_exit_code_124_like_toolrun_call(service: ToolService) -> None:
    outcomes = run(service, "demo.slow", Example({}, Expect(exit_code=124)), Example({}))
    assert outcomes[0].status == "passed"
    assert outcomes[1].message.startswith("exit code 124, expected 0")


def test_an_example_timeout_stops_the_call_kills_the_process_and_fails_it(service: ToolService) -> None:
    marker = f"example-timeout-{os.getpid()}"
    slow = dataclasses.replace(service.catalog.tools["demo.slow"], timeout=30.0, source=f"sleep 7 # {marker}")
    service.registry.tools["demo.slow"] = slow
    outcomes = run(service, "demo.slow", Example({}, timeout=0.2))
    assert outcomes[0].status == "failed"
    assert outcomes[0].message == "took longer than the example's timeout of 0.2s"
    assert outcomes[0].seconds < 5
    wait_until(lambda: not pids_matching(marker), 5, "the timed-out example's process to be killed")


def test_json_fields_by_dotted_path(service: ToolService) -> None:
    outcomes = run(
        service,
        "demo.json",
        Example({}, Expect(json={"a.b.0": 1, "a.b.2.c": "x", "ok": True})),
        Example({}, Expect(json={"a.b.1": 3, "a.z": 1, "ok": 1})),
    )
    assert outcomes[0].status == "passed"
    assert outcomes[1].message == (
        "JSON field 'a.b.1' is 2, expected 3; JSON field 'a.z' is missing; JSON field 'ok' is true, expected 1"
    )


def test_an_expected_error_passes_only_when_the_call_fails_with_a_matching_message(service: ToolService) -> None:
    outcomes = run(
        service,
        "demo.level",
        Example({"level": "mid"}, Expect(error="must be one of")),
        Example({"level": "mid"}, Expect(error="nothing like this")),
        Example({"level": "low"}, Expect(error="must be one of")),
        Example({"level": "mid"}),
    )
    assert [o.status for o in outcomes] == ["passed", "failed", "failed", "error"]
    assert outcomes[2].message == "expected an error matching /must be one of/, but the call ran (exit 0)"
    assert outcomes[3].message.startswith("ParamError: parameter 'level' must be one of")


def test_examples_of_a_tool_that_changes_things_are_skipped_unless_asked(service: ToolService) -> None:
    tool = service.catalog.tools["demo.echo"]
    plain = Example({"text": "x"})
    unsafe = Example({"text": "x"}, safe=False)
    safe = Example({"text": "x"}, safe=True)
    assert examples.skip_reason(tool, plain, False) is None
    assert examples.skip_reason(tool, unsafe, False) == "marked safe: false (run with --all)"
    assert examples.skip_reason(tool, unsafe, True) is None

    class Destructive:
        destructive = True
        read_only = None

    class Writes:
        destructive = None
        read_only = False

    assert examples.skip_reason(Destructive(), plain, False) == "destructive tool (run with --all)"  # type: ignore[arg-type]
    assert examples.skip_reason(Destructive(), safe, False) is None  # type: ignore[arg-type]
    assert examples.skip_reason(Writes(), plain, False) == "tool is not read-only (run with --all)"  # type: ignore[arg-type]
    assert examples.skip_reason(Writes(), plain, True) is None  # type: ignore[arg-type]


def test_a_skipped_example_never_runs(service: ToolService, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = dataclasses.replace(
        service.catalog.tools["demo.echo"],
        source=f"touch {marker}",
        examples=(Example({"text": "x"}, safe=False),),
    )
    service.registry.tools[tool.key] = tool
    outcomes = asyncio.run(_collect(service, [tool]))
    assert [o.status for o in outcomes] == ["skipped"]
    assert not marker.exists()
    outcomes = asyncio.run(_collect(service, [tool], run_unsafe=True))
    assert [o.status for o in outcomes] == ["passed"]
    assert marker.exists()


def test_load_time_problems_name_the_bad_argument_and_the_bad_regex(service: ToolService) -> None:
    tool = service.catalog.tools["demo.level"]
    found = examples.problems(tool, Example({"level": "mid", "extra": 1}, name="bad"))
    assert found == [(("args", "extra"), "example 'bad': unknown parameter 'extra' for demo.level (accepted: level)")]
    found = examples.problems(tool, Example({"level": 5}, Expect(stdout_matches="(")))
    assert [where for where, _ in found] == [("expect", "stdout_matches"), ("args", "level")]
    assert "is not a regular expression" in found[0][1]
    assert "must be one of" in found[1][1]
    assert examples.problems(tool, Example({"level": "mid"}, Expect(error="one of"))) == []


def _outcomes(service: ToolService) -> list[examples.Outcome]:
    tool = dataclasses.replace(
        service.catalog.tools["demo.echo"],
        file="cat & <dogs>.yaml",
        examples=(
            Example({"text": "a"}, Expect(stdout="a"), name="ok", line=7, col=9),
            Example({"text": "b"}, Expect(stdout='"quoted" & <tag>'), name="bad", line=12, col=9),
            Example({"text": "c"}, name="later\x01", safe=False, line=15, col=9),
        ),
    )
    return asyncio.run(_collect(service, [tool]))


def test_junit_report_is_well_formed_xml_with_the_counts_and_messages(service: ToolService) -> None:
    outcomes = _outcomes(service)
    root = ET.fromstring(examples.junit_xml(outcomes, 1.5))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == ("3", "1", "1", "0")
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "cat & <dogs>.yaml"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["demo.echo[ok]", "demo.echo[bad]", "demo.echo[later\ufffd]"]
    assert [c.get("line") for c in cases] == ["7", "12", "15"]
    assert cases[0].find("failure") is None
    failure = cases[1].find("failure")
    assert failure is not None
    assert '"quoted" & <tag>' in (failure.get("message") or "")
    assert cases[2].find("skipped") is not None


def test_github_annotations_point_at_the_example_line(service: ToolService) -> None:
    lines = examples.github_lines(_outcomes(service))
    assert lines == [
        "::error file=cat & <dogs>.yaml,line=12,col=9::demo.echo[bad]: stdout is 'b', expected '\"quoted\" & <tag>'"
    ]


def test_text_lines_and_summary(service: ToolService) -> None:
    outcomes = _outcomes(service)
    lines = [examples.text_line(o) for o in outcomes]
    assert lines[0].startswith("PASS  demo.echo[ok] (")
    assert lines[1].startswith("FAIL  demo.echo[bad] (") and lines[1].endswith("expected '\"quoted\" & <tag>'")
    assert lines[2] == "SKIP  demo.echo[later\x01]: marked safe: false (run with --all)"
    assert examples.summary(outcomes, 0.5) == "1 passed, 1 failed, 1 skipped in 0.50s"


EXAMPLES_YAML = """\
group: demo
tools:
  - name: echo
    exec: printf '%s' {{ text | quote }}
    params:
      - {name: text, type: str}
    examples:
      - name: hello
        args: {text: hello}
        expect: {stdout: hello, json: null}
      - args: {text: "1"}
        expect:
          json: {"": 1}
          exit_code: 0
        timeout: 5
        safe: true
"""


def test_catalog_examples_load_with_their_lines_and_expectations(tmp_path: Path) -> None:
    path = write_catalog(tmp_path, EXAMPLES_YAML)
    tool = load([path], os.environ, LoadOptions(check=True)).tools["demo.echo"]
    first, second = tool.examples
    assert (first.name, first.args, first.expect.stdout, first.line) == ("hello", {"text": "hello"}, "hello", 8)
    assert (second.expect.json, second.timeout, second.safe, second.line) == ({"": 1}, 5.0, True, 11)
    service = ToolService(load([path], os.environ, LoadOptions()))
    outcomes = asyncio.run(_collect(service, [tool]))
    assert [o.status for o in outcomes] == ["passed", "passed"]


def test_bad_examples_are_catalog_errors_at_their_own_lines(tmp_path: Path) -> None:
    from toolrun.catalog import check

    text = (
        EXAMPLES_YAML
        + """\
      - args: {text: 1, nope: 2}
      - args: {}
        expect: {stdout_matches: "("}
      - args: {}
        expect: {error: "missing required"}
"""
    )
    _, found = check([write_catalog(tmp_path, text)], os.environ, LoadOptions(check=True))
    assert [(p.line, p.col, p.message) for p in found if p.severity == "error"] == [
        (17, 25, "example 3: unknown parameter 'nope' for demo.echo (accepted: text)"),
        (
            19,
            18,
            "example 4: stdout_matches is not a regular expression: missing ), unterminated subpattern at position 0",
        ),
        (18, 9, "example 4: missing required parameter 'text' (str) for demo.echo"),
    ]
    _, found = check([write_catalog(tmp_path, text + "        colour: red\n")], os.environ, LoadOptions(check=True))
    assert [(p.line, p.message) for p in found] == [(22, "unknown field 'colour'")]
