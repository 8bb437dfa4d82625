"""The UI's tool detail shows a sandboxed tool's profile, with a real `toolrun serve --ui` and Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import jail_writable, open_folder
from test_ui_browser import (  # its fixtures too: the UI build, Playwright and Chromium
    Server,
    browser,
    playwright,
    start_server,
    stop_server,
    ui_dist,
)

__all__ = ["browser", "playwright", "ui_dist"]

CATALOG = """\
group: box
tools:
  - name: build
    public: true
    description: Builds in a sandbox.
    exec: echo built
    sandbox: {writable: [out], network: none}
  - name: escape
    public: true
    description: Tries to write outside its sandbox.
    exec: echo planted > /usr/planted
    sandbox: {writable: [out], network: none}
"""


@pytest.fixture(scope="module")
def sandbox_server(ui_dist: Path) -> Iterator[Server]:
    require_binary("bwrap")
    # A folder a root server's sandboxed tools (which run as `nobody`) can reach: pytest's are 0700.
    for directory in open_folder():
        jail_writable(directory / "out")
        catalog = write_catalog(directory, CATALOG)
        srv = start_server(directory / "home", {"TOOLRUN_UI_DIST": str(ui_dist)}, catalog)
        try:
            yield srv
        finally:
            stop_server(srv)


def test_the_tool_detail_shows_the_sandbox_and_a_call_runs_in_it(sandbox_server: Server, browser: object) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    try:
        page.goto(sandbox_server.url + "/ui/tools/box.build")
        expect(page.locator("#detail-heading")).to_have_text("box.build")
        out = os.path.realpath(sandbox_server.home.parent / "out")
        expect(page.get_by_test_id("sandbox")).to_have_text(f"default: no network; writes {out}")
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.get_by_test_id("result-text")).to_contain_text("built")
    finally:
        page.close()


def test_a_failed_sandboxed_call_says_which_profile_it_ran_in_and_what_that_withholds(
    sandbox_server: Server, browser: object
) -> None:
    page = browser.new_page()  # type: ignore[attr-defined]
    try:
        page.goto(sandbox_server.url + "/ui/tools/box.escape")
        expect(page.locator("#detail-heading")).to_have_text("box.escape")
        page.get_by_role("button", name="Run", exact=True).click()
        expect(page.get_by_test_id("result")).to_have_attribute("data-outcome", "failed")
        note = page.get_by_test_id("sandbox-note")
        expect(note).to_contain_text("It ran in the sandbox profile default, which withholds the network")
        expect(note).to_contain_text("writing outside /tmp and " + os.path.realpath(sandbox_server.home.parent / "out"))
    finally:
        page.close()
