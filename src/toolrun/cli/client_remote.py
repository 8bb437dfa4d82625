"""The remote implementation of the CLI's client (cli/client.py): a running toolrun server's REST routes, for
`toolrun --url URL list|describe|call|search|jobs` and `toolrun access explain --url URL`.

Standard library only (urllib, imported on the first request), so the remote CLI starts as fast as the
local one and never loads the server stack. Every answer is turned back into what the local commands work
with: tool entries into ToolSpecs, the server's errors into the same ToolrunError classes (so the CLI maps
them to the same exit codes), and a call's result into a CallResult carrying the command's exit code,
output and timeout flag.

The call asks `POST /tools/{key}` for JSON (`Accept: application/json`): the server then answers
with the structured result (`returncode`, `stdout`, `stderr`, `timed_out`, or `result` for fn
tools) instead of the plain text the route gives by default.
"""

from __future__ import annotations

import builtins
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode, urlsplit

from ..errors import (
    BackendUnavailable,
    Conflict,
    Forbidden,
    NotFound,
    Overloaded,
    ParamError,
    RateLimited,
    ToolFailed,
    ToolrunError,
    Unauthorized,
    UsageError,
)
from ..models import EXEC_RETURN_TYPE, CallResult, ExecResult, Output, Param, ToolSpec

if TYPE_CHECKING:
    from urllib.error import HTTPError

_SUMMARY = re.compile(r"^([A-Za-z]+): (.*)$", re.DOTALL)


class RemoteError(ToolrunError):
    """The server cannot be reached, or answered something that is not toolrun's."""

    exit_code = 69


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return tuple(value) if isinstance(value, list) else None


def tool_from_entry(entry: dict[str, Any]) -> ToolSpec:
    """A tool entry (GET /tools/{key}) as a ToolSpec for the CLI's printers and argument parser.

    The entry does not say exec or curl: a tool with the exec return type shows as `exec`."""
    params = tuple(
        Param(
            name=str(p.get("name", "")),
            type=str(p.get("type", "str")),
            required=bool(p.get("required", False)),
            default=p.get("default"),
            description=str(p.get("description") or ""),
            example=p.get("example"),
            enum=_tuple(p.get("enum")),
            pattern=p.get("pattern"),
            min=p.get("min"),
            max=p.get("max"),
            secret=p.get("secret") is True,
        )
        for p in entry.get("params") or []
        if isinstance(p, dict)
    )
    key = str(entry.get("key", ""))
    groups = tuple(str(g) for g in entry.get("groups") or [])
    return_type = str(entry.get("return_type", "unknown"))
    approval: dict[str, Any] = entry["approval"] if isinstance(entry.get("approval"), dict) else {}
    given = entry.get("output")
    output = None
    if isinstance(given, dict) and given.get("format") in ("json", "lines"):
        schema = given.get("schema")
        output = Output(str(given["format"]), schema if isinstance(schema, dict) else None)
    return ToolSpec(
        key=key,
        name=key.rsplit(".", 1)[-1],
        kind="exec" if return_type == EXEC_RETURN_TYPE or output is not None else "fn",
        groups=groups,
        public="public" in groups,
        description=str(entry.get("description") or ""),
        params=params,
        return_type=return_type,
        example=str(entry.get("example") or ""),
        annotations=dict(entry["annotations"]) if isinstance(entry.get("annotations"), dict) else {},
        keywords=tuple(str(k) for k in entry.get("keywords") or []),
        approval=bool(approval),
        approvers=tuple(str(g) for g in approval.get("approvers") or ()),
        run_async=entry.get("async") is True,
        output=output,
    )


class Remote:
    """One server: its base URL and the API key sent with every request (X-API-Key)."""

    def __init__(self, url: str, api_key: str | None = None, timeout: float = 300.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise UsageError(f"--url {url!r}: expected http://host:port or https://host")
        self.url = url.rstrip("/")
        self.api_key = api_key or None
        self.timeout = timeout
        self._entries: dict[str, dict[str, Any]] = {}
        self.last_headers: Any = {}  # the headers of the last answer (GET /jobs names its next page there)

    # -- transport -------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None, accept: str = "application/json") -> Any:
        try:
            return self._request(method, path, body, accept)
        except NotFound:
            # The tool routes treat a refused key as no key (public tools only): say so, rather
            # than a bare "not found" for a tool the key's owner would see.
            if self.api_key and not path.startswith("/whoami"):
                try:
                    self._request("GET", "/whoami", None, accept)
                except Unauthorized:
                    raise Unauthorized(
                        "the server refused the API key (invalid, expired or revoked); "
                        "without a valid key only public tools are visible"
                    ) from None
            raise

    def _request(self, method: str, path: str, body: bytes | None, accept: str) -> Any:
        from urllib.error import HTTPError, URLError
        from urllib.request import Request, urlopen

        headers = {"Accept": accept, "User-Agent": "toolrun-cli"}
        if self.api_key:
            headers["X-API-Key"] = self.api_key
        if body is not None:
            headers["Content-Type"] = "application/json"
        req = Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with urlopen(req, timeout=self.timeout) as resp:
                data = resp.read()
                content_type = resp.headers.get("Content-Type", "")
                self.last_headers = resp.headers
        except HTTPError as exc:
            raise self._error(exc) from None
        except (URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RemoteError(f"cannot reach {self.url}: {reason}") from None
        if not content_type.startswith("application/json"):
            raise RemoteError(f"{self.url}{path} answered {content_type or 'no content type'}, not JSON")
        try:
            return json.loads(data)
        except ValueError:
            raise RemoteError(f"{self.url}{path} answered malformed JSON") from None

    def _error(self, exc: HTTPError) -> ToolrunError:
        """The server's error as the ToolrunError the local command would raise (same message, exit code)."""
        status = exc.code
        raw = exc.read().decode("utf-8", "replace")
        message, kind = raw.strip(), ""
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if isinstance(body, dict) and isinstance(body.get("error"), str):
            message, kind = body["error"], str(body.get("type", ""))
        else:
            match = _SUMMARY.match(message.splitlines()[-1] if message else "")
            if match:
                kind, message = match.group(1), match.group(2)
        if status == 401:
            return Unauthorized("the server refused the API key (missing, invalid, expired or revoked)")
        if status == 500:
            return ToolFailed(type(kind or "Error", (Exception,), {})(message))
        cls: type[ToolrunError] = {
            400: ParamError if kind == "ParamError" else UsageError,
            403: Forbidden,
            404: NotFound,
            409: Conflict,
            408: UsageError,
            413: UsageError,
            415: UsageError,
            429: RateLimited,
            503: Overloaded if kind == "Overloaded" else BackendUnavailable,
        }.get(status, RemoteError)
        if cls is NotFound and message == "not found":
            message = "not found on the server"
        if cls is RemoteError:
            message = f"HTTP {status}: {message[:500]}"
        error = cls.__new__(cls)  # the server already wrote the message: keep it as it is
        Exception.__init__(error, message)
        if cls is RateLimited:
            retry = exc.headers.get("Retry-After", "1")
            error.retry_after = int(retry) if retry.isdigit() else 1  # type: ignore[attr-defined]
        return error

    # -- the routes ------------------------------------------------------------------------------

    def list(self, group: str | None = None) -> list[ToolSpec]:
        """The tools the key may see; each entry as sent is kept, so `entry` answers from it."""
        entries = self.request("GET", "/tools")
        if not isinstance(entries, list):
            raise RemoteError(f"{self.url}/tools did not answer a list of tools")
        self._entries.update((str(e.get("key", "")), e) for e in entries if isinstance(e, dict))
        tools = [tool_from_entry(e) for e in entries if isinstance(e, dict)]
        return [t for t in tools if group in t.groups] if group else tools

    def describe(self, key: str) -> ToolSpec:
        return tool_from_entry(self.entry(key))

    def entry(self, key: str) -> dict[str, Any]:
        """The server's tool entry as it sent it (with what only the server knows: whether its host can enforce
        the tool's sandbox); asked once per key, `describe` reads the same answer."""
        if key not in self._entries:
            entry = self.request("GET", "/tools/" + quote(key, safe=""))
            if not isinstance(entry, dict):
                raise RemoteError(f"{self.url}/tools/{key} did not answer a tool entry")
            self._entries[key] = entry
        return self._entries[key]

    def warnings(self, key: str) -> builtins.list[str]:
        """None: the server checked its catalog when it loaded it, and logs what it found."""
        return []

    def search(
        self, query: str, offset: int = 0, limit: int = 10, min_score: float | None = None, explain: bool = False
    ) -> dict[str, Any]:
        asked: dict[str, Any] = {"q": query, "offset": offset, "limit": limit}
        if min_score is not None:
            asked["min_score"] = f"{min_score:.6f}".rstrip("0").rstrip(".") or "0"
        if explain:
            asked["explain"] = "1"
        page = self.request("GET", "/search?" + urlencode(asked))
        if not isinstance(page, dict):
            raise RemoteError(f"{self.url}/search did not answer a page")
        page["tools"] = [tool_from_entry(e) for e in page.get("items") or [] if isinstance(e, dict)]
        return page

    def explain(self, user: str, tool: str) -> dict[str, Any]:
        """`toolrun access explain` answered by the server (GET /whoami?explain=TOOL&user=USER: admins only),
        from its own settings and live rate-limit buckets."""
        query = urlencode({"explain": tool, "user": "-" if user in ("", "anonymous") else user})
        try:
            body = self.request("GET", "/whoami?" + query)
        except Unauthorized:
            raise Unauthorized(
                "the server explains access to admins only: pass an admin's key (--api-key or TOOLRUN_API_KEY)"
            ) from None
        if not isinstance(body, dict) or not isinstance(body.get("explain"), dict):
            raise RemoteError(f"{self.url}/whoami did not answer an explanation")
        answer: dict[str, Any] = body["explain"]
        answer["server"] = self.url
        return answer

    def plan(self, key: str, args: dict[str, Any]) -> dict[str, Any]:
        raise UsageError("--dry-run shows what would run on this machine: it does not apply with --url")

    def call(self, key: str, args: dict[str, Any]) -> tuple[CallResult | None, dict[str, Any]]:
        """Run the tool on the server: (the result, the server's JSON payload as sent). A call the server
        answers with a job (202: approval, async) is (None, its `{job, status}`)."""
        payload = self.submit(key, args)
        if is_job(payload):
            return None, payload
        return result_from_payload(key, payload), payload

    def submit(self, key: str, args: dict[str, Any]) -> dict[str, Any]:
        """POST the call: the result payload, or `{job, status}` when the server made it a job."""
        body = json.dumps(args, ensure_ascii=False).encode("utf-8")
        payload = self.request("POST", "/tools/" + quote(key, safe=""), body)
        if not isinstance(payload, dict):
            raise RemoteError(f"{self.url}/tools/{key} did not answer a call result")
        return payload

    # -- jobs (docs/jobs.md) ---------------------------------------------------------------------

    def jobs(self, status: str | None = None, limit: int | None = None) -> builtins.list[dict[str, Any]]:
        """Every page of GET /jobs (each names the next in `X-Next-Cursor`), or the `limit` newest jobs."""
        out: builtins.list[dict[str, Any]] = []
        cursor = ""
        while True:
            query: dict[str, Any] = {"status": status} if status else {}
            if limit is not None:
                query["limit"] = min(limit - len(out), 1000)
            if cursor:
                query["cursor"] = cursor
            answer = self.request("GET", "/jobs" + ("?" + urlencode(query) if query else ""))
            if not isinstance(answer, list):
                raise RemoteError(f"{self.url}/jobs did not answer a list")
            out += answer
            cursor = self.last_headers.get("X-Next-Cursor", "")
            if not cursor or not answer or (limit is not None and len(out) >= limit):
                return out

    def job(self, job_id: str) -> dict[str, Any]:
        answer = self.request("GET", "/jobs/" + quote(job_id, safe=""))
        if not isinstance(answer, dict):
            raise RemoteError(f"{self.url}/jobs/{job_id} did not answer a job")
        return answer

    def job_action(self, job_id: str, action: str, reason: str = "") -> dict[str, Any]:
        body = json.dumps({"reason": reason} if reason else {}).encode()
        answer = self.request("POST", f"/jobs/{quote(job_id, safe='')}/{action}", body)
        if not isinstance(answer, dict):
            raise RemoteError(f"{self.url}/jobs/{job_id}/{action} did not answer a job")
        return answer


def is_job(payload: dict[str, Any]) -> bool:
    """Whether a POST /tools/{key} answer is a job (202 `{job, status}`) rather than a call result."""
    return "job" in payload and "seconds" not in payload


def result_from_payload(key: str, payload: dict[str, Any]) -> CallResult:
    """The CallResult a JSON call payload (`call_payload`) describes."""
    seconds = float(payload.get("seconds") or 0.0)
    if "returncode" in payload:
        ex = ExecResult(
            int(payload["returncode"]),
            str(payload.get("stdout", "")),
            str(payload.get("stderr", "")),
            timed_out=bool(payload.get("timed_out")),
            truncated=bool(payload.get("truncated")),
        )
        if payload.get("typed") is True:  # `result` is a typed output's parsed value
            return CallResult(key, payload["result"], ex, seconds, typed=True)
        return CallResult(key, ex.value(), ex, seconds)
    value = payload["text"] if isinstance(payload.get("text"), str) else payload.get("result")
    return CallResult(key, value, None, seconds)
