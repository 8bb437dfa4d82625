"""State files are private to toolrun's user (issue 23.4): the data folder 0700, its files 0600, and
whatever an earlier version left wider is narrowed at start with one warning line."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.keys import create_key
from support.servers import clean_env, serve_catalog, toolrun_cli

CATALOG = "group: ops\ntools:\n  - name: hi\n    public: true\n    exec: printf hi\n"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(autouse=True)
def _lenient_umask() -> Iterator[None]:
    """The usual umask (022): without toolrun's care every file it creates is readable by all."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_fresh_data_folder_is_0700_and_every_state_file_in_it_0600(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = clean_env(home, {"SVC_WORKERS": "2", "SVC_RATE_LIMIT_ENABLED": "true"})
    create_key(env, "olga", "ops")  # toolrun.db
    server = serve_catalog(tmp_path, CATALOG, dict(env), home=home)
    with server.start():  # two workers keep their shared state in state.db
        assert server.alive()
    data = home / "data"
    assert mode(data) == 0o700
    files = sorted(p.name for p in data.iterdir())
    assert {"toolrun.db", "state.db"} <= set(files), files
    assert {name: oct(mode(data / name)) for name in files} == dict.fromkeys(files, "0o600")


def test_wider_modes_left_by_an_earlier_version_are_narrowed_at_start_with_one_warning_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    data = home / "data"
    data.mkdir(parents=True)
    for name in ("toolrun.db", "state.db"):  # as an earlier toolrun made them: 0644 in a 0755 folder
        with sqlite3.connect(data / name) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("CREATE TABLE t (x)")
    data.chmod(0o755)
    assert mode(data / "toolrun.db") == 0o644

    server = serve_catalog(tmp_path, CATALOG, {"SVC_WORKERS": "2"}, home=home)
    with server.start():
        log = server.log()
    assert mode(data) == 0o700
    assert mode(data / "toolrun.db") == mode(data / "state.db") == 0o600
    warnings = [line for line in log.splitlines() if "narrowed" in line]
    assert len(warnings) == 1, log
    assert "toolrun.db 0644 -> 0600" in warnings[0] and "state.db 0644 -> 0600" in warnings[0]
    assert "data/ 0755 -> 0700" in warnings[0]

    again = toolrun_cli("keys", "list", env=clean_env(home))  # already private: nothing to say
    assert again.returncode == 0, again.stderr
    assert "narrowed" not in again.stderr
