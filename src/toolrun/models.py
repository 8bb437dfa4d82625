"""Plain data: what a loaded catalog is, and the records every door passes around.

Frozen dataclasses, no pydantic: importing this module is cheap, so a warm `toolrun call`
(catalog from the cache) starts fast. What a catalog *file* may contain is described by the
pydantic models in schema.py, which only the cold load imports.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Literal

EXEC_RETURN_TYPE = "str | (int, str, str)"


def compact_number(value: float) -> float | int:
    """A bound as people and JSON read it: 5.0 as 5, 0.5 as is."""
    return int(value) if float(value).is_integer() else value


# -- runtime records -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    type: str
    required: bool
    default: Any = None
    description: str = ""
    example: Any = None
    enum: tuple[Any, ...] | None = None
    pattern: str | None = None
    min: float | None = None
    max: float | None = None
    secret: bool = False  # never logged, audited, echoed or put on a command line (docs/operations.md)

    def entry(self) -> dict[str, Any]:
        """The Param object (`example` falls back to the default when none is declared), plus the
        constraints `enum`, `pattern`, `min`, `max` that are declared."""
        entry = {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default": self.default,
            "description": self.description,
            "example": self.example if self.example is not None else self.default,
            **self.constraints(),
        }
        if self.secret:
            entry["secret"] = True
        return entry

    def constraints(self) -> dict[str, Any]:
        """The declared constraints, as the tool entry and `describe_tools` show them (only those set)."""
        out: dict[str, Any] = {}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.pattern is not None:
            out["pattern"] = self.pattern
        if self.min is not None:
            out["min"] = compact_number(self.min)
        if self.max is not None:
            out["max"] = compact_number(self.max)
        return out


@dataclass(frozen=True, slots=True)
class Expect:
    """What an example call should give (every field set must hold; none set: exit code 0)."""

    exit_code: int | None = None  # the exit code `toolrun call` would end with (124 on timeout)
    stdout: str | None = None  # the whole output (stdout, or an fn tool's result as text), exactly
    stdout_matches: str | None = None  # a regular expression found somewhere in the output
    stderr_matches: str | None = None
    json: dict[str, Any] | None = None  # dotted path -> value, in the output parsed as JSON
    error: str | None = None  # the call must fail before running, with a message matching this


@dataclass(frozen=True, slots=True)
class Example:
    """One `examples:` entry of a tool: arguments and what to expect (`toolrun test` runs it)."""

    args: dict[str, Any]
    expect: Expect = Expect()
    name: str = ""
    timeout: float | None = None  # a deadline for this example, shorter than the tool's own
    safe: bool | None = None  # false: never run without --all; true: run even on a destructive tool
    line: int = 0
    col: int = 0


@dataclass(frozen=True, slots=True)
class ResourceLimits:
    cpu: int | None = None
    memory: int | None = None
    open_files: int | None = None
    file_size: int | None = None
    processes: int | None = None
    output: int = 10 * 1024 * 1024

    def prlimit_args(self) -> list[str]:
        pairs = [
            ("cpu", self.cpu),
            ("as", self.memory),
            ("nofile", self.open_files),
            ("fsize", self.file_size),
            ("nproc", self.processes),
        ]
        return [f"--{flag}={value}" for flag, value in pairs if value is not None]

    def shown(self) -> dict[str, int]:
        """The limits that are set, by their catalog names (`--dry-run`)."""
        names = ("cpu", "memory", "open_files", "file_size", "processes", "output")
        return {name: value for name in names if (value := getattr(self, name)) is not None}


@dataclass(frozen=True, slots=True)
class Sandbox:
    """A tool's sandbox (docs/catalog.md, Sandboxes); sandbox.py enforces it with bubblewrap.

    As a file's loader builds it, `profile` names the profile it starts from and the rest is what the
    tool adds; once the whole catalog is loaded it is resolved (catalog/sandboxes.py): `network` is
    set and the paths are the profile's and the tool's together. `enabled=False` is `sandbox: false`.
    """

    profile: str = "default"
    network: str = ""  # "none" | "host"; "" until resolved (exec tools: none, curl tools: host)
    readable: tuple[str, ...] = ()  # absolute paths bound read-only, beyond the system's
    writable: tuple[str, ...] = ()  # absolute paths bound read-write
    tmp_size: int | None = None  # bytes of the private /tmp (None: sandbox.DEFAULT_TMP_SIZE)
    enabled: bool = True

    def entry(self, problem: str | None = None) -> dict[str, Any]:
        """The profile as the tool entry shows it. `problem` is the host's answer to "can bwrap enforce it here"
        ('' when it can; exec/sandbox.py asks the host): with it, the entry says `enforced` (and `reason`)."""
        shown: dict[str, Any] = {
            "profile": self.profile,
            "network": self.network or "none",
            "readable": list(self.readable),
            "writable": list(self.writable),
        }
        if self.tmp_size is not None:
            shown["tmp_size"] = self.tmp_size
        if problem is not None:
            shown["enforced"] = not problem
            if problem:
                shown["reason"] = problem
        return shown


@dataclass(frozen=True, slots=True)
class Output:
    """What an exec or curl tool prints (its `output:`; typedoutput.py parses and checks it).

    `format`: "text" (as is), "json" (parsed, and checked against `schema` when one is declared) or
    "lines" (a list of strings). `schema_file`: where a schema read from a file came from (shown only)."""

    format: str = "text"
    schema: dict[str, Any] | None = None
    schema_file: str = ""

    @property
    def typed(self) -> bool:
        return self.format != "text"

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"format": self.format}
        if self.schema is not None:
            entry["schema"] = self.schema
        return entry


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A loaded tool: everything a call needs, resolved once at load time."""

    key: str
    name: str
    kind: Literal["exec", "curl", "fn"]
    groups: tuple[str, ...]
    public: bool
    description: str
    params: tuple[Param, ...]
    return_type: str
    example: str
    source: str = ""  # the command template (exec/curl) or module:function (fn)
    stdin: bool = False
    inline: bool = False
    timeout: float = 60.0
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_passthrough: tuple[str, ...] = ()
    secret_env: tuple[str, ...] = ()  # names of `env:` entries marked secret: their values are never shown
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    user: str | None = None
    examples: tuple[Example, ...] = ()
    file: str = ""
    env_file: str = ""  # the `env_file` read, as an absolute path ("" when none): hidden from sandboxes
    line: int = 0
    col: int = 0
    # Behaviour hints the catalog declares (only those set): title, read_only, destructive,
    # idempotent, open_world. MCP direct mode sends them as the tool's `annotations`.
    annotations: dict[str, Any] = field(default_factory=dict)
    keywords: tuple[str, ...] = ()  # words people use for this tool that its text lacks (search only)
    # curl tools: params whose value can reach curl's option position, and whether it arrives quoted;
    # a value that would start an option (`--version`, `-K file`) is refused at call time.
    option_params: tuple[tuple[str, bool], ...] = ()
    sandbox: Sandbox | None = None  # the jail exec and curl calls run in (None: none)
    # Jobs (jobs.py): a person in `approvers` must approve each call first; `run_async` answers with a job at once.
    approval: bool = False
    approvers: tuple[str, ...] = ()
    approval_timeout: float | None = None  # seconds a call waits for its decision (None: the setting)
    run_async: bool = False
    notify: tuple[str, ...] = ()  # webhooks told of this tool's approval requests (telemetry/notify.py)
    output: Output | None = None  # exec and curl tools: a typed output (None: text)
    mcp_name: str = ""  # MCP direct mode: the name the catalog chose ("" : derived from the key)

    def entry(self, sandbox_problem: str | None = None) -> dict[str, Any]:
        """The tool entry: key, groups, params, return_type, description, example; then
        `annotations` and `keywords` when the catalog declares them. Plain data: whether this host enforces the
        sandbox is `sandbox_problem` ('' when it does, None: not said), which the service asks the host for."""
        entry: dict[str, Any] = {
            "key": self.key,
            "groups": list(self.groups),
            "params": [p.entry() for p in self.params],
            "return_type": self.return_type,
            "description": self.description,
            "example": self.example,
        }
        if self.annotations:
            entry["annotations"] = dict(self.annotations)
        if self.keywords:
            entry["keywords"] = list(self.keywords)
        if self.sandbox is not None:
            entry["sandbox"] = self.sandbox.entry(sandbox_problem)
        if self.approval:
            entry["approval"] = {"required": True, "approvers": list(self.approvers)}
        if self.run_async:
            entry["async"] = True
        if self.output is not None and self.output.typed:
            entry["output"] = self.output.entry()
        return entry

    @property
    def typed_output(self) -> Output | None:
        """The tool's output format when it is not plain text (json, lines), else None."""
        return self.output if self.output is not None and self.output.typed else None

    @property
    def has_secrets(self) -> bool:
        return bool(self.secret_env) or any(p.secret for p in self.params)

    @property
    def secret_names(self) -> frozenset[str]:
        return frozenset(p.name for p in self.params if p.secret)

    @property
    def summary(self) -> str:
        return self.description.strip().splitlines()[0] if self.description.strip() else ""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who is calling: a user with groups, or nobody (public tools only)."""

    username: str = ""
    email: str = ""
    groups: frozenset[str] = frozenset()
    anonymous: bool = True
    client: str = ""  # client address, used to bucket anonymous callers
    key_prefix: str = ""  # the public prefix of the API key used, for the audit trail
    # Where the identity comes from: "key" (an API key), "token" (an OAuth token), "operator" (the local CLI);
    # "" for anonymous callers and the server's own internal identities.
    source: str = ""
    # The person, as the requester rule compares it (docs/jobs.md): "user:<name>" for a user of the key store
    # (an API key, or a token whose subject `oauth_users` maps to that user), "token:<name>" for any other
    # token subject, "operator:<name>" for the local operator. "" is nobody in particular.
    person: str = ""
    # A user of the key store: when that user was created (0.0 for anyone else). A user deleted and created again
    # under the same name is another person: the requester rule compares this too (jobrecord.is_requester).
    since: float = 0.0

    @classmethod
    def operator(cls) -> Identity:
        """The local operator of the CLI: the catalog's owner, who may call every tool."""
        import os
        import pwd

        # The account this process runs as, never $USER or $LOGNAME (getpass.getuser() reads them first): the
        # operator who set USER=someone would otherwise be another person and approve its own call.
        try:
            user = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:  # pragma: no cover - no passwd entry
            user = f"uid{os.geteuid()}"
        return cls(
            username=user, groups=frozenset({"admin"}), anonymous=False, source="operator", person=f"operator:{user}"
        )

    @property
    def is_admin(self) -> bool:
        return "admin" in self.groups

    def can_access(self, tool: ToolSpec) -> bool:
        if tool.public or self.is_admin:
            return True
        return not self.groups.isdisjoint(tool.groups)

    @property
    def bucket(self) -> str:
        if self.anonymous:
            return f"anon:{anonymous_network(self.client) if self.client else '-'}"
        return self.person or f"user:{self.username}"


@functools.lru_cache(maxsize=4096)
def anonymous_network(client: str) -> str:
    """What tells an anonymous caller apart: its IPv4 address, or the /64 network of its IPv6 one. A host is given a
    /64 at least, so one bucket per IPv6 address would give one client 2**64 rate-limit buckets."""
    if ":" not in client:
        return client
    import ipaddress

    try:
        address = ipaddress.IPv6Address(client)
    except ValueError:
        return client
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.IPv6Network((address, 64), strict=False))


@dataclass(frozen=True, slots=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    bytes_kept: int = 0  # of stdout and stderr together (the truncation counts are exact)
    bytes_dropped: int = 0

    def value(self) -> str | tuple[int, str, str]:
        """Spec 2.6: stdout on exit 0, else the (returncode, stdout, stderr) tuple."""
        if self.returncode == 0 and not self.timed_out:
            return self.stdout
        return (self.returncode, self.stdout, self.stderr)


@dataclass(frozen=True, slots=True)
class CallResult:
    """What ToolService.call returns to every door."""

    key: str
    value: Any
    exec: ExecResult | None = None
    seconds: float = 0.0
    typed: bool = False  # `value` is the parsed output of an exec or curl tool with a typed `output:`

    @property
    def ok(self) -> bool:
        return self.exec is None or (self.exec.returncode == 0 and not self.exec.timed_out)


@dataclass(frozen=True, slots=True)
class CallOrigin:
    """Where a call came in: the door and the request id (the doors fill it; the CLI leaves the defaults)."""

    door: str = "cli"
    request_id: str = ""
    job_id: str = ""  # the job this call runs for (jobs.py), if any
    link: str = ""  # the W3C traceparent of the request that asked for it: its span links there (tracing on)
