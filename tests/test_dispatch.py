"""One road per request: every route of the table answers the same with and without an Origin header, under
every auth mode its row can have, and the mode decides who gets in.

Before, requests without an Origin header went to hand-written handlers and the others through the router, so a
row's auth mode held on one road only (a `GET /tools/{key}` row made `required` answered 401 to a browser and 200 to
curl). Now the dispatcher is built from the rows (server/dispatch.py): the Origin header only adds CORS headers.
Each test here rebuilds the app with every row of the table given one auth mode, sends every route (each path
and method, path parameters filled with real values) with no key, a bad key, a user's key and an admin's key,
each once without and once with an allowed Origin, and compares status, headers and body. `make test` runs this
file with `TOOLRUN_SPEEDUPS=off` too (every row through the router).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from starlette.testclient import TestClient

from support.app import load_settings
from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import ToolrunServer
from test_mcp_fast import call, modern_headers
from toolrun.access import Mode
from toolrun.models import Identity
from toolrun.server import app as app_module
from toolrun.server import dispatch, routes
from toolrun.server.routes import RouteDef
from toolrun.server.run import build_app

BASE = "http://127.0.0.1"
ORIGIN = "http://ui.example"
CATALOG = """\
group: t
tools:
  - name: echo
    public: true
    exec: printf hi
  - name: gated
    public: true
    approval: required
    exec: printf gated
"""
# Answer headers the Origin header legitimately changes (CORS), or that differ between any two requests.
VARYING = {"access-control-allow-origin", "access-control-expose-headers", "vary", "date", "content-length"}
# Numbers that differ between any two answers: durations and the moments a job was made or changed.
_MOMENTS = re.compile(rb'"(seconds|created|updated|decided_at|expires_at|started|finished|heartbeat)": ?[0-9.e+-]+')
# A job's digest is keyed per job (jobrecord.digest): two jobs of one call differ there too.
_DIGESTS = re.compile(rb'"digest": ?"sha256:[0-9a-f]+"')
CREDENTIALS = ("none", "bad", "user", "admin")


def admitted(mode: Mode, credential: str) -> bool:
    """Whether a caller with `credential` gets past a row of `mode` (access.py's modes)."""
    if mode == "anonymous":
        return True  # no key is read at all
    if credential == "bad":
        return False  # a key that is given must resolve
    return {
        "optional": True,
        "keyed": True,
        "required": credential != "none",
        "admin": credential == "admin",
    }[mode]


@dataclasses.dataclass
class Served:
    """An app built from one table, its client, and the keys and jobs to fill its requests with."""

    client: TestClient
    parts: Any  # server.parts.ServerParts
    keys: dict[str, str]
    new_job: Callable[[], str]

    def headers(self, credential: str) -> dict[str, str]:
        key = {"none": None, "bad": "trk_bad", **self.keys}[credential]
        return {"X-API-Key": key} if key else {}


@pytest.fixture
def serve(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Mode | None], Served]]:
    """Build the app as `toolrun serve` does, with every row of the route table given one mode (None: as shipped)."""
    (tmp_path / "catalog").mkdir()
    catalog = write_catalog(tmp_path / "catalog", CATALOG)
    clients: list[TestClient] = []

    def make(mode: Mode | None) -> Served:
        table = routes.ROUTES if mode is None else tuple(dataclasses.replace(r, auth=mode) for r in routes.ROUTES)
        monkeypatch.setattr(routes, "ROUTES", table)
        monkeypatch.setattr(app_module, "ROUTES", table)
        home = tmp_path / f"home-{mode}"
        asgi = build_app(load_settings(home, {"allowed_origins": [ORIGIN]}), [str(catalog)])
        parts = asgi.app.state.parts
        keys = {"user": parts.access.create_key("user", ["staff"])[0]}
        keys["admin"] = parts.access.create_key("root", ["admin"])[0]
        client = TestClient(asgi, base_url=BASE)
        client.__enter__()
        clients.append(client)
        user = parts.access.identify_now(keys["user"], "required")

        def new_job() -> str:
            assert client.portal is not None
            job = client.portal.call(partial(parts.service.jobs.submit, user, "t.gated", {}))
            return str(job.id)

        return Served(client, parts, keys, new_job)

    yield make
    for client in clients:
        client.__exit__(None, None, None)


def request_of(row: RouteDef, served: Served) -> tuple[str, str, dict[str, str], bytes | None, str | None]:
    """Method, path, headers, body and the job the path names (if any): the row's path filled with real values."""
    path, headers, body, job = row.path, {}, None, None
    if "{key}" in path:
        path = path.replace("{key}", "t.echo")
        if row.method == "POST":
            headers, body = {"Content-Type": "application/json", "X-Request-Id": "same-id"}, b"{}"
    if "{id}" in path:
        job = served.new_job()
        path = path.replace("{id}", job)
        if path.endswith("/events"):  # a job that ended: its stream ends too
            admin = Identity(groups=frozenset({"admin"}), anonymous=False)
            served.client.portal.call(partial(served.parts.service.jobs.cancel, admin, job, ""))  # type: ignore[union-attr]
    if path == "/search":
        path = "/search?q=echo"
    if row.path == "/mcp" and row.method == "POST":
        headers = {k: v for k, v in modern_headers("-").items() if k != "X-API-Key"}
        body = call("execute", {"key": "t.echo"})
    return row.method, path, headers, body, job


def seen(response: Any, job: str | None) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers and body; the numbers that differ between any two answers (and their length) left out."""
    assert response.headers.get("content-length", str(len(response.content))) == str(len(response.content))
    body = _DIGESTS.sub(b'"digest": "<digest>"', _MOMENTS.sub(rb'"\1": 0', response.content))
    if job is not None:
        body = body.replace(job.encode(), b"<job>")
    headers = [(k, v) for k, v in response.headers.multi_items() if k not in VARYING]
    return response.status_code, headers, body


def ask(served: Served, row: RouteDef, credential: str, origin: bool) -> tuple[int, list[tuple[str, str]], bytes]:
    """One request of `row` (a fresh job for a job's route: an action changes it)."""
    method, path, headers, body, job = request_of(row, served)
    headers = {**headers, **served.headers(credential), **({"Origin": ORIGIN} if origin else {})}
    response = served.client.request(method, path, headers=headers, content=body)
    if origin:
        assert response.headers.get("access-control-allow-origin") == ORIGIN, (row.method, row.path)
    return seen(response, job)


def check_table(served: Served, table: tuple[RouteDef, ...]) -> None:
    assert {(r.path, r.method) for r in table} >= {("/mcp", "POST"), ("/tools/{key}", "GET"), ("/healthz", "GET")}
    for row in table:
        for credential in CREDENTIALS:
            plain = ask(served, row, credential, origin=False)
            cors = ask(served, row, credential, origin=True)
            what = f"{row.method} {row.path} ({row.auth}) with {credential} credentials"
            assert plain == cors, f"{what}: without Origin\n{plain}\nwith Origin\n{cors}"
            status, _, body = plain
            if admitted(row.auth, credential):
                assert status != 401, f"{what}: refused\n{plain}"
            else:
                assert status == 401, f"{what}: let in\n{plain}"
                assert json.loads(body) == {"error": "unauthorized"}, what


@pytest.mark.parametrize("mode", get_args(Mode))
def test_every_route_answers_alike_with_and_without_origin_under_each_auth_mode(
    serve: Callable[[Mode | None], Served], mode: Mode
) -> None:
    served = serve(mode)
    check_table(served, routes.ROUTES)


def test_every_route_as_shipped_answers_alike_with_and_without_origin(serve: Callable[[Mode | None], Served]) -> None:
    served = serve(None)
    check_table(served, routes.ROUTES)
    # The table's modes, as its users meet them: a sample of each.
    answer = served.client.get("/tools/t.echo")
    assert (answer.status_code, answer.json()["key"]) == (200, "t.echo")
    assert served.client.get("/whoami").status_code == 401
    assert served.client.get("/users", headers=served.headers("user")).status_code == 401
    assert served.client.post("/tools/t.echo", content=b"{}", headers={"Content-Type": "application/json"}).text == "hi"


def test_mcp_auth_required_makes_the_mcp_rows_required_on_every_road(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    settings = load_settings(tmp_path / "home-required", {"mcp_auth_required": True})
    served_rows = routes.for_settings(routes.ROUTES, settings)
    assert {r.auth for r in served_rows if r.path == "/mcp"} == {"required"}
    assert [r for r in served_rows if r.path != "/mcp"] == [r for r in routes.ROUTES if r.path != "/mcp"]
    with TestClient(build_app(settings, [str(catalog)]), base_url=BASE) as client:
        for extra in ({}, {"Origin": BASE}):
            headers = {k: v for k, v in modern_headers("-").items() if k != "X-API-Key"}
            answer = client.post("/mcp", content=call("execute", {"key": "t.echo"}), headers={**headers, **extra})
            assert (answer.status_code, answer.json()) == (401, {"error": "unauthorized"})


def test_a_plain_row_cannot_shadow_another_row() -> None:
    rows = [
        RouteDef("/tools/{key}", "GET", "get_tool", "optional", serve="plain"),
        RouteDef("/tools/special/list", "GET", "list_tools", "optional"),
    ]
    with pytest.raises(ValueError, match="GET /tools/special/list is under the plain row GET /tools/"):
        dispatch.plain_tables([(r, object()) for r in rows])  # type: ignore[misc]
    with pytest.raises(ValueError, match="a plain row's handler must be one of"):
        dispatch.row_handler(RouteDef("/x", "GET", "whoami", "optional", serve="plain"), None, None)  # type: ignore[arg-type]


# -- a real `toolrun serve` -----------------------------------------------------------------------------------


def test_a_real_server_answers_every_route_alike_with_and_without_origin(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    server = ToolrunServer(tmp_path / "serve", catalog, {"SVC_ALLOWED_ORIGINS": ORIGIN, "SVC_WORKERS": 1})
    admin = create_key(server.env, "root", "admin")
    user = create_key(server.env, "user", "staff")
    with server.start(), httpx.Client(base_url=server.url, timeout=30) as client:

        def new_job() -> str:
            answer = client.post("/tools/t.gated", content=b"{}", headers={**JSON_BODY, "X-API-Key": user})
            assert answer.status_code == 202, answer.text
            return str(answer.json()["job"])

        for row in routes.ROUTES:
            if row.path.endswith("/events"):
                continue  # an event stream of a pending job never ends (the in-process tests follow an ended one)
            for key in (None, admin):
                answers = []
                for origin in (False, True):
                    job = new_job() if "{id}" in row.path else None
                    path = row.path.replace("{key}", "t.echo").replace("{id}", job or "")
                    headers: dict[str, Any] = {**({"X-API-Key": key} if key else {})}
                    body = None
                    if row.method == "POST" and row.path != "/mcp":
                        headers.update(JSON_BODY)
                        body = b"{}"
                    if row.path == "/mcp" and row.method == "POST":
                        headers.update({k: v for k, v in modern_headers("-").items() if k != "X-API-Key"})
                        body = call("execute", {"key": "t.echo"})
                    if origin:
                        headers["Origin"] = ORIGIN
                    response = client.request(row.method, path, headers=headers, content=body)
                    answers.append(seen(response, job))
                    if origin:
                        assert response.headers.get("access-control-allow-origin") == ORIGIN
                assert answers[0] == answers[1], f"{row.method} {row.path} key={bool(key)}:\n{answers}"
                if row.auth in ("required", "admin") and key is None:
                    assert answers[0][0] == 401, (row.method, row.path, answers[0])


JSON_BODY = {"Content-Type": "application/json", "X-Request-Id": "same-id"}
