"""Plain data: the catalog format (pydantic, source of the JSON Schema) and the runtime records.

The pydantic models describe what a catalog file may contain; they are what
``schema/catalog.schema.json`` is generated from. The frozen dataclasses below them
are what the rest of toolrun passes around once a catalog has loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PARAM_TYPES = ("str", "int", "float", "bool", "list", "dict")
ParamType = Literal["str", "int", "float", "bool", "list", "dict"]
EXEC_RETURN_TYPE = "str | (int, str, str)"
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
GROUP_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ParamDef(_Strict):
    """One declared parameter of a tool."""

    name: str = Field(pattern=NAME_PATTERN, description="Parameter name (a template variable).")
    type: ParamType = Field("str", description="One of str, int, float, bool, list, dict.")
    required: bool | None = Field(
        None, description="Whether the caller must supply it. Default: true unless a default is given."
    )
    default: Any = Field(None, description="Value used when the caller omits the parameter.")
    description: str = Field("", description="Shown in listings and to agents.")
    example: Any = Field(None, description="Example value, used in the tool's example call.")
    enum: list[Any] | None = Field(None, description="The only values accepted.")
    pattern: str | None = Field(None, description="Regular expression a str value (or each list item) must match.")
    min: float | None = Field(None, description="Smallest int/float accepted, or shortest str/list length.")
    max: float | None = Field(None, description="Largest int/float accepted, or longest str/list length.")


class Limits(_Strict):
    """OS resource caps for one call, enforced with prlimit(1) on the tool's process tree."""

    cpu: int | None = Field(None, ge=1, description="CPU seconds (RLIMIT_CPU).")
    memory: int | str | None = Field(
        None, description="Address space, bytes or with a K/M/G suffix, e.g. 512M (RLIMIT_AS)."
    )
    open_files: int | None = Field(None, ge=1, description="Open file descriptors (RLIMIT_NOFILE).")
    file_size: int | str | None = Field(
        None, description="Largest file the tool may write, bytes or K/M/G (RLIMIT_FSIZE)."
    )
    processes: int | None = Field(
        None, ge=1, description="Processes of the user (RLIMIT_NPROC; not enforced for root)."
    )
    output: int | str | None = Field(
        None, description="Bytes kept of stdout and of stderr each (default 10M); the rest is dropped."
    )


class RuntimeOptions(_Strict):
    """Options shared by every tool kind; also allowed under a file's `defaults:`."""

    timeout: float | None = Field(None, gt=0, description="Wall-clock deadline in seconds (default 60).")
    cwd: str | None = Field(None, description="Working directory; relative paths are from the catalog file.")
    env: dict[str, str] | None = Field(None, description="Variables set in the tool's environment.")
    env_file: str | None = Field(
        None, description="A KEY=VALUE file (relative to the catalog file) added to the environment."
    )
    env_passthrough: list[str] | None = Field(
        None, description="Server variables passed through by name; a trailing * matches a prefix."
    )
    limits: Limits | None = None


class ToolDef(RuntimeOptions):
    """One tool as written in a catalog file."""

    name: str = Field(pattern=NAME_PATTERN, description="Tool name; the key is <group>.<name>.")
    group: str | None = Field(None, pattern=GROUP_PATTERN, description="Key prefix; default: the file's group.")
    groups: list[str] = Field(default_factory=list, description="Extra group tags granting access.")
    public: bool = Field(False, description="Callable by anyone, even without an API key.")
    description: str = ""
    exec: str | None = Field(None, description="Shell command template, run as /bin/sh -c.")
    curl: str | None = Field(None, description="Arguments to `curl -s -o -`, a template.")
    fn: str | None = Field(None, description="A Python callable, `module:function`.")
    params: list[ParamDef] | None = Field(
        None, description="Declared parameters (fn tools: inferred from the signature when omitted)."
    )
    stdin: bool = Field(False, description="Also send all parameters as one JSON object on stdin.")


class CatalogFile(_Strict):
    """A catalog file: a group, optional defaults and a list of tools."""

    schema_: str | None = Field(None, alias="$schema", description="Editors may point this at the JSON Schema.")
    version: Literal[1] = Field(1, description="Catalog format version.")
    group: str | None = Field(None, pattern=GROUP_PATTERN, description="Default group (key prefix) of the tools.")
    defaults: RuntimeOptions | None = Field(None, description="Runtime options every tool in this file inherits.")
    tools: list[ToolDef] = Field(default_factory=list)


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

    def entry(self) -> dict[str, Any]:
        """The Param object of spec 2.2."""
        return {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default": self.default,
            "description": self.description,
            "example": self.example,
        }


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
    timeout: float = 60.0
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_passthrough: tuple[str, ...] = ()
    limits: ResourceLimits = field(default_factory=ResourceLimits)
    file: str = ""
    line: int = 0

    def entry(self) -> dict[str, Any]:
        """The tool entry of spec 2.1."""
        return {
            "key": self.key,
            "groups": list(self.groups),
            "params": [p.entry() for p in self.params],
            "return_type": self.return_type,
            "description": self.description,
            "example": self.example,
        }

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

    @classmethod
    def operator(cls) -> Identity:
        """The local operator of the CLI: the catalog's owner, who may call every tool."""
        import getpass

        try:
            user = getpass.getuser()
        except Exception:  # pragma: no cover - no passwd entry
            user = "operator"
        return cls(username=user, groups=frozenset({"admin"}), anonymous=False)

    @property
    def is_admin(self) -> bool:
        return "admin" in self.groups

    def can_access(self, tool: ToolSpec) -> bool:
        if tool.public or self.is_admin:
            return True
        return not self.groups.isdisjoint(tool.groups)

    @property
    def bucket(self) -> str:
        return f"user:{self.username}" if not self.anonymous else f"anon:{self.client or '-'}"


@dataclass(frozen=True, slots=True)
class ExecResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False

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

    @property
    def ok(self) -> bool:
        return self.exec is None or (self.exec.returncode == 0 and not self.exec.timed_out)
