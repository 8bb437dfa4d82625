"""An OpenID ID token is not an access token (docs/oauth.md): with `oauth_audience` equal to a client id, an ID token
issued to that client has the right `aud`, and any app's sign-in of that client handed a bearer toolrun took. A real
`toolrun serve` and the OpenID test provider (tests/support/pkce_provider.py): a token whose header `typ` is not an
access token's, or that carries a `nonce` (an ID token answering a sign-in), is a 401 that says why."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from support.servers import ToolrunServer, serve_catalog

pytest.importorskip("joserfc")  # the `oauth` extra

from joserfc import jwt

from support.pkce_provider import PkceProvider

CLIENT_ID = "toolrun-app"
REDIRECT = "http://127.0.0.1/cb"
CATALOG = "group: ops\ntools:\n  - name: hi\n    exec: echo hi\n"


@dataclass
class Setup:
    provider: PkceProvider
    server: ToolrunServer


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("oauth-kind")
    # The case this is about: the server's audience is the client id, the `aud` of the client's ID tokens.
    with PkceProvider(CLIENT_ID, REDIRECT, CLIENT_ID) as provider:
        settings = {"SVC_OAUTH_ISSUER": provider.url, "SVC_OAUTH_AUDIENCE": CLIENT_ID, "SVC_WORKERS": 1}
        with serve_catalog(base, CATALOG, settings) as server:
            server.start()
            yield Setup(provider, server)


def _sign_in(provider: PkceProvider, nonce: str) -> dict[str, Any]:
    """The authorization code flow with PKCE, as an app of CLIENT_ID runs it: the provider's tokens."""
    verifier = secrets.token_urlsafe(32)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    query = {"client_id": CLIENT_ID, "redirect_uri": REDIRECT, "response_type": "code", "scope": "openid"}
    query |= {"state": "s", "code_challenge": challenge, "code_challenge_method": "S256", "nonce": nonce}
    answer = httpx.get(provider.url + "/authorize", params=query)
    code = parse_qs(urlsplit(answer.headers["location"]).query)["code"][0]
    form = {"grant_type": "authorization_code", "code": code, "client_id": CLIENT_ID, "redirect_uri": REDIRECT}
    tokens = httpx.post(provider.url + "/token", data={**form, "code_verifier": verifier})
    assert tokens.status_code == 200, tokens.text
    return dict(tokens.json())


def _mint(provider: PkceProvider, header: dict[str, Any]) -> str:
    now = int(time.time())
    claims = {
        "iss": provider.url,
        "sub": "uma",
        "aud": CLIENT_ID,
        "iat": now,
        "exp": now + 300,
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode({"alg": "RS256", "kid": "k1", **header}, claims, provider.key)


def _whoami(setup: Setup, token: str) -> httpx.Response:
    return httpx.get(setup.server.url + "/whoami", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_an_id_token_with_a_nonce_is_refused_and_the_access_token_works(setup: Setup) -> None:
    tokens = _sign_in(setup.provider, nonce=secrets.token_urlsafe(12))
    refused = _whoami(setup, tokens["id_token"])
    assert refused.status_code == 401, refused.text
    assert "it is an OpenID ID token, not an access token" in refused.headers["www-authenticate"]
    assert "Traceback" not in refused.text
    taken = _whoami(setup, tokens["access_token"])
    assert taken.status_code == 200, taken.text
    assert taken.json()["username"] == "uma"


@pytest.mark.parametrize("typ", ["at+jwt", "application/AT+JWT", "JWT", "jwt", None])
def test_an_access_tokens_typ_or_none_is_taken(setup: Setup, typ: str | None) -> None:
    answer = _whoami(setup, _mint(setup.provider, {} if typ is None else {"typ": typ}))
    assert answer.status_code == 200, (typ, answer.headers.get("www-authenticate"))


@pytest.mark.parametrize("typ", ["id+jwt", "logout+jwt", "application/dpop+jwt", "secevent+jwt", ""])
def test_another_typ_is_refused_naming_it(setup: Setup, typ: object) -> None:
    answer = _whoami(setup, _mint(setup.provider, {"typ": typ}))
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert "is not an access token's (at+jwt or JWT)" in challenge and f"typ {str(typ)!a}" in challenge, challenge
