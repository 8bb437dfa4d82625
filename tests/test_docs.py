"""The docs stay in step with the code: every setting documented, the README's set-up intact, links alive."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from toolrun.settings import SETTINGS, Setting

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"
SETUP_COMMANDS = ("make demo", "make test")


def _settings_table() -> dict[str, list[str]]:
    """Rows of the 'Every setting' table of docs/configuration.md, by setting name."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    section = text.split("## Every setting", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, list[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([a-z_.]+)`", cells[0]) if cells else None
        if match:
            rows[match.group(1)] = cells
    return rows


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_setting_is_documented_with_its_environment_variable(setting: Setting) -> None:
    rows = _settings_table()
    name, env = setting.name, setting.env
    assert name in rows, f"setting {name!r} is missing from docs/configuration.md"
    assert rows[name][1] == f"`{env}`", f"{name}: documented variable {rows[name][1]}, expected `{env}`"


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
def test_every_documented_default_matches_the_code(setting: Setting) -> None:
    rows = _settings_table()
    name, default = setting.name, setting.default
    assert f"`{json.dumps(default)}`" in rows[name][2], (
        f"{name}: default in docs is {rows[name][2]}, code has {default!r}"
    )


def test_configuration_doc_names_no_setting_that_does_not_exist() -> None:
    known = {s.name for s in SETTINGS}
    assert set(_settings_table()) <= known, sorted(set(_settings_table()) - known)


def test_configuration_doc_explains_precedence_and_toolrun_home() -> None:
    text = CONFIGURATION.read_text(encoding="utf-8")
    for needle in ("TOOLRUN_HOME", "config.toml", "SVC_CONFIG", "os.pathsep"):
        assert needle in text, needle


def _setup_section() -> str:
    text = README.read_text(encoding="utf-8")
    assert "\n## Set-up\n" in text, "README.md lost its '## Set-up' section"
    return text.split("\n## Set-up\n", 1)[1].split("\n## ", 1)[0]


def test_readme_setup_is_exactly_the_two_commands() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", _setup_section(), re.DOTALL)
    assert blocks, "README.md set-up has no command block"
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].splitlines() if line.split("#", 1)[0].strip()]
    assert commands == list(SETUP_COMMANDS)


def test_setup_commands_are_makefile_targets_and_ci_runs_the_test_one() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("demo", "test"):
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), f"Makefile has no {target!r} target"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert ci.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in ci
    run_lines = [line for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert any(re.fullmatch(r"(exec )?make test( </dev/null)?", line.strip()) for line in run_lines), run_lines


@pytest.mark.parametrize("doc", ["README.md", "docs/configuration.md", "bench/README.md"])
def test_relative_links_point_at_files_that_exist(doc: str) -> None:
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        assert (path.parent / target).exists(), f"{doc} links to {target}, which does not exist"


def _anchors(text: str) -> set[str]:
    """The anchors a Markdown page's headings get (GitHub's rule: lower case, punctuation dropped, spaces to
    hyphens, a repeated heading numbered)."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        heading = None if fenced else re.match(r"#{1,6} (.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


DOC_PAGES = sorted(
    str(p.relative_to(ROOT)) for p in [README, ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")]
)


@pytest.mark.parametrize("doc", DOC_PAGES)
def test_links_to_a_section_name_a_heading_that_exists(doc: str) -> None:
    path = ROOT / doc
    text = path.read_text(encoding="utf-8")
    for target, anchor in re.findall(r"\]\(([^)#\s]*)#([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        page = path.parent / target if target else path
        if page.suffix != ".md" or not page.exists():
            continue
        found = _anchors(page.read_text(encoding="utf-8"))
        assert anchor in found, f"{doc} links to {target}#{anchor}: no such heading"


def test_changelog_keeps_unreleased_on_top() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## (.+)$", text, re.MULTILINE)
    assert headings and headings[0] == "[Unreleased]", headings
    assert "### Added" in text


# Users have the docs, not the design spec: a doc states each rule itself. These catch "spec 2.6",
# "spec section 4.1", "§ 3", "the spec's DEBUG", "where the spec was silent".
SPEC_CITATION = re.compile(
    r"\bspec(?:ification)?\s+(?:section\s+)?\d|\bspec(?:ification)?\s+section\b|\bthe\s+spec(?:ification)?\b|§\s*\d",
    re.IGNORECASE,
)
USER_DOCS = sorted(
    {README, ROOT / "CHANGELOG.md", ROOT / "bench" / "README.md"}
    | set((ROOT / "docs").rglob("*.md"))
    | set((ROOT / "examples").rglob("*.md"))
)


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_user_docs_state_rules_instead_of_citing_a_spec(doc: Path) -> None:
    hits = [
        f"{doc.relative_to(ROOT)}:{number}: {line.strip()}"
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        if SPEC_CITATION.search(line)
    ]
    assert not hits, "users do not have the spec; state the rule itself:\n" + "\n".join(hits)


def test_the_spec_citation_check_catches_the_usual_forms() -> None:
    for text in ("follows spec 2.6", "spec section 4.1", "(the spec's DEBUG)", "where the spec was silent", "§ 2"):
        assert SPEC_CITATION.search(text), text
    for text in ("the OpenAPI document", "a per-tool request schema", "inspect the output"):
        assert not SPEC_CITATION.search(text), text


def _doc_commands() -> list[tuple[str, str]]:
    """(page, command line) of every `toolrun ...` the docs show in a shell block."""
    found = []
    for page in (README, *sorted((ROOT / "docs").glob("*.md"))):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"```(?:sh|bash|console|shell)\n(.*?)```", text, re.DOTALL):
            for line in block.replace("\\\n", " ").splitlines():
                line = line.strip().removeprefix("$ ")
                match = re.search(r"(?:^|[;&|]\s*|\$\()\s*(?:[A-Z_]+=\S+\s+)*toolrun\s(.*)", line)
                if match and not line.startswith("#"):
                    words = re.split(r"\s+#\s", match.group(1))[0]
                    found.append((page.name, re.split(r"\s[|&;>]|\)", words)[0]))
    return found


def test_every_command_the_docs_show_parses() -> None:
    """Each `toolrun ...` line of the README and docs/ is a command toolrun accepts (options, arguments, subcommands):
    parsed by the CLI itself, not run."""
    import shlex

    from typer.main import get_command

    from toolrun.cli import app
    from toolrun.cli.common import hoist_server_options

    commands = _doc_commands()
    assert len(commands) > 50
    failures = []
    for page, line in commands:
        command: Any = get_command(app)
        name, args, ctx = "toolrun", hoist_server_options(shlex.split(line)), None
        try:
            while True:
                ctx = command.make_context(name, list(args), parent=ctx)
                rest = [*ctx._protected_args, *ctx.args] if hasattr(command, "resolve_command") else []
                if not rest:
                    break
                name, command, args = command.resolve_command(ctx, rest)
        except Exception as exc:  # click's UsageError and its kin: what a user would see
            failures.append(f"{page}: toolrun {line}: {getattr(exc, 'message', exc)}")
    assert not failures, "\n".join(failures)
