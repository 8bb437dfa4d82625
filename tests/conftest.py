"""Pytest fixtures and hooks only: every test gets its own TOOLRUN_HOME and no SVC_* settings from outside.

The helpers the tests share (servers, clients, catalogs, keys...) are in the `support` package (tests/support/).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "toolrun-home"
    monkeypatch.setenv("TOOLRUN_HOME", str(home))
    for name in list(os.environ):
        if name.startswith("SVC_"):
            monkeypatch.delenv(name)
    # The test extra installs toolrun[semantic]: search is lexical (no model process) unless a test asks for it
    monkeypatch.setenv("SVC_SEARCH_SEMANTIC", "false")
    return home
