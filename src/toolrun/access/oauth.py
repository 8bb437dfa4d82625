"""OAuth 2.1 resource-server mode: bearer JWTs signed by one issuer, beside API keys.

With `oauth_issuer` set, a credential that is shaped like a JWT (three dot-separated parts; an API key
never has a dot) is checked here instead of the key store, and resolves to the same `Identity` a key
gives: the user from `oauth_username_claim`, the groups from `oauth_groups_claim` and from scopes
`<oauth_scope_prefix><group>`. Everything after that (group scoping, 404 for hidden tools, rate-limit
buckets, audit records) is the key's road.

Checks, in order: the header's `alg` is on the allowlist (never `none`, never an HMAC: a public key is
no secret); the `kid` names a signing key of the issuer (RSA, EC or OKP only); the signature (joserfc);
then `iss`, `aud` and `exp` must be there and right, `nbf` and `iat` are checked when present, each with
`LEEWAY` seconds for clock skew. A token that says it is something else than an access token is refused: a header
`typ` other than `at+jwt` or `JWT`, or a `nonce` claim (an OpenID ID token's).

Signing keys come from `oauth_jwks_url`, or from the `jwks_uri` of the issuer's
`/.well-known/openid-configuration`. They are cached, fetched again when a token names an unknown `kid`
or the cache is older than `MAX_AGE`, and never more often than once per `oauth_jwks_min_interval`
seconds: a flood of tokens with made-up `kid`s costs the issuer one request per interval.

joserfc (the `toolrun[oauth]` extra) is imported only when `oauth_issuer` is set.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import BackendUnavailable, Unauthorized, UsageError
from ..models import Identity
from ..settings import SAFE_ALGORITHMS, check_url, parse_users

if TYPE_CHECKING:
    from ..settings import Settings

log = logging.getLogger("toolrun.access.oauth")

LEEWAY = 30  # seconds of clock skew allowed on exp, nbf and iat
MAX_AGE = 3600.0  # seconds after which cached signing keys are fetched again (a removed key stops working)
FETCH_TIMEOUT = 5.0  # seconds for one request to the issuer
WAIT_LIMIT = 2 * FETCH_TIMEOUT  # seconds a request waits for the fetch under way before its 503
MAX_DOCUMENT = 1024 * 1024  # bytes of a discovery document or key set
MAX_TOKEN = 16 * 1024  # characters of a bearer token
_MEMO_MAX = 1024  # verified tokens remembered
KEY_TYPES = ("RSA", "EC", "OKP")
METADATA_PATH = "/.well-known/oauth-protected-resource"


@dataclass(frozen=True, slots=True)
class OAuthConfig:
    """The `oauth_*` settings, checked."""

    issuer: str
    audience: str
    jwks_url: str = ""
    username_claim: str = "sub"
    groups_claim: str = "groups"
    scope_prefix: str = "toolrun:"
    algorithms: tuple[str, ...] = ("RS256", "ES256", "PS256")
    jwks_min_interval: float = 60.0
    resource: str = ""
    users: tuple[tuple[str, str], ...] = ()  # `oauth_users`: (token subject, key-store user) pairs

    def user_for(self, subject: str) -> str | None:
        """The key-store user `oauth_users` maps this token subject to, if any."""
        return next((user for sub, user in self.users if sub == subject), None)

    @classmethod
    def from_settings(cls, settings: Settings) -> OAuthConfig | None:
        """None when `oauth_issuer` is empty (OAuth is off)."""
        if not settings.oauth_issuer:
            return None
        return cls(
            issuer=settings.oauth_issuer,
            audience=settings.oauth_audience,
            jwks_url=settings.oauth_jwks_url,
            username_claim=settings.oauth_username_claim,
            groups_claim=settings.oauth_groups_claim,
            scope_prefix=settings.oauth_scope_prefix,
            algorithms=settings.oauth_algorithms,
            jwks_min_interval=settings.oauth_jwks_min_interval,
            resource=settings.oauth_resource.rstrip("/"),
            users=parse_users(settings.oauth_users),
        )


def fetch_json(url: str) -> dict[str, Any]:
    """GET `url` as a JSON object (bounded size and time); BackendUnavailable when the issuer does not answer."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "toolrun"})
    deadline = time.monotonic() + FETCH_TIMEOUT
    body = b""
    try:
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:
            # FETCH_TIMEOUT bounds each read, not the answer: an issuer that trickles its body a byte at a time
            # would hold the fetch (and every token waiting on it) for as long as it likes. The whole answer has
            # until `deadline`.
            while len(body) <= MAX_DOCUMENT and (chunk := response.read1(64 * 1024)):
                body += chunk
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the answer took over {FETCH_TIMEOUT:g} s")
    except (OSError, ValueError) as exc:
        raise BackendUnavailable(f"the OAuth issuer did not answer {url}: {exc}") from None
    if len(body) > MAX_DOCUMENT:
        raise BackendUnavailable(f"the OAuth issuer's answer at {url} is over {MAX_DOCUMENT} bytes")
    try:
        data = json.loads(body)
    except ValueError:
        raise BackendUnavailable(f"the OAuth issuer's answer at {url} is not JSON") from None
    if not isinstance(data, dict):
        raise BackendUnavailable(f"the OAuth issuer's answer at {url} is not a JSON object")
    return data


def import_keys(jwks: Mapping[str, Any]) -> dict[str, Any]:
    """The signing keys of a JWK set by `kid` (a key without one by its thumbprint); HMAC and encryption
    keys are left out."""
    from joserfc.errors import JoseError
    from joserfc.jwk import import_key

    found: dict[str, Any] = {}
    entries = jwks.get("keys")
    if not isinstance(entries, list):
        raise BackendUnavailable("the OAuth issuer's key set has no `keys` list")
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") not in KEY_TYPES or entry.get("use", "sig") != "sig":
            continue
        try:
            key = import_key(entry)
        except (JoseError, ValueError, TypeError) as exc:
            log.warning("ignoring a signing key of the OAuth issuer that does not import: %s", exc)
            continue
        kid = entry.get("kid")
        found[kid if isinstance(kid, str) else key.thumbprint()] = key
    return found


class SigningKeys:
    """The issuer's signing keys, cached; fetched again on an unknown `kid`, at most once per `min_interval`."""

    def __init__(
        self,
        config: OAuthConfig,
        fetch: Callable[[str], dict[str, Any]] = fetch_json,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.fetch = fetch
        self.clock = clock
        self.keys: dict[str, Any] = {}
        self.jwks_url = config.jwks_url
        self.loaded_at: float | None = None
        self.tried_at: float | None = None
        self.fetches = 0
        self.generation = 0  # moves with every key set loaded: tokens verified with an older set are checked again
        self.failure: str | None = None  # why the last fetch failed (None once one succeeds)
        self.ended = 0  # fetches that have ended (a waiter compares it to know another fetch ran meanwhile)
        self._lock = threading.Lock()
        self._inflight: asyncio.Future[Any] | None = None  # the event loop's fetch under way (`fetched`)

    def find(self, kid: str | None) -> Any:
        """The key for `kid` from the cache, or None (`kid` None: the only key, if there is one)."""
        if kid is None:
            return next(iter(self.keys.values())) if len(self.keys) == 1 else None
        return self.keys.get(kid)

    def wants_fetch(self, kid: str | None) -> bool:
        """Whether a fetch is due for `kid`: the key is unknown or the cache is old, and the last try is
        `min_interval` ago."""
        now = self.clock()
        stale = self.loaded_at is None or now - self.loaded_at >= MAX_AGE
        if self.find(kid) is not None and not stale:
            return False
        return self.tried_at is None or now - self.tried_at >= self.config.jwks_min_interval

    def fetching(self) -> bool:
        """Whether a fetch of the key set is under way."""
        return self._lock.locked()

    def get(self, kid: str | None) -> Any:
        """The key for `kid`, fetching the set again when that is due (blocking: run it off the loop)."""
        if self.wants_fetch(kid) or (self.find(kid) is None and self.fetching()):
            ended = self.ended
            with self._lock:  # a fetch under way is waited for: its keys may hold this kid
                # A caller that waited for another's fetch takes what it found and never fetches again itself:
                # else, with `min_interval` shorter than a slow fetch, each waiter fetched in turn (a flood of N
                # made-up kids cost the issuer N fetches, one after the other, and held every token behind them).
                if self.ended == ended and self.wants_fetch(kid):
                    self.refresh()
        return self.find(kid)

    async def fetched(self, kid: str | None) -> Any:
        """`get` for the event loop: one fetch at a time in one thread, which every request that needs it awaits
        (none holds a thread of its own), for at most WAIT_LIMIT seconds; BackendUnavailable after that."""
        loop = asyncio.get_running_loop()
        running = self._inflight
        if running is None or running.done() or running.get_loop() is not loop:
            running = self._inflight = asyncio.ensure_future(asyncio.to_thread(self.get, kid))
            running.add_done_callback(lambda done: done.cancelled() or done.exception())  # retrieved, even unawaited
        try:
            await asyncio.wait_for(asyncio.shield(running), WAIT_LIMIT)
        except TimeoutError:
            raise BackendUnavailable(
                f"the OAuth issuer has not sent its signing keys within {WAIT_LIMIT:g} s (a fetch is under way)"
            ) from None
        except BackendUnavailable:
            if self.find(kid) is None:
                raise
        return self.find(kid)

    def refresh(self) -> None:
        self.tried_at = self.clock()
        self.fetches += 1
        try:
            if not self.jwks_url:
                self.jwks_url = self.discover()
            keys = import_keys(self.fetch(self.jwks_url))
        except BackendUnavailable as exc:
            self.failure = str(exc)
            if self.loaded_at is None:
                raise
            log.warning("keeping the cached OAuth signing keys: %s", exc)
            return
        finally:
            self.ended += 1
        self.keys, self.loaded_at, self.failure = keys, self.clock(), None
        self.generation += 1

    def unavailable(self) -> None:
        """A token's key is not in the cache and the last fetch failed: the issuer is unreachable, which is the
        server's 503 (try again), never the token's 401 (a client would throw a good token away)."""
        if self.failure is not None:
            raise BackendUnavailable(self.failure)

    def discover(self) -> str:
        """The `jwks_uri` of the issuer's OpenID configuration (whose `issuer` must be the configured one)."""
        issuer = self.config.issuer.rstrip("/")
        document = self.fetch(issuer + "/.well-known/openid-configuration")
        if str(document.get("issuer", "")).rstrip("/") != issuer:
            raise BackendUnavailable(f"the OpenID configuration of {issuer} names another issuer")
        url = document.get("jwks_uri")
        if not isinstance(url, str):
            raise BackendUnavailable(f"the OpenID configuration of {issuer} has no jwks_uri")
        try:
            check_url("jwks_uri", url)
        except UsageError as exc:
            raise BackendUnavailable(str(exc)) from None
        return url


def _refuse(description: str) -> Unauthorized:
    return Unauthorized(f"bearer token refused: {description}", oauth_error="invalid_token", description=description)


_CLAIM_REASONS = {
    "iss": "the token is from another issuer",
    "aud": "the token is not meant for this server (aud)",
    "nbf": "the token is not valid yet (nbf)",
    "iat": "the token was issued in the future (iat)",
}


# The JOSE header `typ` values of an access token (RFC 9068's `at+jwt`, and plain `JWT`), compared without case and
# without an `application/` prefix (RFC 7515 4.1.9). An ID token, a logout token or a DPoP proof says otherwise.
_ACCESS_TYPES = frozenset({"at+jwt", "jwt"})


def _check_type(typ: Any) -> None:
    """Refuse a token whose header `typ` is present and is not an access token's."""
    if typ is None:
        return
    kind = typ.lower().removeprefix("application/") if isinstance(typ, str) else None
    if kind not in _ACCESS_TYPES:
        raise _refuse(f"the token's type (typ {str(typ)[:40]!a}) is not an access token's (at+jwt or JWT)")


def check_claims(claims: dict[str, Any], config: OAuthConfig, now: float) -> None:
    """iss, aud, exp (required), nbf and iat (when present), with LEEWAY; Unauthorized naming the claim."""
    from joserfc.errors import ClaimError, ExpiredTokenError, MissingClaimError
    from joserfc.jwt import JWTClaimsRegistry

    registry = JWTClaimsRegistry(
        now=int(now),
        leeway=LEEWAY,
        # The issuer as configured, with or without a trailing slash (Auth0's `iss` ends with one).
        iss={"essential": True, "values": [config.issuer.rstrip("/"), config.issuer.rstrip("/") + "/"]},
        aud={"essential": True, "value": config.audience},
        exp={"essential": True},
    )
    try:
        registry.validate(claims)
    except ExpiredTokenError:
        raise _refuse("the token has expired") from None
    except MissingClaimError as exc:
        raise _refuse(f"the token has no {exc.claim} claim") from None
    except ClaimError as exc:
        raise _refuse(_CLAIM_REASONS.get(exc.claim, f"the token's {exc.claim} claim is not valid")) from None
    if "nonce" in claims:  # an OpenID ID token answers a sign-in's nonce; an access token never carries one
        raise _refuse("the token carries a nonce: it is an OpenID ID token, not an access token")


def _strings(value: Any) -> list[str]:
    """A claim that holds names: a list of strings, or one string of names separated by spaces."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def groups_from(claims: Mapping[str, Any], config: OAuthConfig) -> frozenset[str]:
    """The groups claim (a leading `/` of a Keycloak group path removed) and scopes `<prefix><group>`."""
    from .apikeys import GROUP_RE

    names = [g.removeprefix("/") for g in _strings(claims.get(config.groups_claim))]
    if config.scope_prefix:
        scopes = _strings(claims.get("scope")) + _strings(claims.get("scp"))
        names += [s[len(config.scope_prefix) :] for s in scopes if s.startswith(config.scope_prefix)]
    return frozenset(n for n in names if GROUP_RE.match(n))


def identity_from(token: str, claims: Mapping[str, Any], config: OAuthConfig, client: str) -> Identity:
    """The Identity a verified token's claims give; the audit trail's `key_prefix` is `jwt:` and the
    token's `jti` (or a short hash of the token): never the token."""
    from .apikeys import USERNAME_RE

    subject = claims.get(config.username_claim)
    if not isinstance(subject, str) or not subject or len(subject) > 256 or not subject.isprintable():
        raise _refuse(f"the token has no usable {config.username_claim} claim")
    mapped = config.user_for(subject)
    if mapped is None and not USERNAME_RE.match(subject):
        # The same rules as a user of the key store: ASCII letters, digits and _ . @ - only, so no look-alike
        # (a Cyrillic `а` in `аdmin1`) passes for another person; `oauth_users` maps any other subject.
        raise _refuse(
            f"the token's {config.username_claim} claim is not a valid user name (letters, digits and _ . @ -, "
            "at most 64): map it to a user with the oauth_users setting"
        )
    username = mapped or subject
    email = claims.get("email")
    jti = claims.get("jti")
    ref = jti if isinstance(jti, str) and jti.isprintable() and jti else hashlib.sha256(token.encode()).hexdigest()
    return Identity(
        username,
        email if isinstance(email, str) else "",
        groups_from(claims, config),
        anonymous=False,
        client=client,
        key_prefix="jwt:" + ref[:16],
        source="token",
        person=f"user:{mapped}" if mapped else f"token:{subject}",
    )


class TokenVerifier:
    """Bearer JWT -> Identity, for `Access.identify`."""

    def __init__(self, config: OAuthConfig, keys: SigningKeys | None = None) -> None:
        self.config = config
        self.keys = keys or SigningKeys(config)
        self.allowed = frozenset(config.algorithms) & SAFE_ALGORITHMS
        self.clock = time.time
        # Tokens that verified, until they expire or the key set changes: a client sends the same token on
        # every request until it expires. A hit costs about 2 us instead of 70 (RS256) or 200 (ES256).
        self._memo: dict[str, tuple[Identity, float, int]] = {}

    def remembered(self, token: str, client: str) -> Identity | None:
        hit = self._memo.get(token)
        if hit is None:
            return None
        identity, expires, generation = hit
        if generation != self.keys.generation or self.clock() >= expires + LEEWAY:
            del self._memo[token]
            return None
        return replace(identity, client=client)

    def remember(self, token: str, claims: Mapping[str, Any], identity: Identity) -> Identity:
        if len(self._memo) >= _MEMO_MAX:  # bounded: only tokens that verified get in, and the memo starts over
            self._memo.clear()
        self._memo[token] = (replace(identity, client=""), float(claims["exp"]), self.keys.generation)
        return identity

    def header(self, token: str) -> tuple[str, str | None]:
        """(alg, kid) of the token's protected header, the alg checked against the allowlist."""
        from joserfc.errors import JoseError
        from joserfc.jws import extract_compact

        if len(token) > MAX_TOKEN:
            raise _refuse("the token is too long")
        try:
            header = extract_compact(token.encode("ascii")).protected
        except (JoseError, ValueError, UnicodeEncodeError):
            raise _refuse("the token is not a well-formed JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in self.allowed:
            raise _refuse(f"the token's algorithm {str(alg)[:20]!a} is not allowed")
        if kid is not None and not isinstance(kid, str):
            raise _refuse("the token's kid is not a string")
        _check_type(header.get("typ"))
        return alg, kid

    def claims(self, token: str, alg: str, key: Any) -> dict[str, Any]:
        from joserfc import jwt
        from joserfc.errors import JoseError

        if key is None:
            self.keys.unavailable()
            raise _refuse("the token is signed with a key the issuer does not list (kid)")
        try:
            claims = jwt.decode(token, key, algorithms=[alg]).claims
        except (JoseError, ValueError):
            raise _refuse("the token's signature does not verify") from None
        check_claims(claims, self.config, self.clock())
        return claims

    async def identify(self, token: str, client: str = "") -> Identity:
        known = self.remembered(token, client)
        if known is not None:
            return known
        alg, kid = self.header(token)
        if self.keys.wants_fetch(kid) or (self.keys.find(kid) is None and self.keys.fetching()):
            # The only blocking step, off the event loop. A fetch already under way (another request's, in a
            # fresh worker) is waited for: its keys may be the ones this token needs.
            key = await self.keys.fetched(kid)
        else:
            key = self.keys.find(kid)
        claims = self.claims(token, alg, key)
        return self.remember(token, claims, identity_from(token, claims, self.config, client))

    def identify_now(self, token: str, client: str = "") -> Identity:
        known = self.remembered(token, client)
        if known is not None:
            return known
        alg, kid = self.header(token)
        claims = self.claims(token, alg, self.keys.get(kid))
        return self.remember(token, claims, identity_from(token, claims, self.config, client))

    def inspect(self, token: str) -> tuple[Identity | None, dict[str, Any]]:
        """`toolrun access explain TOKEN`: the identity (None when refused) and what the token says."""
        facts: dict[str, Any] = {"issuer": self.config.issuer, "audience": self.config.audience}
        try:
            identity = self.identify_now(token)
        except Unauthorized as exc:
            facts.update(state="refused", reason=exc.description)
            return None, facts
        facts["state"] = "valid"
        return identity, facts


def verifier(settings: Settings) -> TokenVerifier | None:
    """The verifier the settings ask for, or None when OAuth is off."""
    config = OAuthConfig.from_settings(settings)
    if config is None:
        return None
    try:
        import joserfc  # noqa: F401
    except ImportError:
        raise UsageError(
            "setting oauth_issuer needs the joserfc package, which is not installed: pip install 'toolrun[oauth]'"
        ) from None
    return TokenVerifier(config)


def _quoted(text: str) -> str:
    """`text` fit for a quoted header parameter: ASCII only (a header is Latin-1 at most; anything else is
    escaped as `\\uXXXX` text with the backslash dropped), no backslash, no double quote."""
    ascii_text = text.encode("ascii", "backslashreplace").decode("ascii")
    return ascii_text.replace("\\", "").replace('"', "'")


def metadata_url(base: str, path: str) -> str:
    """Where the protected-resource metadata of the resource at `path` is: `/mcp` has its own document."""
    return base + METADATA_PATH + ("/mcp" if path == "/mcp" or path.startswith("/mcp/") else "")


def challenge(base: str, path: str, error: str = "", description: str = "") -> str:
    """The `WWW-Authenticate` value of a 401: where to find the metadata, and why (when a token was refused)."""
    parts = []
    if error:
        parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_quoted(description)}"')
    parts.append(f'resource_metadata="{_quoted(metadata_url(base, path))}"')
    return "Bearer " + ", ".join(parts)


def resource_metadata(config: OAuthConfig, base: str, resource_path: str) -> dict[str, Any]:
    """The protected-resource metadata document of this server (`resource_path`: "" or "/mcp")."""
    return {
        "resource": (config.resource or base) + resource_path,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_signing_alg_values_supported": list(config.algorithms),
        "resource_name": "toolrun",
    }
