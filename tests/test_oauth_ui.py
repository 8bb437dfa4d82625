"""The UI signs in with the OpenID provider (docs/oauth.md, "The browser UI"): the authorization code flow with
PKCE, driven in Debian's Chromium by Playwright against a real `toolrun serve --ui` and a real provider on
loopback (tests/support/pkce_provider.py: it checks the PKCE verifier and sends CORS headers). The token is
kept in the page's memory only; a wrong verifier, a forged state, a refused sign-in and a token toolrun
refuses are each shown in the dialog. /ui/oauth.json and the CSP are checked over plain HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.binaries import require_binary
from support.servers import ToolrunServer, free_port

pytest.importorskip("joserfc")
from support.pkce_provider import Grant, PkceProvider
from test_ui_results import assert_accessible, axe_script  # noqa: F401 - axe_script is a fixture

try:
    from playwright.sync_api import Browser, Page, Route, expect, sync_playwright
except ImportError:  # pragma: no cover - the [test] extra installs it
    if os.environ.get("CI") == "true":
        raise
    pytest.skip("playwright is not installed (pip install -e '.[test]')", allow_module_level=True)

pytestmark = pytest.mark.timeout(240)

CLIENT_ID = "toolrun-ui"
AUDIENCE = "toolrun-api"
CATALOG = """\
version: 1
group: pub
tools:
  - name: echo
    public: true
    description: Print a message back.
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
  - name: payroll
    group: finance
    description: Run the payroll (finance only).
    exec: printf paid
"""
STORAGE = "JSON.stringify([Object.entries(localStorage), Object.entries(sessionStorage)])"


@dataclass
class Setup:
    provider: PkceProvider
    server: ToolrunServer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from test_ui_browser import build_ui

    tmp = tmp_path_factory.mktemp("oauth-ui")
    catalog = tmp / "tools.yaml"
    catalog.write_text(CATALOG, encoding="utf-8")
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    with PkceProvider(CLIENT_ID, origin + "/ui/", AUDIENCE, cors_origins=[origin], groups=["finance"]) as provider:
        settings = {
            "SVC_OAUTH_ISSUER": provider.url,
            "SVC_OAUTH_AUDIENCE": AUDIENCE,
            "SVC_OAUTH_UI_CLIENT_ID": CLIENT_ID,
            "SVC_UI_ENABLED": True,
            "TOOLRUN_UI_DIST": str(build_ui()),
        }
        with ToolrunServer(tmp / "server", catalog, settings, port=port) as server:
            server.start()
            yield Setup(provider, server)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    from test_ui_browser import CHROMIUM_ARGS

    chromium = require_binary("chromium")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Browser, setup: Setup) -> Iterator[Page]:
    from test_ui_browser import CSP_PROBE

    setup.provider.deny = False
    setup.provider.audience = AUDIENCE
    setup.provider.opaque_access_token = False
    setup.provider.lifetime = 300
    context = browser.new_context(base_url=setup.server.url)
    context.add_init_script(CSP_PROBE)
    page = context.new_page()
    page.set_default_timeout(20000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    expect.set_options(timeout=20000)
    try:
        yield page
        assert errors == []
        assert page.evaluate("window.__csp || []") == [], "the sign-in must run under the strict CSP"
    finally:
        expect.set_options(timeout=5000)
        context.close()


def open_dialog(page: Page, path: str = "/ui/") -> Any:
    page.goto(path)
    expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")
    page.get_by_role("button", name="Sign in", exact=True).click()
    return page.get_by_role("dialog", name="Sign in")


def test_the_ui_signs_in_with_the_provider_and_keeps_the_token_in_memory_only(setup: Setup, page: Page) -> None:
    dialog = open_dialog(page, "/ui/tools/finance.payroll")
    button = dialog.get_by_role("button", name="Sign in with 127.0.0.1:")
    with page.expect_request(lambda r: r.url.startswith(setup.provider.url + "/token")) as exchange:
        button.click()
    form = exchange.value.post_data or ""
    assert "code_verifier=" in form and "client_secret" not in form  # a public client: PKCE, no secret
    expect(page.get_by_test_id("username")).to_have_text("uma")
    expect(page.get_by_test_id("groups")).to_contain_text("finance")
    # Back where the sign-in started, with the code and state gone from the address bar.
    assert page.url == setup.server.url + "/ui/tools/finance.payroll"
    page.get_by_role("button", name="Run", exact=True).click()
    expect(page.get_by_test_id("result-text")).to_have_text("paid")
    access_token = setup.provider.issued[-2]
    stored = page.evaluate(STORAGE)
    assert access_token not in stored and setup.provider.issued[-1] not in stored, stored
    assert "toolrun.oauth" not in stored  # the state and verifier were only for the round trip
    # Memory only: a reload is anonymous again.
    page.reload()
    expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")


def test_a_wrong_verifier_is_refused_by_the_provider_and_shown(setup: Setup, page: Page) -> None:
    def tamper(route: Route) -> None:
        body = route.request.post_data or ""
        route.continue_(post_data=body.replace("code_verifier=", "code_verifier=x"))

    page.route(setup.provider.url + "/token", tamper)
    dialog = open_dialog(page)
    answers = len(setup.provider.token_answers)
    dialog.get_by_role("button", name="Sign in with").click()
    expect(dialog.get_by_role("alert")).to_contain_text("the PKCE code_verifier does not match")
    assert setup.provider.token_answers[answers][0] == 400
    expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")


def test_a_state_mismatch_is_shown_and_the_code_is_not_exchanged(setup: Setup, page: Page) -> None:
    def forge(route: Route) -> None:
        route.continue_(url=route.request.url.replace("state=", "state=forged"))

    page.route(setup.provider.url + "/authorize*", forge)
    dialog = open_dialog(page)
    answers = len(setup.provider.token_answers)
    dialog.get_by_role("button", name="Sign in with").click()
    expect(dialog.get_by_role("alert")).to_contain_text("state mismatch")
    assert len(setup.provider.token_answers) == answers
    assert "code=" not in page.url and "state=" not in page.url


def test_a_refused_sign_in_and_a_token_toolrun_refuses_are_shown(setup: Setup, page: Page) -> None:
    setup.provider.deny = True
    dialog = open_dialog(page)
    dialog.get_by_role("button", name="Sign in with").click()
    expect(dialog.get_by_role("alert")).to_contain_text("access_denied (the user said no)")
    setup.provider.deny = False
    setup.provider.audience = "someone-else"  # the access token is not meant for toolrun
    dialog.get_by_role("button", name="Sign in with").click()  # again, from the dialog the error is shown in
    expect(dialog.get_by_role("alert")).to_contain_text(
        "toolrun refused the token: the token is not meant for this server"
    )
    expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")


def test_with_an_opaque_access_token_the_ui_sends_the_id_token(setup: Setup, page: Page) -> None:
    setup.provider.opaque_access_token = True
    dialog = open_dialog(page)
    with page.expect_request(lambda r: r.url.endswith("/whoami")) as check:
        dialog.get_by_role("button", name="Sign in with").click()
    assert check.value.headers["authorization"] == f"Bearer {setup.provider.issued[-1]}"  # the ID token
    # Its aud is the client id, not this server's oauth_audience: refused, and the dialog says why.
    expect(dialog.get_by_role("alert")).to_contain_text("not meant for this server (aud)")


def test_an_expired_sign_in_ends_with_a_notice(setup: Setup, page: Page) -> None:
    setup.provider.lifetime = 3
    dialog = open_dialog(page)
    dialog.get_by_role("button", name="Sign in with").click()
    expect(page.get_by_test_id("username")).to_have_text("uma")
    expect(page.locator(".banner")).to_contain_text("has expired: sign in again", timeout=15000)
    expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_sign_in_dialog(
    setup: Setup,
    browser: Browser,
    axe_script: Path,  # noqa: F811 - the fixture imported above
    scheme: str,
) -> None:
    context = browser.new_context(base_url=setup.server.url, color_scheme=scheme)  # type: ignore[arg-type]
    context.add_init_script(path=axe_script)
    try:
        page = context.new_page()
        page.emulate_media(reduced_motion="reduce")
        dialog = open_dialog(page)
        expect(dialog.get_by_role("button", name="Sign in with")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("data-theme", scheme)
        assert_accessible(page, f"sign-in dialog ({scheme})")
        setup.provider.deny = True  # the dialog with an error in it
        dialog.get_by_role("button", name="Sign in with").click()
        expect(dialog.get_by_role("alert")).to_be_visible()
        assert_accessible(page, f"sign-in dialog with an error ({scheme})")
    finally:
        context.close()
        setup.provider.deny = False


# -- the server side: /ui/oauth.json and the CSP ------------------------------------------------------------


def test_oauth_json_tells_the_ui_the_provider_and_the_csp_allows_only_its_origin(setup: Setup) -> None:
    answer = httpx.get(setup.server.url + "/ui/oauth.json")
    assert answer.status_code == 200
    assert answer.json() == {
        "issuer": setup.provider.url,
        "provider": setup.provider.url.removeprefix("http://"),
        "client_id": CLIENT_ID,
        "scopes": ["openid"],
        "authorization_endpoint": setup.provider.url + "/authorize",
        "token_endpoint": setup.provider.url + "/token",
    }
    csp = httpx.get(setup.server.url + "/ui/").headers["content-security-policy"]
    assert f"connect-src 'self' {setup.provider.url};" in csp
    assert "form-action 'self'" in csp and "default-src 'self'" in csp


def test_oauth_json_is_404_without_a_client_id_and_the_csp_stays_self_only() -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from toolrun.server.ui import ui_routes
    from toolrun.settings import Settings

    dist = {"TOOLRUN_UI_DIST": str(Path(__file__).resolve().parent.parent / "ui-dist")}
    for settings in (Settings(), Settings(oauth_issuer="https://login.example.com", oauth_audience=AUDIENCE)):
        client = TestClient(Starlette(routes=ui_routes(settings, dist)))
        off = client.get("/ui/oauth.json")
        assert off.status_code == 404 and "oauth_ui_client_id" in off.json()["error"]
        assert "connect-src 'self';" in client.get("/ui/").headers["content-security-policy"]


def test_a_provider_without_pkce_or_with_a_foreign_token_endpoint_is_a_503_that_says_why(tmp_path: Path) -> None:
    from toolrun.errors import BackendUnavailable
    from toolrun.server.ui import ProviderInfo
    from toolrun.settings import Settings

    with PkceProvider(CLIENT_ID, "http://127.0.0.1/ui/", AUDIENCE) as provider:
        settings = Settings(oauth_issuer=provider.url, oauth_audience=AUDIENCE, oauth_ui_client_id=CLIENT_ID)
        info = ProviderInfo(settings)
        original = provider.discovery
        provider.discovery = lambda: {**original(), "code_challenge_methods_supported": ["plain"]}  # type: ignore[method-assign]
        with pytest.raises(BackendUnavailable, match="does not support PKCE with S256"):
            info.discover()
        provider.discovery = lambda: {**original(), "token_endpoint": "https://elsewhere.example/token"}  # type: ignore[method-assign]
        with pytest.raises(BackendUnavailable, match="not on the issuer's origin"):
            info.discover()


def test_the_ui_client_id_needs_an_issuer_and_sane_values(tmp_path: Path) -> None:
    from toolrun.errors import UsageError
    from toolrun.settings import Settings

    def load(**env: str) -> Settings:
        return Settings.load(environ={"TOOLRUN_HOME": str(tmp_path), **env}, config_file=tmp_path / "none.toml")

    with pytest.raises(UsageError, match="oauth_ui_client_id from SVC_OAUTH_UI_CLIENT_ID: needs oauth_issuer"):
        load(SVC_OAUTH_UI_CLIENT_ID="ui")
    base = {"SVC_OAUTH_ISSUER": "http://127.0.0.1:1", "SVC_OAUTH_AUDIENCE": "a"}
    with pytest.raises(UsageError, match="without spaces"):
        load(**base, SVC_OAUTH_UI_CLIENT_ID="my ui")
    with pytest.raises(UsageError, match="cannot go in the UI's Content-Security-Policy"):
        load(**{**base, "SVC_OAUTH_ISSUER": "https://a.example;script-src*"}, SVC_OAUTH_UI_CLIENT_ID="ui")
    with pytest.raises(UsageError, match="'a b' is not a scope"):
        load(**base, SVC_OAUTH_UI_CLIENT_ID="ui", SVC_OAUTH_UI_SCOPES="openid,a b")
    assert load(**base, SVC_OAUTH_UI_CLIENT_ID="ui", SVC_OAUTH_UI_SCOPES="openid,toolrun:ops").oauth_ui_scopes == (
        "openid",
        "toolrun:ops",
    )


def test_requests_that_race_the_first_key_fetch_of_a_worker_wait_for_it(setup: Setup) -> None:
    """Right after signing in, the UI sends several requests at once; in a fresh worker the first one fetches
    the key set while the others must wait for it, not answer 401 "a key the issuer does not list"."""
    import asyncio
    import time as clock

    from toolrun.access.oauth import OAuthConfig, SigningKeys, TokenVerifier, fetch_json

    def slow_fetch(url: str) -> dict[str, Any]:
        clock.sleep(0.3)  # a provider a little slow to answer
        return fetch_json(url)

    setup.provider.audience = AUDIENCE
    config = OAuthConfig(issuer=setup.provider.url, audience=AUDIENCE)
    verifier = TokenVerifier(config, SigningKeys(config, fetch=slow_fetch))
    token = setup.provider.tokens(Grant(CLIENT_ID, setup.provider.redirect_uri, "", "openid"))["access_token"]

    async def main() -> list[str]:
        first = asyncio.create_task(verifier.identify(token))
        await asyncio.sleep(0.1)  # the first request's fetch is under way
        rest = [asyncio.create_task(verifier.identify(token)) for _ in range(3)]
        return [who.username for who in await asyncio.gather(first, *rest)]

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # a loop of its own: Playwright's sync API holds this thread's
        names = pool.submit(asyncio.run, main()).result()
    assert names == ["uma"] * 4
    assert verifier.keys.fetches == 1
