"""The /ui routes in-process (spec 4.1.1, 4.1.2): off by default, on by setting, env or flag; a built
app served with a strict CSP, caching and an SPA fallback; enabled but never built -> 404 and one
warning, and the server still starts. Fast: a tiny fake build, no Node.js, no browser
(tests/test_ui_browser.py drives the real build in Chromium)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from toolrun.server import ui
from toolrun.server.run import build_app
from toolrun.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "tests" / "ui_catalog"
BASE_URL = "http://127.0.0.1"
INDEX = '<!doctype html><html><head><script type="module" src="/ui/assets/app-3f9a1c.js"></script></head></html>\n'
ASSET = "console.log('app');\n"

REQUIRED_CSP = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self' data:",
    "connect-src": "'self'",
    "frame-ancestors": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
}


class Records(logging.Handler):
    """Collects toolrun.ui records directly (the toolrun logger may not propagate to the root)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == logging.WARNING]


@pytest.fixture
def ui_log() -> Iterator[Records]:
    handler = Records()
    logger = logging.getLogger("toolrun.ui")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@pytest.fixture
def fake_dist(tmp_path: Path) -> Path:
    dist = tmp_path / "ui-dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text(INDEX, encoding="utf-8")
    (dist / "assets" / "app-3f9a1c.js").write_text(ASSET, encoding="utf-8")
    (dist / "favicon.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("do not serve", encoding="utf-8")
    return dist


def client_for(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    dist: Path | None,
    flags: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> TestClient:
    if dist is not None:
        monkeypatch.setenv(ui.ENV_VAR, str(dist))
    env = {"TOOLRUN_HOME": str(tmp_path / "home"), **(environ or {})}
    settings = Settings.load(flags=dict(flags or {}), environ=env)
    return TestClient(build_app(settings, [str(CATALOG)]), base_url=BASE_URL)


def csp_of(response: Any) -> dict[str, str]:
    policy = response.headers["content-security-policy"]
    pairs = (part.strip().split(None, 1) for part in policy.split(";") if part.strip())
    return {p[0]: p[1] if len(p) > 1 else "" for p in pairs}


def assert_security_headers(response: Any) -> None:
    csp = csp_of(response)
    for directive, value in REQUIRED_CSP.items():
        assert csp.get(directive) == value, (directive, response.headers["content-security-policy"])
    assert "unsafe-inline" not in response.headers["content-security-policy"]
    assert "unsafe-eval" not in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"


# -- off by default, on by setting / env / flag ---------------------------------------------------


def test_ui_is_off_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path, ui_log: Records
) -> None:
    with client_for(tmp_path, monkeypatch, fake_dist) as client:
        assert client.get("/ui").status_code == 404
        assert client.get("/ui/").status_code == 404
        assert client.get("/healthz").status_code == 200
    assert ui_log.records == [], "the UI module must not even look for a build when the UI is off"


def test_svc_ui_enabled_true_turns_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path) -> None:
    with client_for(tmp_path, monkeypatch, fake_dist, environ={"SVC_UI_ENABLED": "true"}) as client:
        response = client.get("/ui")
    assert response.status_code == 200
    assert response.text == INDEX


def test_the_ui_enabled_setting_turns_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path) -> None:
    # `toolrun serve --ui` passes this flag.
    with client_for(tmp_path, monkeypatch, fake_dist, flags={"ui_enabled": True}) as client:
        assert client.get("/ui/").status_code == 200


def test_svc_ui_enabled_false_keeps_it_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path) -> None:
    with client_for(tmp_path, monkeypatch, fake_dist, environ={"SVC_UI_ENABLED": "false"}) as client:
        assert client.get("/ui").status_code == 404


# -- enabled but never built ----------------------------------------------------------------------


def test_enabled_but_not_built_answers_404_logs_one_warning_and_still_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ui_log: Records
) -> None:
    empty = tmp_path / "never-built"
    empty.mkdir()
    with client_for(tmp_path, monkeypatch, empty, flags={"ui_enabled": True}) as client:
        for path in ("/ui", "/ui/", "/ui/index.html", "/ui/tools/demo.types", "/ui/assets/index-abc.js"):
            response = client.get(path)
            assert response.status_code == 404, path
            assert "never built" in response.text
            assert response.headers["x-content-type-options"] == "nosniff"
        assert client.get("/healthz").status_code == 200
        assert client.get("/tools").status_code == 200
    warnings = ui_log.warnings()
    assert len(warnings) == 1, warnings
    assert "never built" in warnings[0] and str(empty) in warnings[0]


def test_a_missing_dist_directory_is_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ui_log: Records
) -> None:
    # Starlette's StaticFiles raises for a missing directory; the UI checks first.
    with client_for(tmp_path, monkeypatch, tmp_path / "does-not-exist", flags={"ui_enabled": True}) as client:
        assert client.get("/ui").status_code == 404
    assert len(ui_log.warnings()) == 1


# -- the built app ----------------------------------------------------------------------------------


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_dist: Path) -> Iterator[TestClient]:
    with client_for(tmp_path, monkeypatch, fake_dist, flags={"ui_enabled": True}) as client:
        yield client


@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/index.html"])
def test_index_is_served_with_a_strict_csp_and_no_cache(built: TestClient, path: str) -> None:
    response = built.get(path)
    assert response.status_code == 200
    assert response.text == INDEX
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    assert_security_headers(response)


def test_hashed_assets_are_immutable_with_the_right_type(built: TestClient) -> None:
    response = built.get("/ui/assets/app-3f9a1c.js")
    assert response.status_code == 200
    assert response.text == ASSET
    assert response.headers["content-type"].startswith("text/javascript")
    assert response.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert_security_headers(response)


def test_a_missing_asset_is_404_not_the_html_page(built: TestClient) -> None:
    response = built.get("/ui/assets/app-000000.js")
    assert response.status_code == 404
    assert "<html" not in response.text
    assert_security_headers(response)


@pytest.mark.parametrize("path", ["/ui/tools/demo.types", "/ui/tools/ops.restart?q=x&offset=10", "/ui/some/deep/path"])
def test_unknown_app_paths_fall_back_to_index(built: TestClient, path: str) -> None:
    response = built.get(path)
    assert response.status_code == 200
    assert response.text == INDEX
    assert response.headers["cache-control"] == "no-cache"
    assert_security_headers(response)


def test_other_files_of_the_build_are_served_as_themselves(built: TestClient) -> None:
    response = built.get("/ui/favicon.svg")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/svg+xml"
    assert response.headers["cache-control"] == "no-cache"


@pytest.mark.parametrize(
    "path",
    [
        "/ui/../secret.txt",
        "/ui/%2e%2e/secret.txt",
        "/ui/assets/../../secret.txt",
        "/ui/assets/%2e%2e/%2e%2e/secret.txt",
        "/ui/assets/..%2f..%2fsecret.txt",
        "/ui/..%5csecret.txt",
    ],
)
def test_nothing_outside_the_build_is_ever_served(built: TestClient, path: str) -> None:
    response = built.get(path)
    assert "do not serve" not in response.text
    assert response.status_code in (200, 404)


def test_head_and_conditional_requests(built: TestClient) -> None:
    head = built.head("/ui/")
    assert head.status_code == 200
    assert head.content == b""
    etag = head.headers["etag"]
    again = built.get("/ui/", headers={"If-None-Match": etag})
    assert again.status_code == 304
    assert again.headers["etag"] == etag
    assert_security_headers(again)


def test_only_get_and_head(built: TestClient) -> None:
    assert built.post("/ui/", content=b"{}", headers={"content-type": "application/json"}).status_code == 405


def test_the_api_routes_are_untouched_by_the_ui(built: TestClient) -> None:
    response = built.get("/tools")
    assert response.status_code == 200
    assert "content-security-policy" not in response.headers


# -- where the build is looked for --------------------------------------------------------------------


def test_lookup_prefers_the_packaged_copy_then_the_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ui.ENV_VAR, raising=False)
    candidates = ui.dist_candidates({})
    package = Path(ui.__file__).resolve().parent.parent
    assert candidates[0] == package / "ui-dist"
    if package.parent.name == "src":  # an editable install of this checkout
        assert candidates[1] == ROOT / "ui-dist"


def test_the_environment_override_is_the_only_candidate(tmp_path: Path) -> None:
    assert ui.dist_candidates({ui.ENV_VAR: str(tmp_path)}) == [tmp_path]
    assert ui.find_dist({ui.ENV_VAR: str(tmp_path)}) is None
    (tmp_path / "index.html").write_text(INDEX, encoding="utf-8")
    assert ui.find_dist({ui.ENV_VAR: str(tmp_path)}) == tmp_path.resolve()


# -- the committed build ----------------------------------------------------------------------------------

COMMITTED = ROOT / "ui-dist"


def _source_hash_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ui_source_hash", ROOT / "ui" / "source_hash.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_ui_dist_is_the_build_of_the_ui_sources() -> None:
    """ui-dist/ ships in the wheel, so it must be the build of ui/ as committed. The build stamps the
    fingerprint of its sources into ui-dist/.source-hash; any change under ui/ without a rebuild
    (or a rebuild left uncommitted) shows up here."""
    stamp = COMMITTED / ".source-hash"
    assert stamp.is_file(), "ui-dist/.source-hash is missing: run `make ui` and commit ui-dist/"
    current = _source_hash_module().source_hash(ROOT / "ui")
    assert stamp.read_text(encoding="utf-8").strip() == current, (
        "ui-dist/ is stale: ui/ changed since it was built. Run `make ui` and commit ui-dist/ with the change."
    )


def test_the_committed_build_holds_exactly_the_files_its_page_needs() -> None:
    """Every file index.html references is there, and no asset of an older build is left behind
    (it would ship in every wheel)."""
    import re

    index = (COMMITTED / "index.html").read_text(encoding="utf-8")
    referenced = set(re.findall(r'(?:src|href)="/ui/([^"]+)"', index))
    assert any(ref.startswith("assets/") and ref.endswith(".js") for ref in referenced), index
    for ref in referenced:
        assert (COMMITTED / ref).is_file(), f"ui-dist/{ref} is missing: run `make ui`"
    bundles = "".join((COMMITTED / ref).read_text(encoding="utf-8") for ref in referenced if ref.startswith("assets/"))
    for asset in (COMMITTED / "assets").iterdir():
        name = f"assets/{asset.name}"
        assert name in referenced or asset.name in bundles, (
            f"ui-dist/{name} belongs to no page: an older build's file. Run `make ui` and `git add -A ui-dist`."
        )
