"""A tool that waits for a person, or answers with a job, says so before anyone presses Run: in `list`,
`describe`, `access explain` and the MCP descriptions, not only in `--json`."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from support.catalogs import write_catalog
from toolrun.access import Access
from toolrun.access.explain import explain, explain_text
from toolrun.catalog import LoadOptions, load
from toolrun.cli import app
from toolrun.formatting import describe_text, direct_description
from toolrun.models import ToolSpec
from toolrun.state.sqlite import SQLiteKeyStore

CATALOG = """\
group: ops
tools:
  - name: restart
    description: Restart a service.
    exec: echo restarting {{ name | quote }}
    approval: required
    approvers: [oncall]
    params:
      - {name: name, type: str}
  - name: report
    description: Build the weekly report.
    exec: echo report
    async: true
  - name: uptime
    description: Show the uptime.
    exec: uptime
"""


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    return write_catalog(tmp_path, CATALOG)


@pytest.fixture
def tools(catalog: Path) -> dict[str, ToolSpec]:
    return load([catalog], os.environ, LoadOptions()).tools


def cli(catalog: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "-c", str(catalog)])
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_list_marks_the_tools_that_wait_for_a_person_or_run_as_jobs(catalog: Path) -> None:
    rows = {line.split()[0]: line for line in cli(catalog, "list").splitlines()[1:]}
    assert "[approval: oncall] Restart a service." in rows["ops.restart"]
    assert "[async] Build the weekly report." in rows["ops.report"]
    assert "[" not in rows["ops.uptime"]


def test_describe_says_who_must_approve_and_how_the_call_runs(catalog: Path) -> None:
    restart = cli(catalog, "describe", "ops.restart")
    assert "runs: needs approval by a member of oncall before each call runs; the call waits for the decision" in (
        restart
    )
    assert "runs: runs as a job: the call answers at once" in cli(catalog, "describe", "ops.report")
    assert "runs:" not in cli(catalog, "describe", "ops.uptime")


def test_mcp_descriptions_say_it_too(tools: dict[str, ToolSpec]) -> None:
    assert "runs: needs approval by a member of oncall" in describe_text(tools["ops.restart"])
    direct = direct_description(tools["ops.restart"])
    assert direct.startswith("Restart a service.") and direct.endswith(
        "Runs: needs approval by a member of oncall before each call runs; the call waits for the decision."
    )
    assert direct_description(tools["ops.uptime"]) == "Show the uptime."


def test_access_explain_says_whether_the_caller_may_approve(tools: dict[str, ToolSpec], tmp_path: Path) -> None:
    store = SQLiteKeyStore(tmp_path / "keys.db")
    Access(store).create_key("alice", ["ops"])
    Access(store).create_key("bob", ["ops", "oncall"])

    def ask(user: str) -> dict[str, object]:
        return asyncio.run(explain(tool_key="ops.restart", tool=tools["ops.restart"], username=user, store=store))

    alice, bob = ask("alice"), ask("bob")
    assert alice["approval"] == {"required": True, "approvers": ["oncall"], "may_approve": False}
    assert "needs approval by a member of oncall before it runs; alice may not approve it" in explain_text(alice)
    assert bob["approval"] == {"required": True, "approvers": ["oncall"], "may_approve": True}
    assert "bob may approve others' calls (never their own)" in explain_text(bob)


def test_an_output_delta_reads_new_bytes_from_the_head_then_the_tail() -> None:
    from toolrun.jobrecord import OutputDelta

    delta = OutputDelta()
    first = delta.step({"stdout_head": "abc", "stdout_tail": "", "stdout_bytes": 3, "stderr_bytes": 0})
    assert first is not None and (first["stdout"], first["stderr"]) == ("abc", "")
    again = delta.step({"stdout_head": "abcdef", "stdout_tail": "", "stdout_bytes": 6, "stderr_bytes": 0})
    assert again is not None and again["stdout"] == "def"
    # 10,000 bytes later, the record holds only a head and a tail: the gap is counted, not invented.
    big = {"stdout_head": "a" * 4096, "stdout_tail": "z" * 4096, "stdout_bytes": 10_006, "stderr_bytes": 0}
    jumped = delta.step(big)
    assert jumped is not None
    assert jumped["stdout"] == "a" * (4096 - 6) + "z" * 4096 and jumped["stdout_skipped"] == 10_006 - 4096 - 4096
    assert delta.step(big) == {"stdout": "", "stdout_bytes": 10_006, "stderr": "", "stderr_bytes": 0}
