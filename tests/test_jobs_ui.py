"""The approvals view in Debian's Chromium (Playwright) against a real `toolrun serve --ui`: alice runs a tool
that needs approval and sees its job waiting on the result panel; bob, an approver, sees who asked, the
parameters and the exact command, approves with a reason; alice's panel then shows the result."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

pytestmark = pytest.mark.timeout(240)

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


def signed_in_page(browser: Browser, key: str, axe: Path | None = None, **context: Any) -> Page:
    """A page of a fresh browser context signed in with the API `key` (the UI reads it from localStorage), with
    axe-core injected from `axe` when given; `context`: new_context's options (`color_scheme=...`)."""
    made = browser.new_context(**context)
    made.add_init_script(f"localStorage.setItem('toolrun.apiKey', {json.dumps(key)})")
    if axe is not None:
        made.add_init_script(path=axe)
    return made.new_page()


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
            return signed_in_page(browser, key, axe_script)

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


OPS_CATALOG = """\
group: ops
tools:
  - name: wipe
    description: Wipe a target.
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
    approval: required
    approvers: [oncall]
  - name: stream
    description: Print slowly, on both streams.
    exec: "echo out1; echo err1 >&2; sleep 300; echo out2"
    timeout: 310
    async: true
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_people_see_what_needs_them_and_follow_what_runs(
    browser: Browser,
    tmp_path: Path,
    axe_script: Path,  # noqa: F811 - the fixture imported above
    scheme: str,
) -> None:
    import httpx

    catalog = write_catalog(tmp_path, OPS_CATALOG)
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", catalog, {"SVC_UI_ENABLED": True}))
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        server.start()

        def page_as(key: str) -> Page:
            page = signed_in_page(browser, key, axe_script, color_scheme=scheme)
            page.emulate_media(reduced_motion="reduce")
            return page

        # While a call waits for a person, the button says so (not "Running…").
        mine = page_as(alice)
        mine.goto(server.url + "/ui/tools/ops.wipe")
        # Said before Run is pressed: on the card and on the detail.
        expect(mine.locator('.card[data-key="ops.wipe"] [data-hint="approval"]')).to_have_text("needs approval: oncall")
        expect(mine.locator('.card[data-key="ops.stream"] [data-hint="async"]')).to_have_text("runs as a job")
        expect(mine.locator('.detail-pane [data-hint="approval"]')).to_have_text("needs approval: oncall")
        mine.get_by_label("target", exact=True).fill("db1")
        mine.get_by_role("button", name="Run", exact=True).click()
        expect(mine.get_by_role("button", name="Waiting for approval…")).to_be_visible()
        expect(mine.get_by_test_id("running")).to_contain_text("Waiting for an approver")
        second = httpx.post(
            server.url + "/tools/ops.wipe", headers={"X-API-Key": alice}, json={"target": "db2"}
        ).json()["job"]

        # The approver sees the count on any page, in the header.
        theirs = page_as(bob)
        theirs.goto(server.url + "/ui/tools/ops.stream")
        badge = theirs.get_by_test_id("pending-count")
        expect(badge).to_have_text("2 awaiting your approval")
        assert_accessible(theirs, f"a tool page with the pending count ({scheme})")

        # The requester's own requests, with a Withdraw button; withdrawing one says so.
        home = page_as(alice)
        home.goto(server.url + "/ui/")
        requests = home.get_by_test_id("my-request")
        expect(requests).to_have_count(2)
        assert_accessible(home, f"your requests ({scheme})")
        home.locator(f'[data-job="{second}"]').get_by_role("button", name="Withdraw").click()
        expect(home.locator(f'[data-job="{second}"]')).to_have_attribute("data-status", "cancelled")
        expect(home.locator(f'[data-job="{second}"]')).to_contain_text("withdrawn by the requester")
        expect(badge).to_have_text("1 awaiting your approval", timeout=15000)

        # After the decision the approver reads how the call ended, not "approved, running".
        badge.click()
        theirs.get_by_role("button", name="Approve", exact=True).click()
        expect(theirs.get_by_test_id("approval-message")).to_have_text(
            re.compile(r"Job \S+ \(ops\.wipe\): approved; it ran and succeeded\."), timeout=15000
        )
        expect(mine.get_by_test_id("result-text")).to_have_text("wiped db1\n", timeout=15000)
        expect(badge).to_have_count(0, timeout=15000)

        # A running job's output shows as it comes, stderr too; cancelled, it keeps what it printed.
        mine.goto(server.url + "/ui/tools/ops.stream")
        mine.get_by_role("button", name="Run", exact=True).click()
        state = mine.get_by_test_id("job-state")
        expect(state).to_have_attribute("data-status", "running")
        expect(mine.get_by_test_id("stdout-text")).to_have_text("out1\n", timeout=15000)
        expect(mine.get_by_test_id("stderr-text")).to_have_text("err1\n")
        assert_accessible(mine, f"a running job's output ({scheme})")
        job = httpx.get(server.url + "/jobs?status=running", headers={"X-API-Key": alice}).json()[0]["job"]
        assert httpx.post(f"{server.url}/jobs/{job}/cancel", headers={"X-API-Key": alice}, json={}).status_code == 200
        expect(state).to_have_attribute("data-status", "cancelled", timeout=15000)
        expect(mine.get_by_test_id("stdout-text")).to_have_text("out1\n")
        expect(mine.get_by_test_id("job-detail")).to_contain_text("The call was cancelled")
        assert_accessible(mine, f"a cancelled job that kept its output ({scheme})")


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
            page = signed_in_page(browser, alice)
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
