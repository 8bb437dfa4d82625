"""A route's auth mode is its ROUTES row's, with and without an Origin header. Before, requests without an Origin
header went to the guard's fast handlers and the others through the router, and the fast handlers of
`GET /tools/{key}` and `POST /tools/{key}` applied "optional" whatever their row said, so a `GET /tools/{key}` row
made `required` answered 401 to a browser and 200 to curl. Now one dispatcher, built from the rows, serves both
(server/dispatch.py; tests/test_dispatch.py sends every route under every mode)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from support.catalogs import write_catalog
from toolrun.settings import Settings

CATALOG = "group: t\ntools:\n  - name: echo\n    public: true\n    exec: echo hi\n"
BASE = "http://127.0.0.1"


def _required(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.server import app, routes

    rows = tuple(
        dataclasses.replace(r, auth="required") if r.path == "/tools/{key}" and r.method in ("GET", "POST") else r
        for r in routes.ROUTES
    )
    monkeypatch.setattr(routes, "ROUTES", rows)
    monkeypatch.setattr(app, "ROUTES", rows)


@pytest.mark.parametrize("mode", ["optional", "required"])
def test_both_roads_apply_the_rows_auth_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    from toolrun.server.run import build_app

    if mode == "required":
        _required(monkeypatch)
    catalog = write_catalog(tmp_path, CATALOG)
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path / "home")})
    answers = {}
    with TestClient(build_app(settings, [str(catalog)]), base_url=BASE) as client:
        for road, extra in (("fast", {}), ("router", {"Origin": BASE})):
            get = client.get("/tools/t.echo", headers=extra)
            post = client.post("/tools/t.echo", content=b"{}", headers={"Content-Type": "application/json", **extra})
            answers[road] = (get.status_code, post.status_code, get.headers["content-type"], post.text)
    assert answers["fast"] == answers["router"], answers
    if mode == "required":
        assert answers["fast"][:2] == (401, 401)
        assert answers["fast"][3] == '{"error": "unauthorized"}'
    else:
        assert answers["fast"][:2] == (200, 200)
        assert answers["fast"][3] == "hi\n"
