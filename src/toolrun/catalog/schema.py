"""The catalog format as pydantic models: what a catalog file may contain, and its JSON Schema.

``schema/catalog.schema.json`` is generated from `CatalogFile`:

    python -m toolrun.catalog.schema > schema/catalog.schema.json

and a test fails when the committed file drifts from these models. Only the cold catalog load
imports this module (pydantic costs ~0.1 s to import and build), so a warm `toolrun call`
never pays for it. What a loaded catalog becomes is in models.py (plain dataclasses).
"""

from __future__ import annotations

import json
import re
import sys
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from ..paramtypes import PARAM_TYPES

if TYPE_CHECKING:
    ParamType = str
else:
    ParamType = Literal[PARAM_TYPES]  # the rows of the paramtypes table: adding a type there adds it here
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]*$"
GROUP_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
PASSTHROUGH_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*\*?$"
SIZE_PATTERN = r"^\s*[0-9]+\s*(?:[KMGTkmgt](?:i?[Bb])?|[Bb])?\s*$"
_SIZE = re.compile(r"^\s*([0-9]+)\s*(?:([KMGTkmgt])(?:i?[Bb])?|[Bb])?\s*$")
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
SCHEMA_URL = "https://json-schema.org/draft/2020-12/schema"


def parse_size(raw: Any) -> int | None:
    """Bytes from `1048576`, `512K`, `512M`, `2G`, `1T` (binary units; `KB`/`KiB`/`B` suffixes allowed)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw > 0 else None
    if not isinstance(raw, str):
        return None
    match = _SIZE.match(raw)
    if not match:
        return None
    size = int(match.group(1)) * _UNITS[(match.group(2) or "").upper()]
    return size if size > 0 else None


def _size(raw: Any) -> Any:
    if raw is None:
        return None
    size = parse_size(raw)
    if size is None:
        raise PydanticCustomError(
            "size", "{shown} is not a size: give bytes, or a number with K, M, G or T (e.g. 512M)", {"shown": repr(raw)}
        )
    return size


Size = Annotated[
    int,
    BeforeValidator(_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "string", "pattern": SIZE_PATTERN},
            ]
        }
    ),
]
Scalar = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SecretEnv(_Strict):
    """An env entry whose value is a secret: `{value: "${GH_TOKEN}", secret: true}`."""

    value: Scalar = Field(description="The variable's value (numbers and booleans become text).")
    secret: bool = Field(True, description="Kept out of error messages and every echo (docs/operations.md).")


EnvValue = Scalar | SecretEnv


class ParamDef(_Strict):
    """One declared parameter of a tool."""

    name: str = Field(pattern=NAME_PATTERN, description="Parameter name (a template variable).")
    type: ParamType = Field("str", description=f"One of {', '.join(PARAM_TYPES)}.")
    required: bool | None = Field(
        None, description="Whether the caller must supply it. Default: true unless a default is given."
    )
    default: Any = Field(None, description="Value used when the caller omits the parameter.")
    description: str = Field("", description="Shown in listings and to agents.")
    example: Any = Field(None, description="Example value, used in the tool's example call.")
    enum: list[Any] | None = Field(None, description="The only values accepted.")
    pattern: str | None = Field(
        None, description="Regular expression the whole str value (or each str list item) must match."
    )
    min: float | None = Field(None, description="Smallest int/float accepted, or shortest str/list length.")
    max: float | None = Field(None, description="Largest int/float accepted, or longest str/list length.")
    secret: bool = Field(
        False,
        description="A str value kept out of logs, the audit trail, echoes and command lines: "
        "a template reaches it through the child's environment (docs/catalog.md).",
    )


class Limits(_Strict):
    """OS resource caps for one call, enforced with prlimit(1) on the tool's process tree."""

    cpu: int | None = Field(None, ge=1, description="CPU seconds (RLIMIT_CPU); the process is killed past it.")
    memory: Size | None = Field(
        None, description="Address space per process: bytes, or with a K/M/G/T suffix, e.g. 512M (RLIMIT_AS)."
    )
    open_files: int | None = Field(None, ge=1, description="Open file descriptors per process (RLIMIT_NOFILE).")
    file_size: Size | None = Field(
        None, description="Largest file a process may write: bytes or K/M/G/T (RLIMIT_FSIZE)."
    )
    processes: int | None = Field(
        None, ge=1, description="Processes of the user (RLIMIT_NPROC; not enforced for root)."
    )
    output: Size | None = Field(
        None, description="Bytes kept of stdout and of stderr each (default 10M); the rest is dropped, visibly."
    )


class SandboxOptions(_Strict):
    """What a sandbox adds to the profile it starts from (docs/catalog.md, Sandboxes)."""

    network: Literal["none", "host"] | None = Field(
        None, description="none: no network at all (exec tools' default); host: the host's (curl tools' default)."
    )
    readable: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="Paths the tool may read (bound read-only); relative paths are from the catalog file."
    )
    writable: list[Annotated[str, Field(min_length=1)]] | None = Field(
        None, description="Paths the tool may write (bound read-write); they must exist."
    )
    tmp_size: Size | None = Field(None, description="Size of the private /tmp: bytes or K/M/G/T (default 64M).")


class SandboxDef(SandboxOptions):
    """A tool's `sandbox:` as a mapping: a profile to start from, and what to add to it."""

    profile: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="The profile it starts from: `default`, or one declared in `sandboxes:`.",
    )


class SandboxProfileDef(SandboxOptions):
    """A named profile under a catalog file's `sandboxes:`; tools refer to it by name."""

    extends: str | None = Field(
        None, pattern=NAME_PATTERN, description="The profile it starts from (default: the built-in `default`)."
    )


SandboxValue = Annotated[
    bool | Annotated[str, Field(pattern=NAME_PATTERN)] | SandboxDef,
    Field(
        description="Run exec (and curl) calls in a sandbox: true (the default profile), false (none, even under "
        "`defaults:` or the sandbox_default setting), a profile's name, or a mapping (docs/catalog.md)."
    ),
]


class RuntimeOptions(_Strict):
    """Options shared by every tool kind; also allowed under a file's `defaults:`."""

    timeout: float | None = Field(None, gt=0, description="Wall-clock deadline in seconds (default 60).")
    cwd: str | None = Field(None, description="Working directory; relative paths are from the catalog file.")
    env: dict[Annotated[str, Field(pattern=ENV_NAME_PATTERN)], EnvValue] | None = Field(
        None, description="Variables set in the tool's environment (numbers and booleans become text)."
    )
    env_file: str | None = Field(
        None, description="A KEY=VALUE file (relative to the catalog file) added to the environment."
    )
    env_passthrough: list[Annotated[str, Field(pattern=PASSTHROUGH_PATTERN)]] | None = Field(
        None, description="Server variables passed through by name; a trailing * matches a prefix (AWS_*)."
    )
    limits: Limits | None = Field(None, description="OS resource caps (cpu, memory, open_files, ...).")
    user: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_.-]*$",
        description="Run the tool as this system user (toolrun must run as root); makes limits.processes bite.",
    )
    sandbox: SandboxValue | None = None


class ExpectDef(_Strict):
    """What an example call should give; every field set must hold (none set: exit code 0)."""

    exit_code: int | None = Field(
        None, ge=0, le=255, description="Exit code `toolrun call` would end with (124 on timeout). Default 0."
    )
    stdout: str | None = Field(None, description="The whole output, exactly (an fn tool's result as text).")
    stdout_matches: str | None = Field(None, description="A regular expression found somewhere in the output.")
    stderr_matches: str | None = Field(None, description="A regular expression found somewhere in stderr.")
    json_fields: dict[str, Any] | None = Field(
        None, alias="json", description="Dotted path -> value, in the output parsed as JSON (a.b.0.c)."
    )
    error: str | None = Field(
        None, description="The call must fail before running (e.g. bad params), with a message matching this."
    )


class ExampleDef(_Strict):
    """One example call of a tool, run by `toolrun test`."""

    name: str = Field("", description="Shown in test reports (default: the example's number).")
    args: dict[str, Any] = Field(default_factory=dict, description="Parameter name -> value, as JSON would give.")
    expect: ExpectDef | None = Field(None, description="What the call should give (default: exit code 0).")
    timeout: float | None = Field(None, gt=0, description="A deadline in seconds for this example.")
    safe: bool | None = Field(
        None,
        description="false: run only with `toolrun test --all`; true: run even when the tool is destructive.",
    )


class OutputDef(_Strict):
    """What an exec or curl tool prints, so that callers get data instead of text (docs/catalog.md, Typed output)."""

    format: Literal["text", "json", "lines"] = Field(
        "text", description="text: as printed; json: one JSON value, parsed (and checked); lines: a list of strings."
    )
    schema_: dict[str, Any] | str | None = Field(
        None,
        alias="schema",
        description="format json: a JSON Schema (2020-12) the parsed value must match, inline or the path of a "
        "JSON or YAML file (relative to the catalog file).",
    )


WarningCode = Literal[
    "unquoted-param",
    "nested-quotes",
    "shell-code",
    "backslash-quote",
    "shell-comment",
    "negative-number",
    "curl-option-position",
    "curl-url-host",
    "curl-option",
    "unguarded-param",
    "unused-param",
    "example-left-out",
    "output-not-json",
]


class ToolDef(RuntimeOptions):
    """One tool as written in a catalog file."""

    model_config = ConfigDict(
        json_schema_extra={"oneOf": [{"required": ["exec"]}, {"required": ["curl"]}, {"required": ["fn"]}]}
    )

    name: str = Field(pattern=NAME_PATTERN, description="Tool name; the key is <group>.<name>.")
    group: str | None = Field(None, pattern=GROUP_PATTERN, description="Key prefix; default: the file's group.")
    groups: list[Annotated[str, Field(pattern=GROUP_PATTERN)]] = Field(
        default_factory=list, description="Extra group tags: callers in any of these groups may use the tool."
    )
    public: bool = Field(False, description="Callable by anyone, even without an API key (adds the `public` tag).")
    description: str = Field("", description="Markdown; the first line is the summary shown in listings.")
    exec: str | None = Field(None, description="Shell command template, run as /bin/sh -c.")
    curl: str | None = Field(None, description="Arguments to `curl -sS -o -`, a template.")
    fn: str | None = Field(None, description="A Python callable, `module:function`.")
    params: list[ParamDef] | None = Field(
        None, description="Declared parameters (fn tools: inferred from the signature when omitted)."
    )
    stdin: bool = Field(False, description="Also send all parameters as one JSON object on stdin.")
    protocols: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9+.-]*$")]] | None = Field(
        None,
        description="curl tools: the protocols curl may use (`--proto`), e.g. [https, ftp]; default: the "
        "`curl_protocols` setting (http, https).",
    )
    inline: bool = Field(
        False,
        description="fn tools: call a plain `def` on the event loop instead of a worker thread (only for "
        "quick functions that never block).",
    )
    # Behaviour hints for clients (MCP tool annotations); only the declared ones are shown.
    title: str | None = Field(None, max_length=200, description="A human-readable title (MCP annotation `title`).")
    read_only: bool | None = Field(None, description="The tool changes nothing (MCP `readOnlyHint`).")
    destructive: bool | None = Field(
        None, description="The tool may delete or overwrite things (MCP `destructiveHint`); the UI asks to confirm."
    )
    idempotent: bool | None = Field(
        None, description="Calling it again with the same arguments has no further effect (MCP `idempotentHint`)."
    )
    open_world: bool | None = Field(
        None, description="The tool reaches things outside this host, such as the internet (MCP `openWorldHint`)."
    )
    keywords: list[Annotated[str, Field(min_length=1, max_length=60)]] | None = Field(
        None,
        max_length=50,
        description="Words people use for this tool that its key and description lack (synonyms); search only.",
    )
    examples: list[ExampleDef] | None = Field(
        None, description="Example calls with what they should give; `toolrun test` runs them."
    )
    allow_warnings: list[WarningCode] | None = Field(
        None,
        description="Warnings of this tool that are deliberate (by name, as validate-catalog prints them): they "
        "are no longer reported, the others still are.",
    )
    approval: Literal["required", "none"] | None = Field(
        None,
        description="`required`: each call waits for a person in `approvers` to approve it (docs/jobs.md); "
        "the caller gets a job.",
    )
    approvers: list[Annotated[str, Field(pattern=GROUP_PATTERN)]] | None = Field(
        None, min_length=1, description="Groups whose members may approve or deny a call (default: admin)."
    )
    approval_timeout: float | None = Field(
        None, gt=0, description="Seconds a call waits for its decision before it expires (default: the setting)."
    )
    run_async: bool = Field(
        False, alias="async", description="Answer every call at once with a job to follow (long-running tools)."
    )
    notify: list[Annotated[str, Field(pattern=r"^https?://[^\s/]+")]] | None = Field(
        None,
        min_length=1,
        description="Webhook URLs (http or https; `${VAR}` keeps a secret URL out of the file) told when a call "
        "of this tool asks for approval, is decided, withdrawn or expires, beside the notify_url setting's.",
    )
    mcp_name: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="MCP direct mode: the tool's name there (default: its key, each `.` as `__`).",
    )
    output: OutputDef | None = Field(
        None, description="exec and curl tools: what the command prints (text, json with a schema, lines)."
    )


class CatalogFile(_Strict):
    """A toolrun catalog file: a default group, runtime defaults and a list of tools."""

    model_config = ConfigDict(title="toolrun catalog")

    schema_: str | None = Field(None, alias="$schema", description="Editors may point this at the JSON Schema.")
    version: Literal[1] = Field(1, description="Catalog format version (1).")
    group: str | None = Field(
        None, pattern=GROUP_PATTERN, description="Default group of the tools: the key prefix, and a group tag."
    )
    defaults: RuntimeOptions | None = Field(None, description="Runtime options every tool in this file inherits.")
    sandboxes: dict[Annotated[str, Field(pattern=NAME_PATTERN)], SandboxProfileDef] | None = Field(
        None, description="Named sandbox profiles: tools anywhere in the catalog refer to them by name."
    )
    tools: list[ToolDef] = Field(
        default_factory=list, description="The tools: each needs exactly one of exec, curl, fn."
    )


def catalog_json_schema() -> dict[str, Any]:
    """The JSON Schema of a catalog file (what schema/catalog.schema.json holds)."""
    schema = CatalogFile.model_json_schema(by_alias=True, mode="validation")
    return {"$schema": SCHEMA_URL, **schema}


def catalog_json_schema_text() -> str:
    return json.dumps(catalog_json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m toolrun.catalog.schema > schema/catalog.schema.json
    sys.stdout.write(catalog_json_schema_text())
