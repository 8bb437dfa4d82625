"""A fourth red team (issue 34's "fresh red team"), on OAuth: a slow OpenID issuer on loopback and a real
`toolrun serve`, flooded the way a hostile caller would. Each test failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.servers import ToolrunServer, serve_catalog

joserfc = pytest.importorskip("joserfc")
from joserfc import jwt  # noqa: E402
from joserfc.jwk import RSAKey  # noqa: E402

pytestmark = pytest.mark.timeout(180)

AUDIENCE = "toolrun-redteam3"
CATALOG = "group: pub\ntools:\n  - name: echo\n    public: true\n    exec: printf hi\n"


class SlowIssuer:
    """An OpenID issuer on loopback whose key set answers slowly: after `delay` seconds (`trickle` False), or a byte
    every `delay` seconds. `fetches` counts the key set's requests."""

    def __init__(self, delay: float, trickle: bool = False) -> None:
        self.delay, self.trickle, self.fetches = delay, trickle, 0
        self.key = RSAKey.generate_key(2048, parameters={"kid": "k1"})
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/openid-configuration":
                    body = {"issuer": issuer.url, "jwks_uri": issuer.url + "/jwks"}
                else:
                    issuer.fetches += 1
                    body = {"keys": [issuer.key.as_dict(private=False)]}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.path != "/jwks":
                    self.wfile.write(data)
                elif issuer.trickle:
                    for byte in data:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(issuer.delay)
                else:
                    time.sleep(issuer.delay)
                    self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> SlowIssuer:
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.shutdown()
        self.http.server_close()

    def token(self, kid: str = "k1") -> str:
        now = int(time.time())
        claims = {"iss": self.url, "aud": AUDIENCE, "sub": "tina", "exp": now + 300, "iat": now}
        return jwt.encode({"alg": "RS256", "kid": kid}, claims, self.key)


def _server(base: Path, issuer: SlowIssuer, interval: float) -> ToolrunServer:
    settings: dict[str, Any] = {
        "SVC_OAUTH_ISSUER": issuer.url,
        "SVC_OAUTH_AUDIENCE": AUDIENCE,
        "SVC_OAUTH_JWKS_MIN_INTERVAL": interval,
        "SVC_WORKERS": 1,
    }
    return serve_catalog(base, CATALOG, settings, name="serve")


async def _call(client: httpx.AsyncClient, token: str) -> tuple[int | str, float]:
    started = time.monotonic()
    try:
        status: int | str = (
            await client.post("/tools/pub.echo", headers={"Authorization": f"Bearer {token}"})
        ).status_code
    except httpx.TimeoutException:
        status = "timed out"
    return status, time.monotonic() - started


@pytest.fixture
def base(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path


def test_a_flood_of_unknown_kids_during_a_slow_fetch_costs_one_fetch_and_holds_no_valid_token(base: Path) -> None:
    """A fresh server, an issuer that takes 2 s to send its keys, `oauth_jwks_min_interval` 1 s: 30 tokens with made-up
    `kid`s each waited on the fetch under way and then, the interval being over, fetched the key set again themselves,
    one after the other (30 fetches, 60 s); a valid token sent a second later queued behind them for 49 s (each
    waiter held a thread of the default pool). Now the requests share the one fetch under way."""
    with SlowIssuer(delay=2.0) as issuer, _server(base, issuer, interval=1.0) as server:
        server.start()

        async def flood() -> tuple[list[tuple[int | str, float]], tuple[int | str, float]]:
            limits = httpx.Limits(max_connections=100)
            async with httpx.AsyncClient(base_url=server.url, timeout=20, limits=limits) as client:
                made_up = [asyncio.create_task(_call(client, issuer.token(f"forged-{i}"))) for i in range(30)]
                await asyncio.sleep(0.5)
                valid = await _call(client, issuer.token())
                return await asyncio.gather(*made_up), valid

        refused, valid = asyncio.run(flood())
    assert valid[0] == 200 and valid[1] < 8, valid
    assert {status for status, _ in refused} == {401}, refused
    assert issuer.fetches <= 2, f"the key set was fetched {issuer.fetches} times for one flood"


def test_an_issuer_that_trickles_its_key_set_is_a_503_within_the_fetch_limit(base: Path) -> None:
    """FETCH_TIMEOUT (5 s) bounded each read of the issuer's answer, not the answer: an issuer sending its key set a
    byte every 0.1 s held every token of a fresh server for over 45 s (the fetch, and everyone waiting on it). Now
    the answer has 5 s in all, and the token gets the issuer's 503 (try again) well before the client gives up."""
    with SlowIssuer(delay=0.1, trickle=True) as issuer, _server(base, issuer, interval=60.0) as server:
        server.start()

        started = time.monotonic()
        try:
            answer = httpx.post(
                f"{server.url}/tools/pub.echo", headers={"Authorization": f"Bearer {issuer.token()}"}, timeout=20
            )
        except httpx.TimeoutException:
            pytest.fail(f"no answer in {time.monotonic() - started:.0f} s: the trickled fetch held the token")
        took = time.monotonic() - started
    assert answer.status_code == 503 and took < 12, (answer.status_code, took)
    assert "did not answer" in answer.text, (answer.headers, answer.text)
