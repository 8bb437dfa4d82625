"""The approvals view in Debian's Chromium (Playwright) against a real `toolrun serve --ui`: alice runs a tool
that needs approval and sees its job waiting on the result panel; bob, an approver, sees who asked, the
parameters and the exact command, approves with a reason; alice's panel then shows the result."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import Processes, ToolrunServer

try:
    from playwright.sync_api import Browser, Page, expect, sync_playwright
except ImportError:  # pragma: no cover - the [test] extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed", allow_module_level=True)

from test_ui_browser import CHROMIUM_ARGS, build_ui
from test_ui_results import assert_accessible, axe_script  # noqa: F401 - axe_script is a fixture

pytestmark = [pytest.mark.serial, pytest.mark.timeout(240)]

CATALOG = """\
group: ops
tools:
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
      - {name: token, type: str, secret: true, required: false}
    approval: required
    approvers: [oncall]
"""


@pytest.fixture
def browser() -> Iterator[Browser]:
    chromium = require_binary("chromium")
    build_ui()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def test_an_approver_approves_in_the_ui_and_the_requester_sees_the_result(
    browser: Browser,
    tmp_path: Path,
    axe_script: Path,  # noqa: F811 - the fixture imported above
) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_UI_ENABLED": True}))
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        server.start()

        def page_as(key: str) -> Page:
            context = browser.new_context()
            context.add_init_script(f"localStorage.setItem('toolrun.apiKey', {json.dumps(key)})")
            context.add_init_script(path=axe_script)
            return context.new_page()

        mine = page_as(alice)
        mine.goto(server.url + "/ui/tools/ops.wipe")
        mine.get_by_label("target", exact=True).fill("db1")
        mine.get_by_label("token", exact=True).fill("s3cr3t-value")
        mine.get_by_role("button", name="Run", exact=True).click()
        state = mine.get_by_test_id("job-state")
        expect(state).to_have_attribute("data-status", "awaiting_approval")
        expect(state).to_contain_text("needs approval by a member of oncall")
        assert_accessible(mine, "a job awaiting approval on the result panel")

        theirs = page_as(bob)
        theirs.goto(server.url + "/ui/")
        item = theirs.get_by_test_id("approval")
        expect(item).to_have_count(1)
        expect(item).to_contain_text("ops.wipe asked by alice")
        expect(theirs.get_by_test_id("approval-command")).to_have_text("echo wiped db1")
        args = theirs.get_by_test_id("approval-args")
        expect(args).to_contain_text('"target": "db1"')
        expect(args).to_contain_text("[secret]")
        assert "s3cr3t-value" not in theirs.content()
        assert_accessible(theirs, "the approvals view")
        theirs.get_by_label("Reason", exact=True).fill("ticket 42")
        theirs.get_by_role("button", name="Approve", exact=True).click()
        expect(theirs.get_by_test_id("approval-message")).to_contain_text("approved")

        expect(mine.get_by_test_id("result-text")).to_have_text("wiped db1\n", timeout=15000)
        # The requester's own page never offers to approve its call.
        mine.goto(server.url + "/ui/")
        expect(mine.get_by_test_id("approvals")).to_have_count(0)


def test_the_requesters_cancel_or_a_closed_page_withdraws_its_waiting_call(browser: Browser, tmp_path: Path) -> None:
    import httpx

    from support.servers import wait_until

    catalog = write_catalog(tmp_path, CATALOG)
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_UI_ENABLED": True}))
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        server.start()

        def jobs() -> dict[str, dict[str, object]]:
            listed = httpx.get(server.url + "/jobs", headers={"X-API-Key": bob}).json()
            return {str(j["args"]["target"]): j for j in listed}

        def run(target: str) -> Page:
            context = browser.new_context()
            context.add_init_script(f"localStorage.setItem('toolrun.apiKey', {json.dumps(alice)})")
            page = context.new_page()
            page.goto(server.url + "/ui/tools/ops.wipe")
            page.get_by_label("target", exact=True).fill(target)
            page.get_by_role("button", name="Run", exact=True).click()
            expect(page.get_by_test_id("job-state")).to_have_attribute("data-status", "awaiting_approval")
            return page

        cancelled = run("cancel-me")
        cancelled.get_by_role("button", name="Cancel", exact=True).click()
        withdrawn = wait_until(lambda: jobs()["cancel-me"]["status"] == "cancelled", 10, "the withdrawal")
        assert withdrawn and str(jobs()["cancel-me"]["reason"]).startswith("withdrawn: the requester stopped waiting")

        closed = run("close-me")
        closed.context.close()  # the page goes away without a word: its hold lapses
        wait_until(lambda: jobs()["close-me"]["status"] == "cancelled", 30, "the lapsed hold", interval=0.5)
        assert str(jobs()["close-me"]["reason"]).startswith("withdrawn")
