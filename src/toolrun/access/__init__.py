"""Access: who a caller is, from the key store behind it.

The one place that holds the key store (SQLite in the data dir, or Redis with a `redis_url`: opened by
`toolrun.state`) and turns a presented key into an Identity. Doors (the CLI, HTTP routes, MCP) only
find the key in their own transport (a header, a query parameter, an environment variable) and call
`identify`; none of them imports a key store. Cheap to import: `toolrun keys` loads this, not the server.

Modes of `identify`:
- `anonymous`: never reads a key (health checks, metrics, the OpenAPI document).
- `optional` (and `keyed`, the name the MCP door uses): no key is an anonymous caller; a key that
  is given must resolve (an invalid, expired or revoked key is refused, never anonymous).
- `required`: a key must resolve; `admin`: and its user must be in the `admin` group.
A refusal is `Unauthorized`, whatever the reason; a store that is down raises `BackendUnavailable`.

With `oauth_issuer` set, a credential shaped like a JWT is checked by `toolrun.access.oauth` instead of the key
store and gives the same kind of Identity (docs/oauth.md); everything downstream is the key's road.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from ..errors import Unauthorized, UsageError
from ..models import Identity

if TYPE_CHECKING:
    from ..settings import Settings
    from ..state import KeyStore
    from .apikeys import KeyRecord, User
    from .oauth import TokenVerifier

Mode = Literal["anonymous", "optional", "keyed", "required", "admin"]


def looks_like_jwt(credential: str) -> bool:
    """A JWS compact token has exactly two dots; an API key (`trk_...`) has none."""
    return credential.count(".") == 2


NOT_A_JWT = (
    "toolrun needs JWT access tokens: this credential is neither a JWT (three dot-separated parts) nor an API key; "
    "ask the issuer for JWT access tokens (an opaque token cannot be checked here)"
)


def _not_a_jwt(key: str) -> Unauthorized:
    """With OAuth on, a credential that is neither a JWT nor shaped like an API key: the challenge says why."""
    return Unauthorized(f"bearer token refused: {NOT_A_JWT}", oauth_error="invalid_token", description=NOT_A_JWT)


def _shaped_like_key(key: str) -> bool:
    from .apikeys import split_key

    return split_key(key) is not None


def _decide(user: User | None, key: str | None, mode: Mode, client: str) -> Identity:
    if user is None:
        if key or mode in ("required", "admin"):
            raise Unauthorized()
        return Identity(client=client)
    from .apikeys import split_key

    return _admin_check(user.identity(client, (split_key(key) or "") if key else ""), mode)


def _admin_check(identity: Identity, mode: Mode) -> Identity:
    if mode == "admin" and not identity.is_admin:
        raise Unauthorized(oauth_error="insufficient_scope", description="this route needs group admin")
    return identity


class Access:
    """Identities from keys, and key administration, over one key store."""

    def __init__(self, store: KeyStore, tokens: TokenVerifier | None = None) -> None:
        self.store = store
        self.tokens = tokens  # bearer JWTs (toolrun.access.oauth), when oauth_issuer is set

    @classmethod
    def from_settings(cls, settings: Settings) -> Access:
        tokens = None
        if settings.oauth_issuer:
            from .oauth import verifier

            tokens = verifier(settings)
        from ..state import open_keys

        return cls(open_keys(settings), tokens)

    # -- who is calling --------------------------------------------------------------------------

    async def identify(self, key: str | None, mode: Mode, client: str = "") -> Identity:
        """The caller presenting `key` (None: no key given), per `mode` (see the module docstring)."""
        if mode == "anonymous":
            return Identity(client=client)
        if key and self.tokens is not None and looks_like_jwt(key):
            return _admin_check(await self.tokens.identify(key, client), mode)
        if key and self.tokens is not None and not _shaped_like_key(key):
            raise _not_a_jwt(key)
        user = await self.store.aresolve(key) if key else None
        return _decide(user, key, mode, client)

    def identify_now(self, key: str | None, mode: Mode, client: str = "") -> Identity:
        """`identify` without an event loop (MCP over stdio checks its key before it starts one)."""
        if mode == "anonymous":
            return Identity(client=client)
        if key and self.tokens is not None and looks_like_jwt(key):
            return _admin_check(self.tokens.identify_now(key, client), mode)
        if key and self.tokens is not None and not _shaped_like_key(key):
            raise _not_a_jwt(key)
        user = self.store.resolve(key) if key else None
        return _decide(user, key, mode, client)

    async def ping(self) -> None:
        """Raises when the key store cannot answer (a readiness check)."""
        await self.store.aping()

    # -- administration (`toolrun keys`, GET /users) -----------------------------------------------

    def create_key(
        self,
        username: str,
        groups: list[str],
        email: str = "",
        expires_in: float | None = None,
        set_groups: bool = False,
    ) -> tuple[str, KeyRecord]:
        """A new key, minted here and kept by the store (which only keeps what it is given); an existing user's groups
        change only with `set_groups` (they apply to every key)."""
        from .apikeys import mint

        key, minted = mint(username, groups, email, expires_in, set_groups)
        self.store.add_key(minted)
        return key, minted.record

    def revoke(self, prefix: str, at: float | None = None) -> bool:
        return self.store.revoke(prefix, at)

    def rotate(self, prefix: str, grace: float = 0.0, expires_in: float | None = None) -> tuple[str, KeyRecord, float]:
        from .apikeys import rotate_key

        return rotate_key(self.store, prefix, grace, expires_in)

    def get_user(self, username: str) -> User | None:
        return self.store.get_user(username)

    def set_groups(self, username: str, groups: list[str]) -> bool:
        return self.store.set_groups(username, groups)

    def delete_user(self, username: str) -> int | None:
        return self.store.delete_user(username)

    def list_users(self) -> list[User]:
        return self.store.list_users()

    def list_keys(self) -> list[KeyRecord]:
        return self.store.list_keys()

    def key_rows(self) -> list[dict[str, Any]]:
        """Every key: prefix, username, groups, created_at, expires_at (ISO 8601 or None) and state."""
        from .apikeys import iso

        groups = {u.username: list(u.groups) for u in self.store.list_users()}
        return [
            {
                "prefix": r.prefix,
                "username": r.username,
                "groups": groups.get(r.username, []),
                "created_at": iso(r.created_at),
                "expires_at": iso(r.expires_at),
                "state": r.state(),
            }
            for r in self.store.list_keys()
        ]

    async def users(self, with_keys: bool) -> list[dict[str, Any]]:
        """Every user (username, email, groups); if asked, the newest working key's metadata (`key`) and
        every key with its state (`keys`)."""
        from .apikeys import newest_key

        users = await self.store.alist_users()
        records = await self.store.alist_keys() if with_keys else []
        body = []
        for user in users:
            item: dict[str, Any] = {"username": user.username, "email": user.email, "groups": list(user.groups)}
            if with_keys:
                newest = newest_key(records, user.username)
                item["key"] = newest.metadata() if newest else None
                # Every key of the user, oldest first, with its state: active, expired or revoked.
                item["keys"] = [r.details() for r in records if r.username == user.username]
            body.append(item)
        return body

    # -- explanations (`toolrun access explain`, `toolrun keys test`, GET /whoami?explain=) ---------

    async def explain(
        self, service: Any, username: str, tool_key: str, *, limiter: Any = None, settings: Any = None
    ) -> dict[str, Any]:
        """Why `username` may (not) see and call `tool_key` (see toolrun.access.explain)."""
        from .explain import explain

        return await explain(
            tool_key=tool_key,
            tool=service.lookup(tool_key),
            username=username,
            store=self.store,
            limiter=limiter,
            settings=settings,
        )

    async def explain_token(
        self, service: Any, token: str | Identity, tool_key: str, *, limiter: Any = None, settings: Any = None
    ) -> dict[str, Any]:
        """`explain` for a bearer token (OAuth on), given as the token itself or as the identity it gave."""
        from .explain import explain_token

        if self.tokens is None:
            raise UsageError("this looks like a bearer token, but OAuth is off (set oauth_issuer)")
        if isinstance(token, Identity):
            caller: Identity | None = token
            facts: dict[str, Any] = {"issuer": self.tokens.config.issuer, "state": "valid"}
        else:
            caller, facts = self.tokens.inspect(token)
        return await explain_token(
            tool_key=tool_key,
            tool=service.lookup(tool_key),
            caller=caller,
            token=facts,
            limiter=limiter,
            settings=settings,
        )

    def key_report(self, key: str, tools: Any = None) -> dict[str, Any] | None:
        """Whose `key` is, its state and (given the catalog's tools) what it may call; None if unknown."""
        from .explain import key_report

        found = self.store.inspect(key)
        return key_report(found[0], found[1], tools) if found is not None else None
