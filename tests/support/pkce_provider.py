"""A small OpenID provider on loopback for the UI's sign-in (docs/oauth.md), in a thread of the test process.

What a browser app needs of a real provider, and nothing else: discovery, the key set, `/authorize` (the
authorization code flow; it consents at once for `user`, or sends `error=access_denied` back when `deny` is
set) and `/token`, which checks the PKCE verifier against the S256 challenge (RFC 7636) and sends CORS headers
to the origins in `cors_origins`, as a provider that allows a public client does. `oidc-provider-mock` has no
CORS and does not check PKCE, hence this one. Tokens are RS256 JWTs signed with joserfc: the access token's
`aud` is `audience`, the ID token's the client id; `opaque_access_token` gives an opaque access token instead.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from joserfc import jwt
from joserfc.jwk import RSAKey


@dataclass
class Grant:
    client_id: str
    redirect_uri: str
    challenge: str
    scope: str
    nonce: str = ""  # the authorize request's `nonce`, which the ID token carries back (OpenID Connect)


@dataclass
class PkceProvider:
    client_id: str
    redirect_uri: str
    audience: str
    cors_origins: list[str] = field(default_factory=list)
    user: str = "uma"
    groups: list[str] = field(default_factory=lambda: ["ops"])
    deny: bool = False
    opaque_access_token: bool = False
    lifetime: int = 300  # seconds a token is valid
    port: int = 0
    key: RSAKey = field(default_factory=lambda: RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    grants: dict[str, Grant] = field(default_factory=dict)
    token_answers: list[tuple[int, dict[str, Any]]] = field(default_factory=list)  # what /token answered
    issued: list[str] = field(default_factory=list)  # every token handed out
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PkceProvider:
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), _handler(self))
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def discovery(self) -> dict[str, Any]:
        return {
            "issuer": self.url,
            "authorization_endpoint": self.url + "/authorize",
            "token_endpoint": self.url + "/token",
            "jwks_uri": self.url + "/jwks",
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "id_token_signing_alg_values_supported": ["RS256"],
        }

    def authorize(self, query: dict[str, str]) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) of GET /authorize: a redirect back with a code, or an error page."""
        if query.get("client_id") != self.client_id or query.get("redirect_uri") != self.redirect_uri:
            return 400, {}, "unknown client or redirect_uri"
        back = {"state": query.get("state", "")}
        if query.get("response_type") != "code":
            back.update(error="unsupported_response_type")
        elif query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
            back.update(error="invalid_request", error_description="PKCE with S256 is required")
        elif self.deny:
            back.update(error="access_denied", error_description="the user said no")
        else:
            code = secrets.token_urlsafe(24)
            self.grants[code] = Grant(
                self.client_id,
                self.redirect_uri,
                query["code_challenge"],
                query.get("scope", ""),
                query.get("nonce", ""),
            )
            back["code"] = code
        return 302, {"Location": f"{self.redirect_uri}?{urlencode(back)}"}, ""

    def token(self, form: dict[str, str]) -> tuple[int, dict[str, Any]]:
        grant = self.grants.pop(form.get("code", ""), None)  # a code is good once
        if form.get("grant_type") != "authorization_code":
            answer: tuple[int, dict[str, Any]] = (400, {"error": "unsupported_grant_type"})
        elif grant is None:
            answer = (400, {"error": "invalid_grant", "error_description": "unknown or used code"})
        elif form.get("client_id") != grant.client_id or form.get("redirect_uri") != grant.redirect_uri:
            answer = (400, {"error": "invalid_grant", "error_description": "client_id or redirect_uri differs"})
        elif _s256(form.get("code_verifier", "")) != grant.challenge:
            answer = (400, {"error": "invalid_grant", "error_description": "the PKCE code_verifier does not match"})
        else:
            answer = (200, self.tokens(grant))
        self.token_answers.append(answer)
        return answer

    def tokens(self, grant: Grant) -> dict[str, Any]:
        now = int(time.time())
        claims = {"iss": self.url, "sub": self.user, "groups": self.groups, "iat": now, "exp": now + self.lifetime}
        access = jwt.encode(
            {"alg": "RS256", "kid": "k1"}, {**claims, "aud": self.audience, "jti": uuid.uuid4().hex}, self.key
        )
        nonce = {"nonce": grant.nonce} if grant.nonce else {}
        id_token = jwt.encode({"alg": "RS256", "kid": "k1"}, {**claims, "aud": self.client_id, **nonce}, self.key)
        if self.opaque_access_token:
            access = secrets.token_urlsafe(32)
        self.issued += [access, id_token]
        return {
            "access_token": access,
            "id_token": id_token,
            "token_type": "Bearer",
            "expires_in": self.lifetime,
            "scope": grant.scope,
        }


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def _handler(provider: PkceProvider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/.well-known/openid-configuration":
                self.answer(200, provider.discovery())
            elif parts.path == "/jwks":
                self.answer(200, {"keys": [provider.key.as_dict(private=False)]})
            elif parts.path == "/authorize":
                status, headers, body = provider.authorize(query)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())
            else:
                self.answer(404, {"error": "not found"})

        def do_OPTIONS(self) -> None:  # a CORS preflight
            self.send_response(204)
            self.cors()
            self.send_header("Access-Control-Allow-Methods", "POST")
            self.send_header("Access-Control-Allow-Headers", "Content-Type, Accept")
            self.end_headers()

        def do_POST(self) -> None:
            if urlsplit(self.path).path != "/token":
                self.answer(404, {"error": "not found"})
                return
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            self.answer(*provider.token(form))

        def cors(self) -> None:
            origin = self.headers.get("Origin", "")
            if origin in provider.cors_origins:
                self.send_header("Access-Control-Allow-Origin", origin)
                self.send_header("Vary", "Origin")

        def answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.cors()
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
