"""Sandbox profiles in the catalog: `sandbox:` values, named profiles across files, `sandbox_default`.

These load catalogs only (no bwrap needed); test_sandbox.py runs the sandboxes themselves.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from support.catalogs import write_catalog
from toolrun.catalog import LoadOptions, check, load
from toolrun.errors import CatalogError
from toolrun.models import Sandbox

PROFILES = """\
sandboxes:
  build:
    writable: [out]
    tmp_size: 64M
  online:
    extends: build
    network: host
    readable: [/opt]
"""

TOOLS = """\
group: t
tools:
  - name: plain
    exec: echo hi
  - name: default
    exec: echo hi
    sandbox: true
  - name: named
    exec: echo hi
    sandbox: build
  - name: tuned
    exec: echo hi
    sandbox: {profile: online, writable: [more], network: none}
  - name: web
    curl: https://example.com
    sandbox: true
  - name: unboxed
    exec: echo hi
    sandbox: false
  - name: f
    fn: os:getcwd
"""


def _load(tmp_path: Path, tools: str = TOOLS, setting: str = "") -> dict[str, Sandbox | None]:
    profiles = write_catalog(tmp_path, PROFILES, "profiles.yaml")
    catalog = write_catalog(tmp_path, tools)
    loaded = load([profiles, catalog], options=LoadOptions(sandbox_default=setting))
    return {key: tool.sandbox for key, tool in loaded.tools.items()}


def test_sandbox_values_resolve_to_profiles_declared_in_another_file(tmp_path: Path) -> None:
    boxes = _load(tmp_path)
    out, more = str(tmp_path / "out"), str(tmp_path / "more")
    assert boxes["t.plain"] is None and boxes["t.unboxed"] is None and boxes["t.f"] is None
    assert boxes["t.default"] == Sandbox(profile="default", network="none")
    assert boxes["t.named"] == Sandbox(profile="build", network="none", writable=(out,), tmp_size=64 * 1024**2)
    # A tool's mapping adds to its profile (lists joined) and replaces what it sets (network).
    assert boxes["t.tuned"] == Sandbox(
        profile="online", network="none", readable=("/opt",), writable=(out, more), tmp_size=64 * 1024**2
    )
    # curl tools take the filesystem part; their network stays the host's unless a profile says otherwise.
    assert boxes["t.web"] == Sandbox(profile="default", network="host")


def test_sandbox_default_applies_to_exec_tools_that_say_nothing(tmp_path: Path) -> None:
    boxes = _load(tmp_path, setting="on")
    assert boxes["t.plain"] == Sandbox(profile="default", network="none")
    assert boxes["t.unboxed"] is None  # `sandbox: false` says otherwise
    assert boxes["t.f"] is None  # fn tools run in the server
    assert boxes["t.named"] is not None and boxes["t.named"].profile == "build"
    assert _load(tmp_path, setting="build")["t.plain"] == replace(boxes["t.named"])
    assert _load(tmp_path, setting="off")["t.plain"] is None


def test_a_sandbox_default_naming_no_profile_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="setting sandbox_default names sandbox profile 'nope'"):
        _load(tmp_path, setting="nope")


def test_validate_catalog_refuses_a_sandbox_on_an_fn_tool(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "group: t\ntools:\n  - name: f\n    fn: os:getcwd\n    sandbox: true\n")
    _, problems = check([catalog], options=LoadOptions(check=True))
    assert [(p.line, p.severity) for p in problems] == [(5, "error")]
    assert "fn tools run inside the server and cannot be sandboxed" in problems[0].message


def test_an_fn_tool_under_sandboxed_defaults_is_left_alone(tmp_path: Path) -> None:
    text = "group: t\ndefaults:\n  sandbox: true\ntools:\n"
    text += "  - name: f\n    fn: os:getcwd\n  - name: e\n    exec: 'true'\n"
    catalog = load([write_catalog(tmp_path, text)])
    assert catalog.tools["t.f"].sandbox is None
    assert catalog.tools["t.e"].sandbox == Sandbox(profile="default", network="none")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sandbox: nosuch", "sandbox profile 'nosuch' is not declared (known: build, default, online)"),
        ("sandbox: {network: lan}", "sandbox"),
        ("sandbox: {writable: out, extra: 1}", "sandbox"),
    ],
)
def test_bad_sandbox_values_are_catalog_errors(tmp_path: Path, text: str, message: str) -> None:
    tools = f"group: t\ntools:\n  - name: x\n    exec: 'true'\n    {text}\n"
    with pytest.raises(CatalogError, match=re.escape(message)):
        _load(tmp_path, tools)


def test_profiles_that_extend_in_a_circle_or_twice_declared_are_errors(tmp_path: Path) -> None:
    circle = "sandboxes:\n  a: {}\n  c: {extends: d}\n  d: {extends: c}\n"
    write_catalog(tmp_path, circle, "circle.yaml")
    write_catalog(tmp_path, "sandboxes:\n  a: {}\n", "again.yaml")
    tools = write_catalog(tmp_path, "group: t\ntools:\n  - name: x\n    exec: 'true'\n    sandbox: c\n")
    _, problems = check([tmp_path / "again.yaml", tmp_path / "circle.yaml", tools], options=LoadOptions(check=True))
    messages = " | ".join(p.message for p in problems)
    assert "sandbox profile 'a' is declared twice" in messages
    assert "extend each other in a circle" in messages
    with pytest.raises(CatalogError, match="built in"):
        load([write_catalog(tmp_path, "sandboxes:\n  default: {}\n", "d.yaml")])


def test_profiles_survive_the_catalog_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    profiles = write_catalog(tmp_path, PROFILES, "profiles.yaml")
    catalog = write_catalog(tmp_path, TOOLS)
    cold = load([profiles, catalog], options=LoadOptions(cache_dir=cache))
    warm = load([profiles, catalog], options=LoadOptions(cache_dir=cache))
    assert list(cache.iterdir())
    assert warm.tools["t.tuned"].sandbox == cold.tools["t.tuned"].sandbox is not None


def test_validate_catalog_warns_about_a_writable_path_missing_here(tmp_path: Path) -> None:
    catalog = write_catalog(
        tmp_path, "group: t\ntools:\n  - name: x\n    exec: 'true'\n    sandbox: {writable: [gone]}\n"
    )
    _, problems = check([catalog], options=LoadOptions(check=True))
    assert [p.severity for p in problems if "gone" in p.message] == ["warning"]
    assert f"writable path {tmp_path / 'gone'} does not exist here" in problems[-1].message
