"""Every error toolrun raises on purpose, in one tree.

    ToolrunError                  exit 1, HTTP 500
    ├── CatalogError              exit 2: the catalog does not load (carries every Problem found)
    ├── UsageError                exit 2, HTTP 400: a caller's request is malformed
    │   ├── ParamError            exit 2, HTTP 400: a parameter is missing, unknown or of the wrong type
    │   ├── PayloadTooLarge       HTTP 413: the request body is over `max_body_bytes`
    │   ├── UnsupportedMediaType  HTTP 415: a POST body that is not `application/json`
    │   └── RequestTimeout        HTTP 408: the client did not send its body in time
    ├── Forbidden                 HTTP 403: a cross-origin request from an origin not allowed
    ├── NotFound                  exit 2, HTTP 404: unknown tool, or one the caller may not see
    ├── Conflict                  exit 2, HTTP 409: a job is not in a state that allows this (already decided)
    ├── Unauthorized              exit 2, HTTP 401: key missing, invalid, expired or revoked
    ├── RateLimited               exit 75, HTTP 429: the caller's bucket for this tool is empty
    │   └── CallerFull            exit 75, HTTP 429: the caller holds its share of jobs or job streams already
    ├── Overloaded                exit 75, HTTP 503: too many tool processes already running
    ├── BackendUnavailable        exit 69, HTTP 503: a shared backend (Redis) does not answer
    ├── ClientGone                HTTP 499: the client went away before the answer (the call was cancelled)
    ├── OutputInvalid             exit 1, HTTP 502: a typed tool printed output that is not what its `output:` says
    └── ToolFailed                exit 1, HTTP 500: the tool itself raised (fn tools, render errors)
        ├── UndefinedVariable     exit 2, HTTP 500: the template used a variable that was not provided
        └── SandboxUnavailable    exit 1, HTTP 503: a sandboxed tool cannot get its sandbox here: not run

The doors (CLI, HTTP, MCP) map these in one place each, reading ``exit_code`` and
``http_status`` from the class; nothing else decides a status.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import words


class ToolrunError(Exception):
    """Base class: a failure toolrun explains in one line."""

    exit_code = 1
    http_status = 500
    hidden: tuple[str, ...] = ()  # secret values this error's text must never show

    @property
    def summary(self) -> str:
        """The one-line `Type: message` form used by the HTTP and CLI doors."""
        return f"{type(self).__name__}: {self}"

    def hide(self, values: tuple[str, ...] | list[str]) -> None:
        """Never show these values (a call's secret params, 4 characters or more) in this error's text."""
        self.hidden = tuple(sorted({v for v in values if len(v) >= 4}, key=len, reverse=True))

    def redact(self, text: str) -> str:
        for value in self.hidden:
            text = text.replace(value, "[secret]")
        return text

    def __str__(self) -> str:
        text = super().__str__()
        return self.redact(text) if self.hidden else text


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding in a catalog: where it is and what is wrong."""

    file: str
    line: int
    col: int
    key: str
    message: str
    severity: str = "error"  # or "warning"
    code: str = ""  # a warning a tool can acknowledge: one of WARNING_CODES (its `allow_warnings:`)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}"
        level = "" if self.severity == "error" else "warning: "
        code = f" [{self.code}]" if self.code else ""
        return f"{where}: {self.key or '-'}: {level}{self.message}{code}"


# The warnings a tool may acknowledge in `allow_warnings:` (so that the others stay loud), and what each is.
WARNING_CODES: dict[str, str] = {
    "unquoted-param": "a str, list or dict value reaches the command without `| quote` as the last step",
    "nested-quotes": "a quoted value inside a '...' or \"...\" string of the command",
    "shell-code": "a value becomes shell code: the command name, `eval`'s argument, `sh -c`'s string",
    "backslash-quote": "a quoted value right after a backslash, which escapes its opening quote",
    "shell-comment": "a value inside a shell comment, which a newline in it ends",
    "negative-number": "a number starts a word before `--`: a negative one reads as an option",
    "curl-option-position": "a caller value at curl's option position",
    "curl-url-host": "a caller value in the scheme, host or port of a curl tool's URL (SSRF)",
    "curl-option": "a `curl:` value with an option that fights the shorthand (-o, -O, --proto, -K)",
    "unguarded-param": "an optional param without a default rendered outside a guard",
    "unused-param": "a declared param the command never uses",
    "example-left-out": "a param whose generated example toolrun cannot make (declare `example:`)",
    "output-not-json": "a `format: json` tool whose command obviously prints something else",
}


class CatalogError(ToolrunError):
    """The catalog does not load; ``problems`` lists every error (and warning) found."""

    exit_code = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        errors = [p for p in problems if p.severity == "error"]
        first = str(errors[0]) if errors else "invalid catalog"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first + more)


class UsageError(ToolrunError):
    """The caller's request is malformed (bad JSON, a body that is not an object...)."""

    exit_code = 2
    http_status = 400


class ParamError(UsageError):
    """A parameter is missing, unknown or invalid; the message names it.

    `signature` is the tool's call signature when the error came from validating a call."""

    signature: str = ""


class PayloadTooLarge(UsageError):
    http_status = 413

    def __init__(self, limit: int, what: str = "request body") -> None:
        super().__init__(f"{what} is larger than {limit} bytes")


class UnsupportedMediaType(UsageError):
    http_status = 415

    def __init__(self, got: str) -> None:
        super().__init__(f"Content-Type must be application/json, not {got or 'missing'!r}")


class RequestTimeout(UsageError):
    http_status = 408

    def __init__(self, seconds: float) -> None:
        super().__init__(f"request body not received within {words.seconds(seconds)}")


class Forbidden(ToolrunError):
    exit_code = 2
    http_status = 403


class NotFound(ToolrunError):
    """No tool with that key is visible to this caller (unknown and hidden look the same)."""

    exit_code = 2
    http_status = 404

    def __init__(self, key: str, suggestions: list[str] | None = None) -> None:
        self.key = key
        self.suggestions = suggestions or []
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"no tool {key[:200]!r}{hint}")


class Conflict(ToolrunError):
    """The job is not in a state that allows this action (approved twice, cancelled after it ended)."""

    exit_code = 2
    http_status = 409


class Unauthorized(ToolrunError):
    """With OAuth on, `oauth_error` (invalid_token, insufficient_scope) and `description` go into the 401's
    `WWW-Authenticate` header, and the HTTP door sets `challenge` to that header's value."""

    exit_code = 2
    http_status = 401

    def __init__(self, message: str = "unauthorized", *, oauth_error: str = "", description: str = "") -> None:
        super().__init__(message)
        self.oauth_error = oauth_error
        self.description = description
        self.challenge = ""


class RateLimited(ToolrunError):
    exit_code = 75
    http_status = 429

    def __init__(self, key: str, retry_after: int) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(f"rate limit exceeded for {key!r}; retry after {words.seconds(self.retry_after)}")


class CallerFull(RateLimited):
    """One caller holds its share already (live jobs, job event streams): a 429 with Retry-After, like a rate
    limit, and a message that says which share."""

    def __init__(self, message: str, retry_after: int = 5) -> None:
        self.retry_after = max(1, int(retry_after))
        ToolrunError.__init__(self, message)


class Overloaded(ToolrunError):
    exit_code = 75
    http_status = 503

    def __init__(self, limit: int) -> None:
        super().__init__(f"server busy: {words.plural(limit, 'tool process')} already running; retry shortly")


class BackendUnavailable(ToolrunError):
    exit_code = 69
    http_status = 503


class ClientGone(ToolrunError):
    """The client closed its connection while its call ran: the call was cancelled (its processes killed).

    Nobody reads the answer; 499 (nginx's "client closed request") is what the access log shows."""

    http_status = 499

    def __init__(self, message: str = "the client closed the connection; the call was cancelled") -> None:
        super().__init__(message)


class OutputInvalid(ToolrunError):
    """An exec or curl tool with a typed `output:` printed something that does not parse, or does not match its
    schema (typedoutput.py). The call failed; `output` keeps the text it printed, which every door shows.

    502 over HTTP: the tool behind toolrun answered badly, not the caller and not toolrun."""

    http_status = 502

    def __init__(self, message: str, output: str) -> None:
        super().__init__(message)
        self.output = output


class ToolFailed(ToolrunError):
    """The tool raised while running; wraps the original exception."""

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(str(original))

    @property
    def summary(self) -> str:
        return self.redact(f"{type(self.original).__name__}: {self.original}")


class UndefinedVariable(ToolFailed):
    """A command template used a variable the call did not provide (nothing was spawned).

    Exit 2 on the CLI: the caller left out a value the template needs, like a missing param.
    Over HTTP it stays a 500: the catalog's template, not the request, is what is wrong.
    """

    exit_code = 2


class SandboxUnavailable(ToolFailed):
    """A sandboxed tool cannot get its sandbox on this host (no bwrap, the kernel refuses, a bound path is gone or
    holds toolrun's own files): it does not run.

    A sandbox never silently falls back to no sandbox; the message names the reason, paths included: the CLI
    prints it, a server logs it and answers its caller with `public` only (HTTP 503): a caller learns that the
    tool cannot run here, not where toolrun keeps its files.
    """

    http_status = 503

    def __init__(self, message: str, key: str = "") -> None:
        ToolrunError.__init__(self, message)
        self.original = self
        self.key = key

    @property
    def public(self) -> str:
        """What a server tells its caller: `SandboxUnavailable: <short message>`."""
        who = f"tool {self.key}" if self.key else "this tool"
        why = "it was not run (the server's log says why)"
        return f"SandboxUnavailable: {who} runs in a sandbox that cannot be set up on this server; {why}"
