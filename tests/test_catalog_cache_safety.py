"""The catalog cache holds data, never code (issue 34, item 3).

A tool that can write the cache folder (a `writable:` path over it, a tool without a sandbox, a
process of the server's user) must not get code run by the next load or reload: before, an entry
was a pickle, and `pickle.load` ran whatever the file said, as the server. Each test here plays
that tool: it writes the entries itself, then loads as the server and the CLI do.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from support.catalogs import generate_catalog, write_catalog
from support.sysusers import SERVER_USERS, as_user, server_user, shared_dir
from toolrun.catalog import LoadOptions, load
from toolrun.catalog import cache as catalog_cache

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
TEXT = "group: ops\ntools:\n  - name: a\n    exec: echo {{ n | quote }}\n    params: [{name: n}]\n"


class _Payload:
    """What a hostile tool writes: unpickling it runs `touch <flag>`."""

    def __init__(self, flag: Path) -> None:
        self.flag = flag

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.flag}",))


def _poison(cache: Path, flag: Path) -> list[Path]:
    """Overwrite every entry of the cache folder (whatever its name) with a pickle that runs code."""
    entries = [p for p in cache.iterdir() if p.is_file()]
    assert entries, "the first load stored nothing"
    blob = pickle.dumps(_Payload(flag))
    for entry in entries:
        entry.write_bytes(blob)
    return entries


def test_a_pickle_written_over_an_entry_runs_nothing_and_is_a_logged_miss(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write_catalog(tmp_path, TEXT)
    cache = tmp_path / "cache"
    flag = tmp_path / "pwned"
    first = load([path], ENV, LoadOptions(cache_dir=cache))
    _poison(cache, flag)
    with caplog.at_level("WARNING", logger="toolrun.catalog.cache"):
        again = load([path], ENV, LoadOptions(cache_dir=cache))
    assert not flag.exists(), "loading the catalog ran the code a tool wrote into the cache"
    assert again.tools == first.tools
    assert "catalog cache: ignoring the entry" in caplog.text
    # The miss rebuilt the entry: the next load is warm again, and still runs nothing.
    third = load([path], ENV, LoadOptions(cache_dir=cache))
    assert third.tools == first.tools and not flag.exists()


@pytest.mark.parametrize("kind", SERVER_USERS)
def test_the_cli_loading_a_poisoned_cache_runs_nothing(kind: str) -> None:
    """The real door: `toolrun call` twice under one TOOLRUN_HOME, the cache poisoned in between, as root and as an
    unprivileged user (whose own cache it is)."""
    user = server_user(kind)
    with shared_dir(user, "toolrun-cache-") as base:
        path = write_catalog(base, TEXT)
        path.chmod(0o644)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SVC_")}
        env["TOOLRUN_HOME"] = str(base / "home")
        argv = [*as_user(user), sys.executable, "-m", "toolrun", "call", "-c", str(path), "ops.a", "n=hi"]
        first = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False, cwd=base)
        assert first.returncode == 0 and first.stdout == "hi\n", first.stderr
        flag = base / "pwned"
        (base).chmod(0o777)  # the payload may write its flag as either user
        for entry in _poison(base / "home" / "cache" / "catalog", flag):
            if user is not None:
                os.chown(entry, *user)  # what the user's own tool would have written
        second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False, cwd=base)
        assert not flag.exists(), "toolrun call ran the code a tool wrote into the cache"
        assert second.returncode == 0 and second.stdout == "hi\n", second.stderr


def test_entries_are_0600_in_a_0700_folder(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    cache.chmod(0o755)  # a folder someone made loose: the next store closes it
    old = os.umask(0)
    try:
        load([write_catalog(tmp_path, TEXT)], ENV, LoadOptions(cache_dir=cache))
    finally:
        os.umask(old)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    entries = list(cache.iterdir())
    assert entries and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries)


@pytest.mark.parametrize(
    "damage",
    ["truncated", "a byte changed", "garbage", "a link", "writable by others", "a node reaching ahead"],
)
def test_a_damaged_entry_is_a_logged_miss(tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str) -> None:
    path = write_catalog(tmp_path, generate_catalog(5))
    cache = tmp_path / "cache"
    first = load([path], ENV, LoadOptions(cache_dir=cache))
    (entry,) = list(cache.iterdir())
    blob = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(blob[: len(blob) // 2])
    elif damage == "a byte changed":
        at = blob.index(b"echo")
        entry.write_bytes(blob[:at] + b"ecHo" + blob[at + 4 :])
    elif damage == "garbage":
        entry.write_bytes(os.urandom(200))
    elif damage == "a link":
        target = tmp_path / "elsewhere"
        target.write_bytes(blob)
        entry.unlink()
        entry.symlink_to(target)
    elif damage == "writable by others":
        entry.chmod(0o666)
    else:  # a well-formed entry with a right digest whose last node refers to a node after it
        head, _, body = blob.partition(b"\n")
        doc = json.loads(body)
        doc["nodes"].append(["T", len(doc["nodes"]) + 5])
        body = json.dumps(doc).encode()
        meta = json.loads(head)
        meta["sha256"] = hashlib.sha256(body).hexdigest()
        entry.write_bytes(json.dumps(meta).encode() + b"\n" + body)
    with caplog.at_level("WARNING", logger="toolrun.catalog.cache"):
        again = load([path], ENV, LoadOptions(cache_dir=cache))
    assert again.tools == first.tools
    assert "catalog cache: ignoring the entry" in caplog.text, damage


def test_the_format_holds_the_records_and_values_a_catalog_has_and_nothing_else() -> None:
    from toolrun.models import Param, ResourceLimits

    value = {
        "p": Param("n", "list", False, default=[1, 2.5, None, True, {"k": (1, "x")}], enum=((1,), "a")),
        "l": ResourceLimits(cpu=2),
        3: "int key",
    }
    assert catalog_cache.decode(catalog_cache.encode(value)) == value
    with pytest.raises(TypeError):
        catalog_cache.encode({"x": object()})
    for bad in ([["os.system", 0]], [["T", -1]], ["x", ["D", 0]], [{"a": 1}], [], "nodes"):
        with pytest.raises(ValueError):
            catalog_cache.decode(bad)  # type: ignore[arg-type]
