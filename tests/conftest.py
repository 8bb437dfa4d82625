"""Shared fixtures: every test gets its own TOOLRUN_HOME and no SVC_* settings from outside."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


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


def require_binary(name: str) -> str:
    """Path of a system binary; skip when missing, but fail under CI=true (CI must install it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (the test command installs it: see .ci/run)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def write_catalog(directory: Path, text: str, name: str = "tools.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path
