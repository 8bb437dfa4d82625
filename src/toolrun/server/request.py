"""What the HTTP door reads from a request: the caller's key, query parameters, the JSON body."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.types import Message, Receive, Scope

from ..access import Access, Mode
from ..auth import key_from
from ..errors import (
    Unauthorized,
    UsageError,
)
from ..models import Identity

MAX_PAGE = 100
_INTEGER = re.compile(r"-?[0-9]{1,100}")


def _single(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise UsageError(f"query parameter {name!r} is given more than once")
    return values[0] if values else None


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = _single(request, name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):  # ASCII digits only: int() would also take " 5", "5_0" and "٥"
        raise UsageError(f"query parameter {name!r} must be an integer, not {raw[:40]!r}")
    value = int(raw)
    if not low <= value <= high:
        raise UsageError(f"query parameter {name!r} must be between {low} and {high}")
    return value


def _choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    """An enum query parameter, exactly as documented in /openapi.json (case-sensitive, never empty)."""
    raw = _single(request, name)
    if raw is None:
        return default
    if raw not in choices:
        expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise UsageError(f"{name} must be {expected}, not {raw[:20]!r}")
    return raw


def _bool_param(request: Request, name: str) -> bool:
    return _choice(request, name, ("true", "false"), "false") == "true"


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_no_duplicates)


def parse_json_value(body: bytes) -> Any:
    """Any JSON value, by the one rule of every door: UTF-8, no NaN/Infinity, no duplicate keys."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"body is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    try:
        data = _DECODER.decode(text.lstrip("\ufeff"))
    except RecursionError:
        raise UsageError("malformed JSON: nested too deeply") from None
    except ValueError as exc:
        raise UsageError(f"malformed JSON: {exc}") from None
    return data


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The POST body: empty -> {}, else exactly one JSON object (no NaN, no duplicate keys).

    Only a body of zero bytes counts as empty: whitespace alone is not JSON."""
    if not body:
        return {}
    data = parse_json_value(body)
    if not isinstance(data, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
        raise UsageError(f"body must be a JSON object of parameter name to value, not {kind}")
    return data


class _ToolKey(Convertor[str]):
    """`{key:toolkey}`: the rest of the path, whatever it holds (`path` stops at a newline).

    Any text (slashes and newlines too) is a key: an odd one is an unknown key, with the route's own 404.
    """

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("toolkey", _ToolKey())


async def identity_from_scope(access: Access, scope: Scope, mode: Mode) -> Identity:
    """Who is calling, per the route's auth mode, for every HTTP door (REST routes and /mcp), from the raw ASGI
    scope (no Request or Headers built).

    Modes (`toolrun.access.Mode`): anonymous, optional (or keyed, its other name), required, admin. On every
    mode but anonymous a key that is given must resolve: an invalid, expired or revoked key is a 401, never an
    anonymous call. Raises Unauthorized; a key store that is down raises BackendUnavailable."""
    peer = scope.get("client")
    client = peer[0] if peer else ""
    if mode == "anonymous":
        return Identity(client=client)
    headers: dict[str, str] = {}
    for name, value in scope["headers"]:  # names arrive lower-cased; the first occurrence counts
        if (name == b"x-api-key" or name == b"authorization") and name.decode() not in headers:
            headers[name.decode()] = value.decode("latin-1")
    query: Mapping[str, str] = {}
    if scope.get("query_string"):  # parsing an empty query string costs as much as the rest
        params = QueryParams(scope["query_string"])
        if len(params.getlist("api-key")) > 1:
            raise Unauthorized()  # an ambiguous ?api-key=a&api-key=b is refused, never half-read
        query = params
    key = key_from(headers, query)
    if access.tokens is None:
        return await access.identify(key, mode, client)
    try:
        return await access.identify(key, mode, client)
    except Unauthorized as exc:
        base = access.tokens.config.resource or public_base(scope)
        exc.challenge = bearer_challenge(base, scope, exc if key else None)  # no credential: no error code
        raise


def public_base(scope: Scope) -> str:
    """This server's URL as the client reached it (scheme and Host header): where its metadata lives."""
    host = ""
    for name, value in scope["headers"]:
        if name == b"host":
            host = value.decode("latin-1")
            break
    if not host and scope.get("server"):
        host = f"{scope['server'][0]}:{scope['server'][1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


def bearer_challenge(base: str, scope: Scope, refused: Unauthorized | None) -> str:
    """The `WWW-Authenticate` value of a 401 with OAuth on: the metadata URL, and why a credential was refused."""
    from ..oauth import challenge

    error = ""
    if refused is not None:
        error = refused.oauth_error or "invalid_token"
    return challenge(base, scope.get("path", ""), error, refused.description if refused else "")


def _is_json_media(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def replay(receive: Receive, *messages: Message) -> Receive:
    """A `receive` that hands over `messages` (the body a gate has already read) first, then the client's own
    events (a disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
