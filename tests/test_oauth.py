"""OAuth resource-server mode (docs/oauth.md) against real processes: an OpenID issuer process
(tests/fixtures/oidc_issuer.py, serving discovery and the key set the test mints tokens with) and a real
`toolrun serve` configured with `oauth_issuer`. A bearer JWT must resolve to an identity exactly as an
API key does, on REST and on MCP over HTTP; every bad token is a 401 whose `WWW-Authenticate` tells MCP
clients where the protected-resource metadata is. The UI's sign-in with a pasted token is in
tests/test_ui_browser.py's style, at the end of this module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import importlib.util
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.keys import create_key
from support.mcp import MODERN_VERSION, mcp_http, text_of
from support.servers import Process, ToolrunServer, free_port, serve_catalog, toolrun_cli, wait_until

joserfc = pytest.importorskip("joserfc")
from joserfc import jwt  # noqa: E402
from joserfc.jwk import ECKey, RSAKey  # noqa: E402

pytestmark = pytest.mark.timeout(180)

ISSUER_SCRIPT = Path(__file__).parent / "fixtures" / "oidc_issuer.py"
AUDIENCE = "toolrun-test"
RATE_CALLS = 3
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
  - name: restart
    group: ops
    description: Restart a service (ops only).
    exec: printf 'restarted %s' {{ service | quote }}
    params:
      - name: service
        type: str
  - name: limited
    group: ops
    description: Rate-limited like every tool.
    exec: printf ok
  - name: payroll
    group: finance
    description: Run the payroll (finance only).
    exec: printf paid
"""


class Issuer(Process):
    """The issuer process and the private keys behind its key set."""

    name = "issuer"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.port = free_port()
        self.jwks_file = workdir / "jwks.json"
        self.keys: dict[str, Any] = {
            "rsa1": RSAKey.generate_key(2048, parameters={"kid": "rsa1"}),
            "ec1": ECKey.generate_key("P-256", parameters={"kid": "ec1"}),
            "rsa2": RSAKey.generate_key(2048, parameters={"kid": "rsa2"}),  # published only by `publish`
        }
        self.publish("rsa1", "ec1")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def publish(self, *kids: str) -> None:
        keys = [self.keys[kid].as_dict(private=False) for kid in kids]
        self.jwks_file.write_text(json.dumps({"keys": keys}), encoding="utf-8")

    def start(self) -> Issuer:
        self.spawn([sys.executable, str(ISSUER_SCRIPT), str(self.port), str(self.jwks_file)])
        wait_until(lambda: self._answers(), 15, "the issuer process")
        return self

    def _answers(self) -> bool:
        if not self.alive():
            raise RuntimeError(f"issuer exited:\n{self.log()}")
        try:
            return httpx.get(self.url + "/hits", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    def hits(self) -> dict[str, int]:
        return dict(httpx.get(self.url + "/hits", timeout=5).json())

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "tina",
            "email": "tina@example.com",
            "groups": ["ops"],
            "iat": now,
            "exp": now + 300,
            "jti": uuid.uuid4().hex,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def mint(self, kid: str = "rsa1", alg: str = "RS256", **overrides: Any) -> str:
        return jwt.encode({"alg": alg, "kid": kid}, self.claims(**overrides), self.keys[kid])


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def bad_tokens(issuer: Issuer) -> dict[str, str]:
    """Every kind of token the server must refuse, by name."""
    now = int(time.time())
    valid = issuer.mint()
    head, _, signature = valid.split(".")
    admin_payload = _b64(issuer.claims(groups=["admin"]))
    # alg confusion: an HMAC whose secret is the issuer's public key, which anyone can fetch (joserfc
    # itself refuses to make one, so it is signed here by hand).
    public_pem = issuer.keys["rsa1"].as_pem(private=False)
    signing_input = f"{_b64({'alg': 'HS256', 'kid': 'rsa1'})}.{admin_payload}"
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    confused = signing_input + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    return {
        "expired": issuer.mint(exp=now - 120, iat=now - 600),
        "not-yet-valid": issuer.mint(nbf=now + 600),
        "wrong-audience": issuer.mint(aud="someone-else"),
        "wrong-issuer": issuer.mint(iss="http://127.0.0.1:1/evil"),
        "unknown-kid": issuer.mint(kid="rsa2"),
        "tampered": f"{head}.{admin_payload}.{signature}",
        "alg-none": f"{_b64({'alg': 'none', 'kid': 'rsa1'})}.{admin_payload}.",
        "hs256-with-the-public-key": confused,
        "no-exp": issuer.mint(exp=None),
        "no-aud": issuer.mint(aud=None),
    }


@dataclass
class Setup:
    issuer: Issuer
    server: ToolrunServer
    audit: Path

    @property
    def url(self) -> str:
        return self.server.url


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    base = tmp_path_factory.mktemp("oauth")
    audit = base / "audit.log"
    with Issuer(base / "issuer") as issuer:
        issuer.start()
        settings = {
            "SVC_OAUTH_ISSUER": issuer.url,
            "SVC_OAUTH_AUDIENCE": AUDIENCE,
            "SVC_RATE_LIMIT_ENABLED": True,
            "SVC_RATE_LIMIT_CALLS": RATE_CALLS,
            "SVC_RATE_LIMIT_WINDOW": 3600,
            "SVC_AUDIT_LOG": str(audit),
            "SVC_WORKERS": 1,
        }
        with serve_catalog(base, CATALOG, settings, name="serve") as server:
            server.start()
            yield Setup(issuer, server, audit)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# -- a valid token is an identity, as a key is ---------------------------------------------------------


def test_a_valid_token_resolves_to_its_user_and_groups_on_rest(setup: Setup) -> None:
    token = setup.issuer.mint()
    who = httpx.get(setup.url + "/whoami", headers=bearer(token))
    assert who.status_code == 200, who.text
    assert who.json() == {
        "username": "tina",
        "email": "tina@example.com",
        "groups": ["ops"],
        "tools": ["ops.limited", "ops.restart", "pub.echo"],
    }
    called = httpx.post(setup.url + "/tools/ops.restart", headers=bearer(token), json={"service": "nginx"})
    assert (called.status_code, called.text) == (200, "restarted nginx")


def test_an_ec_signed_token_and_a_token_in_x_api_key_work_too(setup: Setup) -> None:
    token = setup.issuer.mint(kid="ec1", alg="ES256", sub="erin")
    assert httpx.get(setup.url + "/whoami", headers=bearer(token)).json()["username"] == "erin"
    # The UI and `toolrun --url` send whatever was pasted in X-API-Key: a token works there as well.
    assert httpx.get(setup.url + "/whoami", headers={"X-API-Key": token}).json()["username"] == "erin"


def test_a_hidden_tool_is_the_same_404_as_an_unknown_one_for_a_token(setup: Setup) -> None:
    token = setup.issuer.mint()
    hidden = httpx.post(setup.url + "/tools/finance.payroll", headers=bearer(token), json={})
    unknown = httpx.post(setup.url + "/tools/finance.nothing", headers=bearer(token), json={})
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.text.replace("payroll", "X") == unknown.text.replace("nothing", "X")
    assert httpx.get(setup.url + "/tools/finance.payroll", headers=bearer(token)).json() == {"error": "not found"}


def test_scopes_with_the_prefix_grant_groups(setup: Setup) -> None:
    token = setup.issuer.mint(groups=None, scope="openid email toolrun:finance")
    who = httpx.get(setup.url + "/whoami", headers=bearer(token)).json()
    assert who["groups"] == ["finance"]
    assert httpx.post(setup.url + "/tools/finance.payroll", headers=bearer(token), json={}).text == "paid"


def test_a_token_user_has_its_own_rate_limit_bucket_shared_by_every_token_of_that_user(setup: Setup) -> None:
    statuses = [
        httpx.post(setup.url + "/tools/ops.limited", headers=bearer(setup.issuer.mint(sub="rita")), json={}).status_code
        for _ in range(RATE_CALLS + 1)
    ]
    assert statuses == [200] * RATE_CALLS + [429]
    other = httpx.post(setup.url + "/tools/ops.limited", headers=bearer(setup.issuer.mint(sub="otto")), json={})
    assert other.status_code == 200


def test_the_audit_record_names_the_token_user_and_jti_never_the_token(setup: Setup) -> None:
    jti = "audit-" + uuid.uuid4().hex[:8]
    token = setup.issuer.mint(sub="audrey", jti=jti)
    assert httpx.post(setup.url + "/tools/pub.echo", headers=bearer(token), json={"msg": "hi"}).status_code == 200
    records = [json.loads(line) for line in setup.audit.read_text(encoding="utf-8").splitlines()]
    mine = [r for r in records if r.get("user") == "audrey"]
    assert mine and mine[-1]["key_prefix"] == "jwt:" + jti[:16] and mine[-1]["tool"] == "pub.echo"
    assert token not in setup.audit.read_text(encoding="utf-8")
    assert token.split(".")[2] not in setup.server.log()


def test_an_admin_token_may_use_admin_routes_and_others_get_insufficient_scope(setup: Setup) -> None:
    admin = httpx.get(setup.url + "/users", headers=bearer(setup.issuer.mint(sub="ann", groups=["admin"])))
    assert admin.status_code == 200
    refused = httpx.get(setup.url + "/users", headers=bearer(setup.issuer.mint()))
    assert refused.status_code == 401 and refused.json() == {"error": "unauthorized"}
    challenge = refused.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="insufficient_scope"' in challenge
    assert f'resource_metadata="{setup.url}/.well-known/oauth-protected-resource"' in challenge


# -- every bad token is refused, never anonymous --------------------------------------------------------


def test_every_bad_token_is_a_401_with_invalid_token_on_every_door(setup: Setup) -> None:
    before = setup.issuer.hits()["jwks"]
    for name, token in bad_tokens(setup.issuer).items():
        for method, path in (("GET", "/whoami"), ("GET", "/tools"), ("POST", "/tools/pub.echo")):
            kwargs: dict[str, Any] = {"json": {"msg": "x"}} if method == "POST" else {}
            response = httpx.request(method, setup.url + path, headers=bearer(token), **kwargs)
            assert response.status_code == 401, (name, path, response.text)
            assert response.json() == {"error": "unauthorized"}, name
            challenge = response.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge, (name, challenge)
            assert f'resource_metadata="{setup.url}/.well-known/oauth-protected-resource"' in challenge
    # One unknown kid asked the issuer once, at most, for the whole batch (the refresh is bounded).
    assert setup.issuer.hits()["jwks"] - before <= 1


def test_the_refusal_says_why_in_the_challenge(setup: Setup) -> None:
    reasons = {
        "expired": "expired",
        "not-yet-valid": "not valid yet",
        "wrong-audience": "not meant for this server",
        "wrong-issuer": "another issuer",
        "unknown-kid": "key the issuer does not list",
        "tampered": "signature does not verify",
        "alg-none": "algorithm 'none' is not allowed",
        "hs256-with-the-public-key": "algorithm 'HS256' is not allowed",
    }
    tokens = bad_tokens(setup.issuer)
    for name, words in reasons.items():
        response = httpx.get(setup.url + "/whoami", headers=bearer(tokens[name]))
        assert words in response.headers["www-authenticate"], (name, response.headers["www-authenticate"])


def test_a_flood_of_unknown_kids_costs_the_issuer_one_fetch(setup: Setup) -> None:
    before = setup.issuer.hits()["jwks"]
    key = setup.issuer.keys["rsa2"]
    for _ in range(40):
        kid = uuid.uuid4().hex
        token = jwt.encode({"alg": "RS256", "kid": kid}, setup.issuer.claims(), key)
        assert httpx.get(setup.url + "/whoami", headers=bearer(token)).status_code == 401
    assert setup.issuer.hits()["jwks"] - before <= 1


def test_without_credentials_a_required_route_points_at_the_metadata(setup: Setup) -> None:
    response = httpx.get(setup.url + "/whoami")
    assert response.status_code == 401
    expected = f'Bearer resource_metadata="{setup.url}/.well-known/oauth-protected-resource"'
    assert response.headers["www-authenticate"] == expected
    assert httpx.get(setup.url + "/users").headers["www-authenticate"] == expected  # an admin route alike
    # An optional route stays open to anonymous callers, as with keys.
    assert httpx.get(setup.url + "/tools").status_code == 200


def test_serve_says_at_start_that_oauth_is_on_with_its_issuer_and_audience(setup: Setup) -> None:
    line = f"OAuth on: bearer JWTs of {setup.issuer.url} for audience {AUDIENCE} are accepted beside API keys"
    assert line in setup.server.log()


def test_api_keys_keep_working_beside_tokens(setup: Setup) -> None:
    env = setup.server.env
    key = create_key(env, "kim", "finance")
    assert httpx.get(setup.url + "/whoami", headers=bearer(key)).json()["groups"] == ["finance"]
    assert httpx.get(setup.url + "/whoami", headers={"X-API-Key": key}).json()["username"] == "kim"


# -- RFC 9728 metadata ---------------------------------------------------------------------------------


def test_the_protected_resource_metadata_names_the_issuer(setup: Setup) -> None:
    root = httpx.get(setup.url + "/.well-known/oauth-protected-resource")
    assert root.status_code == 200
    assert root.json()["resource"] == setup.url
    assert root.json()["authorization_servers"] == [setup.issuer.url]
    assert root.json()["bearer_methods_supported"] == ["header"]
    mcp = httpx.get(setup.url + "/.well-known/oauth-protected-resource/mcp").json()
    assert mcp["resource"] == setup.url + "/mcp" and mcp["authorization_servers"] == [setup.issuer.url]
    paths = httpx.get(setup.url + "/openapi.json").json()["paths"]
    assert "/.well-known/oauth-protected-resource" in paths and "/.well-known/oauth-protected-resource/mcp" in paths


# -- MCP over HTTP ---------------------------------------------------------------------------------------


def test_mcp_over_http_with_a_bearer_token_sees_and_calls_the_users_tools(setup: Setup) -> None:
    headers = bearer(setup.issuer.mint(sub="mona"))

    async def main() -> Any:
        async with mcp_http(setup.url + "/mcp", MODERN_VERSION, headers) as client:
            who = await client.call_tool("whoami", {})
            ran = await client.call_tool("execute", {"key": "ops.restart", "arguments": {"service": "db"}})
            hidden = await client.call_tool("execute", {"key": "finance.payroll"})
            unknown = await client.call_tool("execute", {"key": "finance.nothing"})
            return who, ran, hidden, unknown

    who, ran, hidden, unknown = anyio.run(main)
    assert who.structured_content["username"] == "mona"
    assert who.structured_content["tools"] == ["ops.limited", "ops.restart", "pub.echo"]
    assert text_of(ran) == "restarted db"
    assert hidden.is_error and unknown.is_error  # a hidden tool reads exactly as an unknown one
    assert text_of(hidden).replace("payroll", "X") == text_of(unknown).replace("nothing", "X")


def test_mcp_over_http_refuses_a_bad_token_with_the_mcp_metadata_url(setup: Setup) -> None:
    token = bad_tokens(setup.issuer)["expired"]
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
    headers = {**bearer(token), "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    response = httpx.post(setup.url + "/mcp", headers=headers, content=body)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert f'resource_metadata="{setup.url}/.well-known/oauth-protected-resource/mcp"' in challenge


# -- access explain -------------------------------------------------------------------------------------


def test_access_explain_explains_a_tokens_access(setup: Setup) -> None:
    env = {**setup.server.env}
    catalog = str(setup.server.catalog)
    good = toolrun_cli("access", "explain", setup.issuer.mint(), "ops.restart", "-c", catalog, env=env)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "ops.restart for tina: visible and callable" in good.stdout
    assert f"bearer token: valid, issuer {setup.issuer.url}" in good.stdout
    hidden = toolrun_cli("access", "explain", setup.issuer.mint(), "finance.payroll", "-c", catalog, env=env)
    assert hidden.returncode == 1 and "not visible" in hidden.stdout
    expired = bad_tokens(setup.issuer)["expired"]
    refused = toolrun_cli("access", "explain", expired, "pub.echo", "-c", catalog, "--json", env=env)
    answer = json.loads(refused.stdout)
    assert answer["token"]["state"] == "refused" and "expired" in answer["token"]["reason"]
    assert answer["user"]["known"] is False


def test_whoami_explain_for_an_admin_token_uses_the_tokens_groups(setup: Setup) -> None:
    token = setup.issuer.mint(sub="ann", groups=["admin"])
    body = httpx.get(setup.url + "/whoami", params={"explain": "finance.payroll"}, headers=bearer(token)).json()
    assert body["explain"]["visible"] is True
    assert body["explain"]["token"]["state"] == "valid"
    assert "admins see every tool" in " ".join(body["explain"]["reasons"])


# -- settings, OAuth off, key rotation (in-process servers) -----------------------------------------------


ON = {"SVC_OAUTH_ISSUER": "https://id.example", "SVC_OAUTH_AUDIENCE": "a"}


@pytest.mark.parametrize(
    ("environ", "words"),
    [
        ({"SVC_OAUTH_ISSUER": "https://id.example"}, "oauth_audience: required with oauth_issuer"),
        ({"SVC_OAUTH_ISSUER": "http://id.example", "SVC_OAUTH_AUDIENCE": "a"}, "expected an https:// URL"),
        (
            {
                "SVC_OAUTH_ISSUER": "https://id.example",
                "SVC_OAUTH_AUDIENCE": "a",
                "SVC_OAUTH_ALGORITHMS": "RS256,HS256",
            },
            "asymmetric signatures only), got HS256",
        ),
        (
            {**ON, "SVC_OAUTH_ALGORITHMS": "none"},
            "got none",
        ),
        (
            {**ON, "SVC_OAUTH_JWKS_URL": "ftp://x/k"},
            "setting oauth_jwks_url from SVC_OAUTH_JWKS_URL",
        ),
        ({**ON, "SVC_OAUTH_USERS": "alice"}, "setting oauth_users from SVC_OAUTH_USERS: expected entries"),
        ({**ON, "SVC_OAUTH_USERS": "sub=\u0430lice"}, "got 'sub=\u0430lice'"),  # a Cyrillic user name
        ({**ON, "SVC_OAUTH_USERS": "=alice"}, "expected entries `subject=user`"),
        ({**ON, "SVC_OAUTH_USERS": "s1=alice,s1=bob"}, "the subject 's1' is mapped twice"),
    ],
)
def test_oauth_settings_that_would_lower_safety_are_refused_at_start(
    tmp_path: Path, environ: dict[str, str], words: str
) -> None:
    from toolrun.errors import UsageError
    from toolrun.settings import Settings

    with pytest.raises(UsageError, match=re.escape(words)):
        Settings.load(environ={"TOOLRUN_HOME": str(tmp_path), **environ})


def test_with_oauth_off_a_token_is_an_unknown_key_and_there_is_no_metadata(setup: Setup, tmp_path: Path) -> None:
    from support.app import servers

    with servers(tmp_path) as make:
        client = make().client
        refused = client.get("/whoami", headers=bearer(setup.issuer.mint()))
        assert refused.status_code == 401 and "www-authenticate" not in refused.headers
        assert client.get("/.well-known/oauth-protected-resource").status_code == 404
        assert client.get("/.well-known/oauth-protected-resource/mcp").json() == {"error": "not found"}


def test_a_rotated_key_is_fetched_on_its_first_token_and_oauth_resource_names_the_server(
    setup: Setup, tmp_path: Path
) -> None:
    from support.app import servers

    flags = {
        "oauth_issuer": setup.issuer.url,
        "oauth_audience": AUDIENCE,
        "oauth_jwks_min_interval": 0,
        "oauth_resource": "https://tools.example",
    }
    token = setup.issuer.mint(kid="rsa2", sub="rob")
    with servers(tmp_path) as make:
        client = make(flags).client
        refused = client.get("/whoami", headers=bearer(token))
        assert refused.status_code == 401
        assert (
            'resource_metadata="https://tools.example/.well-known/oauth-protected-resource"'
            in (refused.headers["www-authenticate"])
        )
        assert client.get("/.well-known/oauth-protected-resource").json()["resource"] == "https://tools.example"
        try:
            setup.issuer.publish("rsa1", "rsa2")  # the issuer rotates in a new signing key
            assert client.get("/whoami", headers=bearer(token)).json()["username"] == "rob"
        finally:
            setup.issuer.publish("rsa1", "ec1")


# -- a real OpenID provider: oidc-provider-mock ------------------------------------------------------------


class Provider(Process):
    """`python -m oidc_provider_mock`: a real OpenID provider (authorization code flow, ID tokens signed RS256)."""

    name = "oidc-provider-mock"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.port = free_port()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Provider:
        self.spawn([sys.executable, "-m", "oidc_provider_mock", "--port", str(self.port)])

        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"oidc-provider-mock exited:\n{self.log()}")
            try:
                return httpx.get(self.url + "/.well-known/openid-configuration", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, 30, "oidc-provider-mock")
        return self

    def sign_in(self, sub: str, claims: dict[str, Any], client_id: str) -> dict[str, Any]:
        """The authorization code flow a client runs, the user's consent posted as the provider's form does."""
        callback = "http://localhost/callback"
        with httpx.Client(base_url=self.url, timeout=10) as http:
            assert http.put(f"/users/{sub}", json=claims).status_code == 204
            query = {"client_id": client_id, "redirect_uri": callback, "response_type": "code", "scope": "openid email"}
            consent = http.post("/oauth2/authorize", params={**query, "state": "s"}, data={"sub": sub})
            assert consent.status_code == 302, consent.text
            code = httpx.URL(consent.headers["location"]).params["code"]
            form = {"grant_type": "authorization_code", "code": code, "redirect_uri": callback}
            tokens = http.post("/oauth2/token", data={**form, "client_id": client_id, "client_secret": "s"})
            assert tokens.status_code == 200, tokens.text
            return dict(tokens.json())


def test_a_token_from_a_real_openid_provider_resolves_through_discovery(tmp_path: Path) -> None:
    if importlib.util.find_spec("oidc_provider_mock") is None:  # found, not imported: it warns on import
        assert os.environ.get("CI") != "true", "the test extra installs oidc-provider-mock"
        pytest.skip("oidc-provider-mock is not installed (pip install -e '.[test]')")
    from support.app import servers

    with Provider(tmp_path / "provider") as provider, servers(tmp_path) as make:
        provider.start()
        tokens = provider.sign_in("tina", {"groups": ["ops"], "email": "tina@example.com"}, AUDIENCE)
        client = make({"oauth_issuer": provider.url, "oauth_audience": AUDIENCE}).client
        who = client.get("/whoami", headers=bearer(tokens["id_token"]))
        assert who.status_code == 200, who.headers.get("www-authenticate")
        assert who.json()["username"] == "tina" and who.json()["groups"] == ["ops"]
        assert client.post("/tools/ops.restart", headers=bearer(tokens["id_token"]), json={"service": "x"}).text == (
            "restarted x"
        )
        # The provider's opaque access token is no JWT: refused, never anonymous.
        assert client.get("/tools", headers=bearer(tokens["access_token"])).status_code == 401
        # A token for another client of the same provider is not for this server.
        other = provider.sign_in("tina", {"groups": ["ops"]}, "another-app")
        refused = client.get("/whoami", headers=bearer(other["id_token"]))
        assert refused.status_code == 401 and "not meant for this server" in refused.headers["www-authenticate"]


# -- the verifier's own rules: memo and bounded fetches, pinned to the plain path ----------------------------


def _verifier(issuer: Issuer, min_interval: float = 60.0) -> Any:
    from toolrun.access.oauth import OAuthConfig, SigningKeys, TokenVerifier, fetch_json

    config = OAuthConfig(issuer=issuer.url, audience=AUDIENCE, jwks_min_interval=min_interval)
    clock = [1000.0]
    keys = SigningKeys(config, fetch=fetch_json, clock=lambda: clock[0])
    return TokenVerifier(config, keys), clock


def test_a_remembered_token_still_expires_and_a_new_key_set_checks_it_again(setup: Setup) -> None:
    from toolrun.errors import Unauthorized

    verifier, _ = _verifier(setup.issuer)
    now = time.time()
    token = setup.issuer.mint(exp=int(now) + 60)
    first = verifier.identify_now(token, "10.0.0.1")
    again = verifier.identify_now(token, "10.0.0.2")  # from the memo: the same user, this request's client
    assert (first.username, again.username, again.client) == ("tina", "tina", "10.0.0.2")
    verifier.clock = lambda: now + 60 + 31  # past exp and its leeway
    with pytest.raises(Unauthorized) as refused:
        verifier.identify_now(token)
    assert refused.value.description == "the token has expired"
    verifier.clock = time.time
    assert verifier.identify_now(token).username == "tina"
    verifier.keys.generation += 1  # as a fetch of the key set does: the memo is not trusted across it
    assert verifier.remembered(token, "") is None


def test_unknown_kids_fetch_the_key_set_at_most_once_per_interval(setup: Setup) -> None:
    from toolrun.errors import Unauthorized

    verifier, clock = _verifier(setup.issuer, min_interval=30)
    verifier.identify_now(setup.issuer.mint())
    assert verifier.keys.fetches == 1
    for step in (0, 30, 29, 1):  # seconds passed since the step before
        clock[0] += step
        for _ in range(10):
            with pytest.raises(Unauthorized):
                verifier.identify_now(setup.issuer.mint(kid="rsa2"))
    # The first fetch at start, then one when 30 s had passed, then one 30 s later: never two within 30 s.
    assert verifier.keys.fetches == 3


def test_an_issuer_that_does_not_answer_is_a_503_not_a_401_or_a_500(tmp_path: Path, setup: Setup) -> None:
    from support.app import servers

    with servers(tmp_path) as make:
        client = make({"oauth_issuer": f"http://127.0.0.1:{free_port()}", "oauth_audience": AUDIENCE}).client
        response = client.get("/whoami", headers=bearer(setup.issuer.mint()))
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert "did not answer" in response.json()["error"]


# -- the UI: a token pasted where a key goes ----------------------------------------------------------------


def test_the_ui_signs_in_with_a_pasted_token(setup: Setup, tmp_path: Path) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    from support.binaries import require_binary
    from test_ui_browser import CHROMIUM_ARGS, build_ui

    chromium = require_binary("chromium")
    settings = {
        **{k: v for k, v in setup.server.env.items() if k.startswith("SVC_OAUTH_")},
        "SVC_UI_ENABLED": True,
        "TOOLRUN_UI_DIST": str(build_ui()),
    }
    token = setup.issuer.mint(sub="uma", groups=["ops", "finance"])
    with ToolrunServer(tmp_path / "ui", setup.server.catalog, settings) as server, sync_api.sync_playwright() as pw:
        server.start()
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(20000)
            page.goto(server.url + "/ui/")
            expect = sync_api.expect
            expect.set_options(timeout=20000)  # generous on a loaded CI box: each step still waits only as needed
            expect(page.get_by_test_id("identity")).to_contain_text("Anonymous")
            page.get_by_role("button", name="Sign in").click()
            dialog = page.get_by_role("dialog", name="Sign in with an API key")
            dialog.get_by_label("API key", exact=True).fill(setup.issuer.mint(exp=int(time.time()) - 120))
            dialog.get_by_role("button", name="Sign in").click()
            expect(dialog.get_by_role("alert")).to_contain_text("not accepted")  # an expired token is refused
            dialog.get_by_label("API key", exact=True).fill(token)
            dialog.get_by_role("button", name="Sign in").click()
            expect(dialog).to_be_hidden()
            expect(page.get_by_test_id("username")).to_have_text("uma")
            expect(page.get_by_test_id("groups")).to_contain_text("finance, ops")
            page.goto(server.url + "/ui/tools/finance.payroll")
            page.get_by_role("button", name="Run", exact=True).click()
            expect(page.get_by_test_id("result-text")).to_have_text("paid")
        finally:
            sync_api.expect.set_options(timeout=5000)  # Playwright's default, for the modules that run after
            browser.close()


def test_mcp_over_stdio_acts_for_the_user_of_a_token_in_toolrun_api_key(setup: Setup, tmp_path: Path) -> None:
    from support.mcp import mcp_stdio

    env = {"SVC_OAUTH_ISSUER": setup.issuer.url, "SVC_OAUTH_AUDIENCE": AUDIENCE}

    async def main() -> Any:
        token = setup.issuer.mint(sub="stella", groups=["finance"])
        async with mcp_stdio(tmp_path, env={**env, "TOOLRUN_API_KEY": token}, catalog=setup.server.catalog) as client:
            return await client.call_tool("whoami", {})

    who = anyio.run(main)
    assert who.structured_content["username"] == "stella"
    assert who.structured_content["tools"] == ["finance.payroll", "pub.echo"]


def test_oauth_without_the_extra_installed_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.access import Access
    from toolrun.errors import UsageError
    from toolrun.settings import Settings

    monkeypatch.setitem(sys.modules, "joserfc", None)  # as when toolrun[oauth] is not installed
    settings = Settings.load(environ={"TOOLRUN_HOME": str(tmp_path), **ON})
    with pytest.raises(UsageError, match=re.escape("pip install 'toolrun[oauth]'")):
        Access.from_settings(settings)


def test_the_issuer_may_be_configured_with_or_without_its_trailing_slash(setup: Setup, tmp_path: Path) -> None:
    from support.app import servers

    with servers(tmp_path) as make:
        client = make({"oauth_issuer": setup.issuer.url + "/", "oauth_audience": AUDIENCE}).client
        for iss in (setup.issuer.url, setup.issuer.url + "/"):  # Auth0's `iss` ends with a slash, most do not
            assert client.get("/whoami", headers=bearer(setup.issuer.mint(iss=iss))).status_code == 200, iss
        other = setup.issuer.mint(iss=setup.issuer.url + "/other")
        assert client.get("/whoami", headers=bearer(other)).status_code == 401
        metadata = client.get("/.well-known/oauth-protected-resource").json()
        assert metadata["authorization_servers"] == [setup.issuer.url + "/"]


def test_mcp_auth_required_answers_anonymous_mcp_callers_with_the_challenge(setup: Setup, tmp_path: Path) -> None:
    from support.app import servers

    flags = {"oauth_issuer": setup.issuer.url, "oauth_audience": AUDIENCE, "mcp_auth_required": True}
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
    )
    with servers(tmp_path) as make:
        client = make(flags).client
        anonymous = client.post("/mcp", headers=headers, content=body)
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == (
            'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp"'
        )
        signed = client.post("/mcp", headers={**headers, **bearer(setup.issuer.mint())}, content=body)
        assert signed.status_code == 200, signed.text
        assert client.get("/tools").status_code == 200  # the REST routes stay open to anonymous callers


# -- edges (issue 35.11) ------------------------------------------------------------------------------------


def test_a_token_header_alg_beyond_latin_1_is_a_401_that_says_why_not_a_500(setup: Setup) -> None:
    payload = _b64(setup.issuer.claims(groups=["admin"]))
    for alg in ("RS256\u0100", "\u0420S256", "RS256\U0001f600", 'RS"25\\6\n'):
        token = f"{_b64({'alg': alg, 'kid': 'rsa1'})}.{payload}.c2ln"
        for path in ("/whoami", "/tools"):
            response = httpx.get(setup.url + path, headers=bearer(token))
            assert response.status_code == 401, (alg, path, response.status_code, response.text)
            challenge = response.headers["www-authenticate"]
            assert challenge.isascii() and 'error="invalid_token"' in challenge, challenge
            assert "algorithm" in challenge and "is not allowed" in challenge, challenge
    assert "Traceback" not in setup.server.log()


def test_a_bearer_that_is_not_a_jwt_is_told_toolrun_needs_jwt_access_tokens(setup: Setup) -> None:
    for opaque in ("opaque-access-token-0123456789", "ya29.a0AfH6SMB", "gho_16C7e42F292c6912E7710c838347Ae178B4a"):
        response = httpx.get(setup.url + "/whoami", headers=bearer(opaque))
        assert response.status_code == 401, response.text
        challenge = response.headers["www-authenticate"]
        assert 'error="invalid_token"' in challenge and "error_description=" in challenge, challenge
        assert "needs JWT access tokens" in challenge, challenge
    # A malformed API key is refused the same way; a revoked or unknown well-formed key stays a plain 401.
    unknown = httpx.get(setup.url + "/whoami", headers={"X-API-Key": "trk_abcdefghij_" + "x" * 30})
    assert unknown.status_code == 401 and "needs JWT" not in unknown.headers.get("www-authenticate", "")


def test_while_the_issuer_is_unreachable_every_valid_token_gets_503_not_401(tmp_path: Path, setup: Setup) -> None:
    from support.app import servers

    with servers(tmp_path) as make:
        client = make({"oauth_issuer": f"http://127.0.0.1:{free_port()}", "oauth_audience": AUDIENCE}).client
        for _ in range(3):  # the first try fetches; the next ones are within oauth_jwks_min_interval
            response = client.get("/whoami", headers=bearer(setup.issuer.mint()))
            assert response.status_code == 503, response.text
            assert response.headers["retry-after"] and "did not answer" in response.json()["error"]
