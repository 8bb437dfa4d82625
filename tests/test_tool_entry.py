"""A tool's entry: `ToolSpec.entry()` is plain data; whether this host enforces a sandbox is asked live.

The entry of a sandboxed tool says `enforced` (and `reason` when it is not). That is a fact about the host, not
about the catalog: it must follow the host (bwrap installed or repaired, user namespaces enabled) without a reload.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import open_folder
from toolrun.catalog import load
from toolrun.exec import sandbox
from toolrun.settings import Settings


@pytest.fixture
def opened() -> Iterator[Path]:
    yield from open_folder()


BOXED = "group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {network: host}\n"


def test_a_tool_entry_is_plain_data_and_runs_no_probe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(probe: bool = False) -> sandbox.Engine:
        raise AssertionError("ToolSpec.entry() asked the host about bwrap")

    monkeypatch.setattr(sandbox, "engine", no_probe)
    tool = load([str(write_catalog(tmp_path, BOXED))]).tools["t.boxed"]
    assert tool.entry()["sandbox"] == {"profile": "default", "network": "host", "readable": [], "writable": []}
    shown = tool.entry(sandbox_problem="bwrap is not installed")["sandbox"]
    assert shown["enforced"] is False and shown["reason"] == "bwrap is not installed"
    assert tool.entry(sandbox_problem="")["sandbox"]["enforced"] is True


def test_get_tool_says_enforced_as_soon_as_the_host_is_fixed(
    tmp_path: Path, opened: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the registry kept the first encoded entry, so `GET /tools/{key}` said "not enforced" until a reload."""
    from starlette.testclient import TestClient

    from toolrun.server.run import build_app

    real = require_binary("bwrap")
    fake = opened  # a folder every user may enter: a call runs bwrap as the tool's user
    bwrap = fake / "bwrap"
    bwrap.write_text("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
    bwrap.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:{os.environ['PATH']}")
    monkeypatch.setattr(sandbox, "RETRY_AFTER", 0.0)  # a failed probe is trusted for no time: the next asks again
    catalog = write_catalog(tmp_path, BOXED)
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    with TestClient(build_app(settings, [str(catalog)]), base_url="http://127.0.0.1") as client:
        before = client.get("/tools/t.boxed").json()["sandbox"]
        listed_before = client.get("/tools").json()[0]["sandbox"]
        bwrap.write_text(f'#!/bin/sh\nexec {real} "$@"\n')  # the host is fixed: bwrap works now
        after = client.get("/tools/t.boxed").json()["sandbox"]
        listed_after = client.get("/tools").json()[0]["sandbox"]
        called = client.post("/tools/t.boxed", content=b"{}", headers={"content-type": "application/json"})
    assert before["enforced"] is False and "uid map: Permission denied" in before["reason"]
    assert listed_before == before
    assert after["enforced"] is True and "reason" not in after
    assert listed_after == after
    assert called.status_code == 200 and called.text == "hi\n"
