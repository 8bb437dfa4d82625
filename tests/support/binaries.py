"""System binaries a test needs (redis-server, chromium, bwrap, curl, nginx...)."""

from __future__ import annotations

import os
import shutil

import pytest


def require_binary(name: str) -> str:
    """Path of a system binary; skip when missing, but fail under CI=true (CI must install it)."""
    path = shutil.which(name)
    if path is None:
        message = f"{name} is not installed (the test command installs it: see .ci/run)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
