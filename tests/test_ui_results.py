"""The browser UI's result panel, group chips and return type, and an accessibility check with axe-core:
the real app (ui-dist/) in Debian's Chromium, driven by Playwright, against a real `toolrun serve --ui`
on a free port. The catalog is tests/ui_catalog/ plus a few tools of group `out` written here (a
timeout, a long line, an fn tool, constrained params).

axe-core comes from ui/node_modules (a devDependency of ui/package.json, installed by `npm ci`): it is
injected into each page by Playwright, never fetched from a network. Skipped locally when npm or
chromium is missing; under CI=true a missing one fails (support.binaries.require_binary).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary

try:
    from playwright.sync_api import Page, Response, expect
except ImportError:  # pragma: no cover - the [test] extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed (pip install -e '.[test]')", allow_module_level=True)

import test_ui_browser as ui_browser
from test_ui_browser import CATALOG, UI, App, Server, start_server, stop_server

# The main browser tests' fixtures, by name: the built app, Chromium, and pages on this module's `server`.
ui_dist = ui_browser.ui_dist
playwright = ui_browser.playwright
browser = ui_browser.browser
app_factory = ui_browser.app_factory
app = ui_browser.app

pytestmark = pytest.mark.timeout(300)

OUTCOMES = """\
version: 1
group: out
tools:
  - name: timeout
    public: true
    description: Sleeps past its timeout.
    exec: sleep 5
    timeout: 0.5
  - name: long_line
    public: true
    description: One line of 400 numbers, then a short one.
    exec: seq -s ' ' 1 400; echo short
  - name: flood
    public: true
    description: More output than its cap keeps.
    exec: seq 1 20000
    limits: {output: 1K}
  - name: fn_dict
    public: true
    description: An fn tool that returns a dict.
    fn: ui_outcome_fns:settings
  - name: hosts
    public: true
    description: Hosts as typed JSON rows.
    exec: |
      printf '[{"host": "a1", "up": true}, {"host": "b2", "up": false}]'
    output:
      format: json
      schema: {type: array, items: {type: object, properties: {host: {type: string}, up: {type: boolean}}}}
  - name: nested
    public: true
    description: A nested typed JSON value.
    exec: |
      printf '{"disk": {"used": 12, "mounts": ["/", "/srv"]}}'
    output: {format: json}
  - name: badjson
    public: true
    description: Declares JSON, prints text.
    exec: printf 'total 12'
    output: {format: json}
  - name: constrained
    public: true
    read_only: true
    description: Params with an enum, a pattern and bounds.
    exec: printf '%s %s %s' {{ level | quote }} {{ repo | quote }} {{ n }}
    params:
      - {name: level, type: str, enum: [debug, info], default: info, description: How loud.}
      - {name: repo, type: str, pattern: "/[A-Za-z0-9_./-]+", example: /srv/repo, description: A path.}
      - {name: n, type: int, default: 5, min: 1, max: 100, description: How many.}
"""
FNS = """\
def settings() -> dict:
    return {"mode": "fast", "level": 3}
"""
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]
AXE_RUN = """async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help}\\n` + v.nodes.map(
    (n) => `    ${n.target.join(' ')}: ${(n.failureSummary || '').replace(/\\s+/g, ' ')}`).join('\\n'));
}"""


@pytest.fixture(scope="module")
def server(ui_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    catalog = tmp_path_factory.mktemp("ui-results-catalog")
    for path in CATALOG.glob("*.yaml"):
        shutil.copy(path, catalog / path.name)
    (catalog / "outcomes.yaml").write_text(OUTCOMES, encoding="utf-8")
    (catalog / "ui_outcome_fns.py").write_text(FNS, encoding="utf-8")
    srv = start_server(tmp_path_factory.mktemp("ui-results"), {"TOOLRUN_UI_DIST": str(ui_dist)}, catalog)
    try:
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture(scope="module")
def axe_script() -> Path:
    """axe-core's browser build from ui/node_modules (`npm ci` in ui/ first when it is not installed)."""
    script = UI / "node_modules" / "axe-core" / "axe.min.js"
    if not script.is_file():
        npm = require_binary("npm")
        env = {**os.environ, "CI": "true", "NO_COLOR": "1"}
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=UI, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    assert script.is_file(), "axe-core is a devDependency of ui/package.json: `npm ci` in ui/ installs it"
    return script


def run_tool(app: App, key: str, **fill: str) -> Response:
    """Open a tool, fill its fields, run it: the API's answer, once the panel shows it."""
    app.open_tool(key)
    for name, value in fill.items():
        app.page.get_by_label(name, exact=True).fill(value)
    with app.page.expect_response(lambda r: r.request.method == "POST") as info:
        app.run()
    expect(app.page.get_by_test_id("result").or_(app.page.get_by_test_id("error"))).to_be_visible()
    return info.value


# -- a failed command looks like a failure -------------------------------------------------------------------


def test_a_failed_command_is_marked_failed_with_its_exit_code_stdout_and_stderr_apart(app_factory: Any) -> None:
    app = app_factory(clipboard=True)
    page = app.page
    answer = run_tool(app, "demo.fail")
    # The API's answer is a normal 200 with the exit code in its header; the UI asked for the structured form.
    assert answer.status == 200 and answer.headers["x-toolrun-exit-code"] == "3"
    assert answer.request.headers["accept"] == "application/json"
    result = page.get_by_test_id("result")
    expect(result).to_have_attribute("data-outcome", "failed")
    expect(result.get_by_test_id("result-status")).to_have_text("Exit code 3")
    expect(result).to_contain_text("The command failed with exit code 3")
    expect(result.locator(".pill-ok")).to_have_count(0)  # no green "200 OK" for a failure
    expect(result.locator(".result-meta")).to_contain_text("HTTP 200 OK")
    assert page.get_by_test_id("stdout-text").text_content() == "out"
    assert page.get_by_test_id("stderr-text").text_content() == "boom"
    page.get_by_test_id("result-stderr").get_by_role("button", name="Copy stderr").click()
    expect(page.get_by_role("button", name="Copied stderr")).to_be_visible()
    assert page.evaluate("navigator.clipboard.readText()") == "boom"


def test_a_typed_output_shows_as_a_table_or_a_tree_and_a_mismatch_keeps_the_raw_text(app: App) -> None:
    run_tool(app, "out.hosts")
    table = app.page.get_by_test_id("result-table")
    expect(table.locator("thead th")).to_have_text(["#", "host", "up"])
    expect(table.locator("tbody tr").nth(1).locator("td")).to_have_text(["1", "b2", "false"])
    expect(app.page.get_by_test_id("result")).to_contain_text("Typed output")
    expect(app.page.get_by_test_id("return-words")).to_contain_text("checked against the tool's output schema")
    run_tool(app, "out.nested")
    tree = app.page.get_by_test_id("result-tree")
    expect(tree).to_contain_text("disk: object of 2")
    expect(tree).to_contain_text("mounts: list of 2")
    expect(tree.locator(".data-number")).to_have_text("12")
    run_tool(app, "out.badjson")
    error = app.page.get_by_test_id("error")
    expect(error).to_contain_text("502 Bad Gateway")
    expect(app.page.get_by_test_id("error-text")).to_contain_text("declares JSON output, but it is not JSON")
    expect(app.page.get_by_test_id("error-text")).to_contain_text("total 12")


def test_a_timeout_is_named_as_one(app: App) -> None:
    assert run_tool(app, "out.timeout").headers["x-toolrun-exit-code"] == "-1"
    result = app.page.get_by_test_id("result")
    expect(result).to_have_attribute("data-outcome", "timeout")
    expect(result.get_by_test_id("result-status")).to_have_text("Timed out")
    expect(result).to_contain_text("ran past its timeout and was stopped")
    expect(app.page.get_by_test_id("result-stdout")).to_contain_text("Nothing on stdout.")
    assert app.page.get_by_test_id("stderr-text").text_content() == "timeout after 0.5s"


def test_a_success_still_shows_the_text_verbatim_and_an_fn_tools_json_pretty_printed(app: App) -> None:
    assert run_tool(app, "demo.greet", name="Ada").headers["x-toolrun-exit-code"] == "0"
    expect(app.page.get_by_test_id("result")).to_have_attribute("data-outcome", "ok")
    expect(app.page.get_by_test_id("result-status")).to_have_text("200 OK")
    assert app.result_text() == "Hello, Ada!"
    assert "x-toolrun-exit-code" not in run_tool(app, "out.fn_dict").headers  # an fn tool runs no process
    assert app.result_text() == '{\n  "mode": "fast",\n  "level": 3\n}'
    expect(app.page.get_by_test_id("result")).to_contain_text("JSON, pretty-printed")


def test_an_error_answer_is_shown_as_the_plain_text_line_of_the_api(app: App) -> None:
    page = app.page
    answer = run_tool(app, "out.constrained", repo="not a path")
    body = answer.json()
    assert answer.status == 400 and body["type"] == "ParamError"
    expect(page.get_by_test_id("error").locator(".pill")).to_have_text("400 Bad Request")
    assert page.get_by_test_id("error-text").text_content() == f"ParamError: {body['error']}"


def test_output_the_server_cut_is_said_so_with_the_bytes_dropped(app: App) -> None:
    answer = run_tool(app, "out.flood").json()
    assert answer["truncated"] is True and answer["bytes_dropped"] > 0
    expect(app.page.get_by_test_id("result-cut")).to_have_text(
        f"The output was cut: the server dropped {answer['bytes_dropped']} bytes over its cap."
    )
    assert "[toolrun: stdout truncated" in app.result_text()


# -- long lines wrap ---------------------------------------------------------------------------------------------


def _overflows(page: Page) -> bool:
    return bool(
        page.evaluate(
            "(() => { const e = document.querySelector('[data-testid=result-text]');"
            " return e.scrollWidth > e.clientWidth + 1; })()"
        )
    )


def test_long_result_lines_wrap_by_default_and_the_toggle_is_remembered(app: App) -> None:
    page = app.page
    run_tool(app, "out.long_line")
    line = " ".join(str(n) for n in range(1, 401))
    assert app.result_text() == f"{line}\nshort\n", "wrapping changes how it looks, never the text"
    toggle = page.get_by_role("button", name="Wrap lines")
    expect(toggle).to_have_attribute("aria-pressed", "true")
    assert not _overflows(page)
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "false")
    assert _overflows(page), "unwrapped, the long line scrolls sideways"
    page.reload()
    run_tool(app, "out.long_line")
    expect(page.get_by_role("button", name="Wrap lines")).to_have_attribute("aria-pressed", "false")
    assert _overflows(page)


# -- group chips and the return type -------------------------------------------------------------------------------


def test_public_is_shown_on_cards_but_not_offered_as_a_group_filter(app: App) -> None:
    app.goto()
    app.wait_list()
    row = app.page.get_by_role("group", name="Filter this page by group")
    expect(row.get_by_role("button")).to_have_text(["demo", "fun"])
    card = app.page.locator('.card[data-key="demo.add"]')
    expect(card.locator(".chip-public")).to_have_text("public")
    expect(card.get_by_role("button", name="public")).to_have_count(0)
    expect(card.get_by_role("button", name="fun")).to_be_visible()


def test_the_exec_return_type_is_explained_in_words(app: App) -> None:
    app.open_tool("demo.add")
    detail = app.page.get_by_test_id("detail")
    expect(detail.locator(".return-type")).to_have_text("str | (int, str, str)")
    expect(detail.get_by_test_id("return-words")).to_contain_text(
        "standard output when it exits with code 0; otherwise the tuple (exit code, stdout, stderr)"
    )
    app.open_tool("out.fn_dict")
    expect(app.page.locator(".return-type")).to_have_text("dict")
    expect(app.page.get_by_test_id("return-words")).to_have_count(0)


# -- accessibility: axe-core's WCAG 2.1 A/AA rules (and its best practices) in both themes -------------------


def assert_accessible(page: Page, where: str) -> None:
    """axe-core finds no violation on the page as it is now."""
    page.wait_for_timeout(50)  # let a focus or hover transition end
    found = page.evaluate(AXE_RUN, AXE_TAGS)
    assert found == [], f"axe-core found accessibility violations on the {where}:\n" + "\n".join(found)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_wcag_21_aa_violation_in_the_list_detail_form_and_results(
    app_factory: Any, axe_script: Path, scheme: str
) -> None:
    app = app_factory(scheme=scheme)
    page = app.page
    page.emulate_media(reduced_motion="reduce")
    app.context.add_init_script(path=axe_script)

    app.goto()
    app.wait_list()
    expect(page.locator("html")).to_have_attribute("data-theme", scheme)
    assert_accessible(page, "tool list")
    expect(page.get_by_role("heading", level=1)).to_have_text("toolrun tools")

    app.open_tool("out.constrained")  # the detail and the call form: an enum, a pattern, bounds, hints
    assert_accessible(page, "detail and call form")
    page.get_by_label("repo", exact=True).fill("/srv/repo")
    app.run()
    expect(page.get_by_test_id("result")).to_have_attribute("data-outcome", "ok")
    assert_accessible(page, "result panel")
    page.get_by_label("n", exact=True).fill("500")  # the form's own check: a field error
    app.run()
    expect(page.locator('[data-param="n"] .field-error')).to_have_text("Must be at most 100.")
    assert_accessible(page, "call form with a field error")

    app.open_tool("demo.types")  # every field type
    page.get_by_label("text", exact=True).fill("hello")
    page.get_by_label("count", exact=True).fill("3")
    page.get_by_label("tags", exact=True).press_sequentially("gamma")
    page.get_by_label("tags", exact=True).press("Enter")
    app.run()
    app.result_text()
    assert_accessible(page, "every field type, with a result")

    run_tool(app, "demo.fail")
    expect(page.get_by_test_id("result")).to_have_attribute("data-outcome", "failed")
    assert_accessible(page, "a failed command")

    app.open_tool("demo.add")
    page.get_by_label("a", exact=True).fill("1")
    app.run()
    expect(page.get_by_test_id("error")).to_be_visible()
    assert_accessible(page, "an error answer")

    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert_accessible(page, "sign-in dialog")
