"""Red team 11 on the UI's approvals view (issue 34's kind, a hostile caller): what an approver reads is what runs.

`toolrun jobs show` writes a requester's bidi override (U+202E) and other control or format characters as `\\u202e`,
so an argument cannot make the command an approver reads look like another. The UI's approvals view showed the
parameters and the command as they came: in the browser a U+202E in `target` turned the rest of the command around
(`echo wiped 'prod'` read by the approver, `'dorp` in fact), and U+2066/U+2069 isolates could reorder arguments. Now
the view writes them out as the CLI does. The test failed on the UI before its fix (the raw U+202E was on the page).
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import Processes, ToolrunServer

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # pragma: no cover - the [test] extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed", allow_module_level=True)

from test_jobs_ui import signed_in_page
from test_ui_browser import CHROMIUM_ARGS, build_ui

pytestmark = pytest.mark.timeout(240)

CATALOG = """\
group: ops
tools:
  - name: wipe
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
    approval: required
    approvers: [oncall]
"""


def test_the_approvals_view_writes_out_bidi_controls_and_control_characters(tmp_path: Path) -> None:
    chromium = require_binary("chromium")
    build_ui()
    target = "\u202edorp\u2066x\u2069\x1b[2J"
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", write_catalog(tmp_path, CATALOG), {"SVC_UI_ENABLED": True}))
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        server.start()
        asked = httpx.post(f"{server.url}/tools/ops.wipe", headers={"X-API-Key": alice}, json={"target": target})
        assert asked.status_code == 202, asked.text
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = signed_in_page(browser, bob)
                page.goto(server.url + "/ui/")
                command = page.get_by_test_id("approval-command")
                expect(command).to_have_count(1)
                shown = command.inner_text() + page.get_by_test_id("approval-args").inner_text()
            finally:
                browser.close()
    for char in ("\u202e", "\u2066", "\u2069", "\x1b"):
        assert char not in shown, f"raw U+{ord(char):04X} shown to the approver: {shown!r}"
    assert "echo wiped '\\u202edorp\\u2066x\\u2069\\x1b[2J'" in shown, shown


def test_a_reason_is_shown_to_the_requester_with_its_bidi_controls_written_out(tmp_path: Path) -> None:
    """The other way round: an approver's reason (any Unicode but control characters) reached the requester's
    "Your requests" list as it came, so a U+202E turned the line around ("denied by bob: ..."). The test failed on
    the UI before its fix (the raw U+202E was on the page)."""
    chromium = require_binary("chromium")
    build_ui()
    with Processes() as procs:
        server = procs.add(ToolrunServer(tmp_path / "srv", write_catalog(tmp_path, CATALOG), {"SVC_UI_ENABLED": True}))
        alice, bob = create_key(server.env, "alice", "ops"), create_key(server.env, "bob", "oncall")
        server.start()
        job = httpx.post(f"{server.url}/tools/ops.wipe", headers={"X-API-Key": alice}, json={"target": "db1"}).json()
        denied = httpx.post(
            f"{server.url}/jobs/{job['job']}/deny", headers={"X-API-Key": bob}, json={"reason": "no\u202e yaw"}
        )
        assert denied.status_code == 200, denied.text
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = signed_in_page(browser, alice)
                page.goto(server.url + "/ui/")
                item = page.get_by_test_id("my-request")
                expect(item).to_have_count(1)
                expect(item).to_contain_text("denied by bob")
                shown = item.inner_text()
            finally:
                browser.close()
    assert "\u202e" not in shown, shown
    assert "no\\u202e yaw" in shown, shown
