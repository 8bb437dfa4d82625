"""The UI's "Copy as curl", "Copy as toolrun call" and "Copy link" (in Chromium, against a real
`toolrun serve --ui`): each copied command is run for real (bash) and must give the same result as
the call made in the browser; the link opens the tool with its arguments filled in. The API key
never appears in what is copied."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from test_ui_browser import CSP_PROBE, App, Server, browser, playwright, start_server, stop_server, ui_dist  # noqa: F401 (fixtures)
from toolrun.access import Access

try:
    from playwright.sync_api import Browser, expect
except ImportError:  # pragma: no cover - the [test] extra installs it
    pytest.skip("playwright is not installed", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "tests" / "ui_catalog_share"
TOOLRUN = Path(sys.executable).parent / "toolrun"

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def server(ui_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:  # noqa: F811
    srv = start_server(tmp_path_factory.mktemp("share-server"), {"TOOLRUN_UI_DIST": str(ui_dist)}, CATALOG)
    try:
        srv.keys["ops"], _ = Access(srv.store()).create_key("olga", ["ops"])
        yield srv
    finally:
        stop_server(srv)


@pytest.fixture
def open_app(browser: Browser, server: Server) -> Iterator[Any]:  # noqa: F811
    apps: list[App] = []

    def make(key: str = "") -> App:
        context = browser.new_context(base_url=server.url, viewport={"width": 1280, "height": 900})
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
        context.add_init_script(CSP_PROBE)
        if key:
            context.add_init_script(f"localStorage.setItem('toolrun.apiKey', {json.dumps(key)})")
        page = context.new_page()
        page.set_default_timeout(8000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        app = App(page, context, server, [], errors)
        apps.append(app)
        return app

    yield make
    for app in apps:
        assert app.errors == [], app.errors
        assert app.csp_violations() == []
        app.context.close()


def copied(app: App, button: str) -> str:
    """Click a share button; the clipboard and the text shown must be the same."""
    app.page.get_by_role("button", name=button, exact=True).click()
    shown = app.page.get_by_test_id("share-text")
    expect(app.page.locator(".share-output [role=status]")).to_have_text("Copied to the clipboard:")
    text = str(shown.text_content())
    assert app.page.evaluate("navigator.clipboard.readText()") == text
    return text


def bash(command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, **(env or {})}
    full.pop("TOOLRUN_API_KEY", None)
    full.update(env or {})
    return subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, timeout=60, check=False, env=full, cwd=ROOT
    )


def run_toolrun(command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The copied `toolrun --url ORIGIN call ...`, run as is (the remote CLI against the live server)."""
    assert command.startswith("toolrun --url "), command
    path = f"{TOOLRUN.parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return bash(command, {**(env or {}), "PATH": path})


def fill_echo_form(app: App) -> None:
    page = app.page
    page.get_by_label("msg", exact=True).fill('it\'s "quoted" $HOME `x` \\ ünï')
    page.get_by_label("n", exact=True).fill("7")
    page.get_by_label("ratio", exact=True).fill("2.5")
    page.get_by_label("flag", exact=True).check()
    tags = page.get_by_label("tags", exact=True)
    for item in ("a b", "4", '"4"'):
        tags.fill(item)
        tags.press("Enter")
    page.locator("[data-param=meta] input").nth(0).fill("k'ey")
    page.locator("[data-param=meta] input").nth(1).fill('{"x": [1, 2]}')


def test_copy_as_curl_and_toolrun_reproduce_the_call_and_the_link_refills_the_form(
    open_app: Any, server: Server
) -> None:
    require_binary("curl")
    app = open_app()
    app.open_tool("share.echo")
    fill_echo_form(app)
    app.run()
    in_browser = json.loads(app.result_text())
    assert in_browser["msg"] == 'it\'s "quoted" $HOME `x` \\ ünï'
    assert in_browser["n"] == 7 and in_browser["ratio"] == 2.5 and in_browser["flag"] is True
    assert in_browser["tags"] == ["a b", 4, "4"] and in_browser["meta"] == {"k'ey": {"x": [1, 2]}}

    curl = copied(app, "Copy as curl")
    assert curl.startswith(f"curl -sS -X POST {server.url}/tools/share.echo -H 'Content-Type: application/json' ")
    assert "X-API-Key" not in curl, "anonymous: no key header"
    done = bash(curl)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == in_browser

    command = copied(app, "Copy as toolrun call")
    assert command.startswith(f"toolrun --url {server.url} call share.echo ")
    done = run_toolrun(command)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == in_browser

    link = copied(app, "Copy link")
    assert link.startswith(f"{server.url}/ui/tools/share.echo?args=")
    other = open_app()
    other.page.goto(link)
    expect(other.page.locator("#detail-heading")).to_have_text("share.echo")
    expect(other.page.get_by_label("msg", exact=True)).to_have_value('it\'s "quoted" $HOME `x` \\ ünï')
    expect(other.page.get_by_label("n", exact=True)).to_have_value("7")
    expect(other.page.get_by_label("flag", exact=True)).to_be_checked()
    expect(other.page.locator("[data-param=tags] .chip-text")).to_have_text(["a b", "4", '"4"'])
    other.run()
    assert json.loads(other.result_text()) == in_browser


def test_signed_in_commands_name_the_key_variable_never_the_key(open_app: Any, server: Server) -> None:
    require_binary("curl")
    key = server.keys["ops"]
    app = open_app(key)
    app.open_tool("share.private")
    app.page.get_by_label("note", exact=True).fill("from the ui")
    app.run()
    in_browser = json.loads(app.result_text())
    assert in_browser == {"note": "from the ui"}

    curl = copied(app, "Copy as curl")
    assert key not in curl
    assert '-H "X-API-Key: $TOOLRUN_API_KEY"' in curl
    assert bash(curl).stdout != json.dumps(in_browser), "without the variable set the call is refused"
    done = bash(curl, {"TOOLRUN_API_KEY": key})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == in_browser

    command = copied(app, "Copy as toolrun call")
    assert key not in command
    refused = run_toolrun(command)
    assert refused.returncode != 0, "it runs on the server: without the key the private tool is not found"
    done = run_toolrun(command, {"TOOLRUN_API_KEY": key})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == in_browser

    link = copied(app, "Copy link")
    assert key not in link


def test_a_broken_link_opens_the_tool_with_its_defaults(open_app: Any, server: Server) -> None:
    app = open_app()
    app.goto("/ui/tools/share.echo?args=%7Bnot-json")
    expect(app.page.locator("#detail-heading")).to_have_text("share.echo")
    expect(app.page.get_by_label("msg", exact=True)).to_have_value("")
    app.goto('/ui/tools/share.echo?args={"msg":"hi","nope":1}')
    expect(app.page.get_by_label("msg", exact=True)).to_have_value("hi")
    assert shutil.which("bash")


# -- constraints: the form shows what the tool entry declares ---------------------------------------------


def test_the_form_shows_the_constraints_of_the_tool_entry(open_app: Any, server: Server) -> None:
    entry = {p["name"]: p for p in server.api("/tools/share.tune")["params"]}
    assert entry["mode"]["enum"] == ["fast", "slow", "two words"] and entry["level"]["min"] == 1
    app = open_app()
    app.open_tool("share.tune")
    page = app.page

    # enum: a select of exactly the declared values (plus "not set" when optional), the default chosen.
    mode = page.get_by_label("mode", exact=True)
    assert mode.evaluate("e => e.tagName") == "SELECT"
    assert mode.locator("option").all_inner_texts() == ["(not set)", *entry["mode"]["enum"]]
    expect(mode.locator("option:checked")).to_have_text("fast")
    speed = page.get_by_label("speed", exact=True)
    assert speed.locator("option").all_inner_texts() == ["(not set)", "1", "2", "3"]

    # min/max on numbers: the input's bounds and a hint; outside them nothing is sent.
    level = page.get_by_label("level", exact=True)
    expect(level).to_have_attribute("min", "1")
    expect(level).to_have_attribute("max", "5")
    expect(page.locator("[data-param=level] [data-testid=rules]")).to_have_text("Between 1 and 5.")
    expect(page.locator("[data-param=ratio] [data-testid=rules]")).to_have_text("At least 0.5.")
    # pattern: the input's pattern attribute and a visible hint; min/max are lengths on a str.
    name = page.get_by_label("name", exact=True)
    expect(name).to_have_attribute("pattern", "[a-z]+")
    expect(name).to_have_attribute("maxlength", "8")
    expect(page.locator("[data-param=name] [data-testid=rules]")).to_have_text("2 to 8 characters. Must match [a-z]+")
    for param in entry:
        rules_id = page.locator(f"[data-param={param}] [data-testid=rules]")
        if rules_id.count():
            described = page.locator(f"[data-param={param}] :is(input, select)").first.get_attribute("aria-describedby")
            assert rules_id.get_attribute("id") in (described or ""), param

    calls: list[str] = []
    page.on("request", lambda r: calls.append(r.url) if r.method == "POST" else None)
    level.fill("9")
    app.run()
    expect(page.locator("[data-param=level] .field-error")).to_have_text("Must be at most 5.")
    expect(level).to_be_focused()
    assert calls == []

    # The server checks the pattern (a Python regex); its 400 names the constraint.
    level.fill("3")
    name.fill("Bad1")
    app.run()
    expect(page.get_by_test_id("error").locator(".pill")).to_have_text("400 Bad Request")
    expect(page.get_by_test_id("error-text")).to_contain_text("name")

    name.fill("okay")
    speed.select_option("2")
    mode.select_option("two words")
    app.run()
    assert json.loads(app.result_text()) == {"mode": "two words", "speed": 2, "level": 3, "name": "okay"}


# -- tool hints (annotations) and secret params -----------------------------------------------------------


def test_hints_show_as_badges_and_a_destructive_tool_asks_before_it_runs(open_app: Any, server: Server) -> None:
    assert server.api("/tools/hints.wipe")["annotations"] == {
        "title": "Wipe a scratch file",
        "destructive": True,
        "idempotent": True,
    }
    app = open_app()
    page = app.page
    app.goto("/ui/?q=hints")
    card = page.locator('.card[data-key="hints.wipe"]')
    expect(card.locator(".hint")).to_have_text(["destructive", "idempotent"])
    expect(page.locator('.card[data-key="hints.peek"] .hint')).to_have_text(["read-only", "open world"])

    app.open_tool("hints.peek")
    expect(page.get_by_test_id("tool-title")).to_have_text("Peek at a value")
    expect(page.locator(".detail-head .hint")).to_have_text(["read-only", "open world"])
    app.run()
    assert app.result_text() == "peeked", "a read-only tool runs without asking"

    app.open_tool("hints.wipe")
    expect(page.get_by_test_id("tool-title")).to_have_text("Wipe a scratch file")
    expect(page.locator(".detail-head .hint-danger")).to_have_text("destructive")
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.get_by_label("path", exact=True).fill("/tmp/x")
    app.run()
    confirm = page.get_by_test_id("confirm")
    expect(confirm).to_contain_text("hints.wipe is marked destructive")
    expect(confirm.get_by_role("button", name="Don't run")).to_be_focused()
    confirm.get_by_role("button", name="Don't run").click()
    expect(confirm).to_be_hidden()
    page.get_by_label("path", exact=True).press("Control+Enter")
    expect(confirm).to_be_visible()
    page.wait_for_timeout(300)
    assert posts == [], "nothing is sent before the confirmation"
    confirm.get_by_role("button", name="Run it").click()
    assert app.result_text() == "wiped /tmp/x"
    assert len(posts) == 1


def test_a_secret_param_is_a_password_field_and_never_copied_or_linked(open_app: Any, server: Server) -> None:
    require_binary("curl")
    secret = "s3cr3t-Value_42"
    entry = {p["name"]: p for p in server.api("/tools/hints.login")["params"]}
    assert entry["token"].get("secret") is True and "secret" not in entry["user"]
    app = open_app()
    page = app.page
    app.open_tool("hints.login")
    token = page.get_by_label("token", exact=True)
    expect(token).to_have_attribute("type", "password")
    expect(page.locator("[data-param=token] .secret-badge")).to_have_text("secret")
    page.get_by_label("user", exact=True).fill("ada")
    token.fill(secret)
    app.run()
    in_browser = json.loads(app.result_text())
    assert in_browser == {"user": "ada", "token": secret}

    curl = copied(app, "Copy as curl")
    assert secret not in curl and '"$TOOLRUN_SECRET_TOKEN"' in curl
    done = bash(curl, {"TOOLRUN_SECRET_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == in_browser

    command = copied(app, "Copy as toolrun call")
    assert secret not in command and 'token="$TOOLRUN_SECRET_TOKEN"' in command
    done = run_toolrun(command, {"TOOLRUN_SECRET_TOKEN": secret})
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == in_browser

    link = copied(app, "Copy link")
    assert secret not in link and "token" not in link
    # A link naming the secret param does not fill it.
    app.goto('/ui/tools/hints.login?args={"user":"bo","token":"planted"}')
    expect(page.get_by_label("user", exact=True)).to_have_value("bo")
    expect(page.get_by_label("token", exact=True)).to_have_value("")
