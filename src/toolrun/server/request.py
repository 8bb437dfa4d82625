"""What the HTTP door reads from a request, for every road (REST, /mcp, the UI's routes): the head, the body,
the caller's key, query parameters and the JSON value of a body.

The head is read once per request (`head`): one dict of every header's first value. The body is read by one
reader (`read_body`) with one rule: at most `max_body_bytes` (whether announced by Content-Length or streamed in
chunks) within `request_timeout` seconds; each door turns its refusals into its own answer (REST: `Type: message`
text or the JSON error of its route; /mcp: a JSON-RPC error).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.types import Message, Receive, Scope

from ..access import Access, Mode
from ..access.apikeys import key_from
from ..errors import PayloadTooLarge, RequestTimeout, Unauthorized, UsageError
from ..models import Identity

MAX_PAGE = 100
_INTEGER = re.compile(r"-?[0-9]{1,100}")

# -- the head -------------------------------------------------------------------------------------------------------

HEAD = "toolrun.head"  # the scope key `head` keeps a request's parsed head under (a cache: see `head`)
GONE_TEXT = "the client closed the connection before sending the whole body"


class Head(dict[bytes, bytes]):
    """A request's header lines, read once: each name (lower-cased, as ASGI servers give it) to its first value.

    The first occurrence counts for every header, as in Starlette's `Headers.get`, which the MCP SDK reads
    them with. `times`, `joined` and `any_named` answer what a repeated header needs (the Host and the
    Mcp-Session-Id a door refuses to see twice, the Prefer and Accept lists HTTP allows to be split over
    several lines); they look at the raw lines only when some header was repeated."""

    __slots__ = ("raw",)
    raw: list[tuple[bytes, bytes]]  # the header lines as the server gave them

    def text(self, name: bytes) -> str | None:
        """The header's first value as text (latin-1, as HTTP has it), None when absent."""
        value = self.get(name)
        return None if value is None else value.decode("latin-1")

    def times(self, name: bytes) -> int:
        """How many lines of the head carry `name`."""
        if len(self) == len(self.raw):  # no header repeated: the common case
            return 1 if name in self else 0
        return sum(1 for line, _ in self.raw if line == name)

    def joined(self, name: bytes) -> bytes:
        """Every value of `name`, comma-joined (how HTTP combines a list header given on several lines)."""
        if len(self) == len(self.raw):
            return self.get(name, b"")
        return b",".join(value for line, value in self.raw if line == name)

    def any_named(self, prefix: bytes) -> bool:
        """Whether any header's name starts with `prefix` (`mcp-param-`)."""
        return any(name.startswith(prefix) for name in self)


def head(scope: Scope) -> Head:
    """The request's head, parsed once: every layer that reads a header asks here.

    The parsed head is kept in the scope, keyed to the very header list it was read from: a layer that
    replaces `scope["headers"]` gets a fresh one, never a stale one. (A cache, not a hand-over: no layer
    depends on another having read it first.)"""
    raw = scope["headers"]
    cached: Head | None = scope.get(HEAD)
    if cached is not None and cached.raw is raw:
        return cached
    parsed = scope[HEAD] = Head(reversed(raw))  # built in C, no loop here; reversed: the first occurrence wins
    parsed.raw = raw
    return parsed


# -- the body -------------------------------------------------------------------------------------------------------


async def read_body(receive: Receive, length: bytes | None, limit: int, deadline: float) -> bytes | None:
    """The whole request body, by the one rule of every door; None when the client went away first.

    At most `limit` bytes, whether a Content-Length announces more (refused before reading) or a chunked body
    grows past it (refused once it does): PayloadTooLarge. A Content-Length that is not a number: UsageError.
    A body still on its way `deadline` seconds after the reading starts: RequestTimeout."""
    if length is not None:
        try:
            announced = int(length)
        except ValueError:
            raise UsageError("Content-Length is not a number") from None
        if announced > limit:
            raise PayloadTooLarge(limit)
    # uvicorn's receive() returns at once when the whole body has arrived (the common case: a small body comes
    # in the packet of the head); only a body still on its way needs the deadline. (`more_body` is uvicorn's
    # request cycle's own flag; any other server, or a later uvicorn without it, gets the deadline.)
    cycle = getattr(receive, "__self__", None)
    if getattr(cycle, "more_body", True) is False:
        return await _read(receive, limit)
    try:
        async with asyncio.timeout(deadline):  # asyncio.timeout, not wait_for: no task per request
            return await _read(receive, limit)
    except TimeoutError:
        raise RequestTimeout(deadline) from None


async def _read(receive: Receive, limit: int) -> bytes | None:
    message = await receive()
    if message["type"] != "http.request":
        return None
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False) and len(body) <= limit:
        return body  # the whole body in one message: no copy
    chunks = bytearray(body)
    while True:
        if len(chunks) > limit:
            raise PayloadTooLarge(limit)
        if not message.get("more_body", False):
            return bytes(chunks)
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks += message.get("body", b"")


async def require_body(receive: Receive, length: bytes | None, limit: int, deadline: float) -> bytes:
    """`read_body` for the REST road: a client gone before its whole body is a UsageError (400) there."""
    body = await read_body(receive, length, limit, deadline)
    if body is None:
        raise UsageError(GONE_TEXT)
    return body


UNPARSED: Any = object()  # a `Posted` body of a type that is not JSON: read (capped), not parsed
Posted = tuple[bytes, Any]  # a POST body read by /mcp's key gate, and its JSON value (or UNPARSED)


def body_message(body: bytes) -> Message:
    """The one `http.request` message that hands a body already read to the app behind (see `replay`)."""
    return {"type": "http.request", "body": body, "more_body": False}


# -- query parameters -----------------------------------------------------------------------------------------------


def single(request: Request, name: str) -> str | None:
    values = request.query_params.getlist(name)
    if len(values) > 1:
        raise UsageError(f"query parameter {name!r} is given more than once")
    return values[0] if values else None


def int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = single(request, name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):  # ASCII digits only: int() would also take " 5", "5_0" and "٥"
        raise UsageError(f"query parameter {name!r} must be an integer, not {raw[:40]!r}")
    value = int(raw)
    if not low <= value <= high:
        raise UsageError(f"query parameter {name!r} must be between {low} and {high}")
    return value


_DECIMAL = re.compile(r"(?:0|1)(?:\.[0-9]{1,6})?|\.[0-9]{1,6}")


def score_param(request: Request, name: str, default: float) -> float:
    """A score from 0 to 1 (`min_score`): a decimal number, at most 6 places."""
    raw = single(request, name)
    if raw is None:
        return default
    if not _DECIMAL.fullmatch(raw) or float(raw) > 1:
        raise UsageError(f"query parameter {name!r} must be a number from 0 to 1, not {raw[:40]!r}")
    return float(raw)


def choice(request: Request, name: str, choices: tuple[str, ...], default: str) -> str:
    """An enum query parameter, exactly as documented in /openapi.json (case-sensitive, never empty)."""
    raw = single(request, name)
    if raw is None:
        return default
    if raw not in choices:
        expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
        raise UsageError(f"{name} must be {expected}, not {raw[:20]!r}")
    return raw


def bool_param(request: Request, name: str) -> bool:
    return choice(request, name, ("true", "false"), "false") == "true"


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
    given = head(scope)
    headers: dict[str, str] = {}  # what key_from reads: the first of each
    if (value := given.get(b"x-api-key")) is not None:
        headers["x-api-key"] = value.decode("latin-1")
    if (value := given.get(b"authorization")) is not None:
        headers["authorization"] = value.decode("latin-1")
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
    host = head(scope).text(b"host") or ""
    if not host and scope.get("server"):
        host = f"{scope['server'][0]}:{scope['server'][1]}"
    return f"{scope.get('scheme', 'http')}://{host}"


def bearer_challenge(base: str, scope: Scope, refused: Unauthorized | None) -> str:
    """The `WWW-Authenticate` value of a 401 with OAuth on: the metadata URL, and why a credential was refused."""
    from ..access.oauth import challenge

    error = ""
    if refused is not None:
        error = refused.oauth_error or "invalid_token"
    return challenge(base, scope.get("path", ""), error, refused.description if refused else "")


def is_json_media(content_type: str) -> bool:
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
