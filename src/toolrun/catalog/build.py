"""One validated tool definition -> a ToolSpec: kind, defaults merged, groups, limits, example.

`build` runs the checks of each part in a fixed order (their problems appear in that order), then
makes the ToolSpec when none of them found an error.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from ..models import EXEC_RETURN_TYPE, Output, Param, ResourceLimits, Sandbox, ToolSpec
from ..typedoutput import return_type
from .envfiles import build_env, env_file_path
from .exampledefs import build_examples
from .examplevalue import example_value
from .fn import inspect_fn
from .outputs import output_of
from .paramdefs import build_params
from .sandboxes import sandbox_of
from .templatelint import check_template

if TYPE_CHECKING:
    from .loadcontext import LoadContext
    from .schema import CatalogFile, RuntimeOptions, ToolDef

T = TypeVar("T")

_FN_ONLY_OPTIONS = ("cwd", "env", "env_file", "env_passthrough", "limits", "stdin", "user", "protocols")
_HINTS = ("title", "read_only", "destructive", "idempotent", "open_world")


class _Run(NamedTuple):
    """What a tool runs: its params, return type and description as the kind settles them."""

    params: list[Param]
    return_type: str
    description: str
    source: str  # the command (curl: with the shorthand's words) or module:function
    option_params: tuple[tuple[str, bool], ...] = ()


class _Setup(NamedTuple):
    """Where and how a tool runs: from the merged options."""

    env: dict[str, str]
    cwd: str | None
    limits: ResourceLimits
    sandbox: Sandbox | None
    output: Output | None = None


def build(ctx: LoadContext, tool: ToolDef, head: CatalogFile, loc: tuple[Any, ...]) -> ToolSpec | None:
    """The ToolSpec of a validated tool definition, or None when it has errors (they are in `ctx.problems`)."""
    before = ctx.errors()
    named = _key_and_kind(ctx, tool, head, loc)
    if named is None:
        return None
    _, key, kind = named
    opts = merge(head.defaults, tool)
    declared = build_params(ctx, tool, key, loc, kind)
    run = _fn_run(ctx, tool, key, loc, declared) if kind == "fn" else _command_run(ctx, tool, key, loc, kind, declared)
    if run is None:
        return None
    env, cwd, limits = _process(ctx, opts, key, loc, kind)
    check_example_values(ctx, run.params, key, loc, kind, before)
    sandbox = sandbox_of(ctx, tool.sandbox if kind == "fn" else opts.sandbox, kind, key, loc)
    _hint_warnings(ctx, tool, key, loc)
    output = output_of(ctx, tool, kind, key, loc)
    if ctx.errors() > before:
        return None
    if output is not None:
        run = run._replace(return_type=return_type(output))
    spec = _spec(ctx, tool, opts, named, loc, run, _Setup(env, cwd, limits, sandbox, output))
    return build_examples(ctx, spec, tool, loc) if tool.examples else spec


def _key_and_kind(
    ctx: LoadContext, tool: ToolDef, head: CatalogFile, loc: tuple[Any, ...]
) -> tuple[str, str, str] | None:
    """(group, key, kind: exec, curl or fn), or None after a problem."""
    group = tool.group or head.group
    if not group:
        ctx.problem((*loc, "name"), tool.name, "no group: set `group:` at the top of the file or on the tool")
        return None
    key = f"{group}.{tool.name}"
    kinds = [k for k in ("exec", "curl", "fn") if getattr(tool, k) is not None]
    if len(kinds) != 1:
        found = " and ".join(kinds) if kinds else "none"
        where = (*loc, kinds[1]) if len(kinds) > 1 else (*loc, "name")
        ctx.problem(where, key, f"a tool needs exactly one of exec, curl or fn (found {found})")
        return None
    return group, key, kinds[0]


def _fn_run(
    ctx: LoadContext, tool: ToolDef, key: str, loc: tuple[Any, ...], declared: list[Param] | None
) -> _Run | None:
    source = str(tool.fn)
    ignored = [name for name in _FN_ONLY_OPTIONS if name in tool.model_fields_set]
    if ignored:
        ctx.problem((*loc, ignored[0]), key, f"fn tools run in-process and ignore {', '.join(ignored)}", "warning")
    fn_info = inspect_fn(ctx, source, key, (*loc, "fn"), declared)
    if fn_info is None:
        return None
    params, return_type, doc = fn_info
    return _Run(params, return_type, tool.description or doc, source)


def _command_run(
    ctx: LoadContext, tool: ToolDef, key: str, loc: tuple[Any, ...], kind: str, declared: list[Param] | None
) -> _Run | None:
    template = tool.exec if kind == "exec" else tool.curl
    assert template is not None
    if tool.inline:
        ctx.problem((*loc, "inline"), key, "`inline` applies to fn tools only; ignored", "warning")
    if not template.strip():
        ctx.problem((*loc, kind), key, f"`{kind}:` is empty")
        return None
    params = declared or []
    option_params = check_template(ctx, template, params, tool.stdin, key, loc, kind)
    source = template
    if kind == "curl":
        protocols = tool.protocols if tool.protocols is not None else ctx.options.curl_protocols
        # `--json @-` goes before the template's words: after a `--` there, curl would read it as a URL.
        source = (
            f"curl -sS -o - --proto ={','.join(protocols)} " + ("--json @- " if tool.stdin else "") + template.strip()
        )
    elif tool.protocols is not None:
        ctx.problem((*loc, "protocols"), key, "`protocols` applies to curl tools only; ignored", "warning")
    return _Run(params, EXEC_RETURN_TYPE, tool.description, source, option_params)


def _process(
    ctx: LoadContext, opts: RuntimeOptions, key: str, loc: tuple[Any, ...], kind: str
) -> tuple[dict[str, str], str | None, ResourceLimits]:
    """The tool's environment, working directory and limits; problems with its env file, cwd and user."""
    env = build_env(ctx, opts, key, loc)
    cwd = None
    if opts.cwd:
        # By name (the catalog's folder resolved): a link in `cwd` is not followed here, where a sandbox would bind
        # whatever it led to at load; a sandboxed call refuses it, any other chdirs through it.
        cwd = os.path.normpath(os.path.join(ctx.path.parent.resolve(), opts.cwd))
        if ctx.options.check and kind != "fn" and not os.path.isdir(cwd):  # False, not OSError, for a long name
            ctx.problem((*loc, "cwd"), key, f"cwd {opts.cwd!r} is not a directory here", "warning")
    limits = _limits(ctx, opts)
    if opts.user is not None:
        import pwd

        try:
            pwd.getpwnam(opts.user)
        except KeyError:
            ctx.problem((*loc, "user"), key, f"user {opts.user!r} does not exist on this machine")
    return env, cwd, limits


def _limits(ctx: LoadContext, opts: RuntimeOptions) -> ResourceLimits:
    if opts.limits is None:
        return ResourceLimits(output=ctx.options.max_output)
    return ResourceLimits(
        cpu=opts.limits.cpu,
        memory=opts.limits.memory,
        open_files=opts.limits.open_files,
        file_size=opts.limits.file_size,
        processes=opts.limits.processes,
        output=opts.limits.output or ctx.options.max_output,
    )


def _hint_warnings(ctx: LoadContext, tool: ToolDef, key: str, loc: tuple[Any, ...]) -> None:
    """Warnings for hints and approval settings that contradict or do nothing."""
    if tool.read_only and tool.destructive:
        ctx.problem((*loc, "destructive"), key, "a read_only tool cannot be destructive", "warning")
    for name in ("approvers", "approval_timeout", "notify"):
        if getattr(tool, name) is not None and tool.approval != "required":
            ctx.problem((*loc, name), key, f"`{name}` applies with `approval: required` only; ignored", "warning")


def _groups(tool: ToolDef, group: str) -> tuple[tuple[str, ...], bool]:
    """The tool's groups (its key's group first, each once; `public` added to a public tool's), and whether
    it is public."""
    groups = [group, *[g for g in tool.groups if g != group]]
    public = tool.public or "public" in groups
    if public and "public" not in groups:
        groups.append("public")
    return tuple(sys.intern(g) for g in dict.fromkeys(groups)), public


def _spec(
    ctx: LoadContext,
    tool: ToolDef,
    opts: RuntimeOptions,
    names: tuple[str, str, str],
    loc: tuple[Any, ...],
    run: _Run,
    setup: _Setup,
) -> ToolSpec:
    group, key, kind = names
    groups, public = _groups(tool, group)
    line, col = ctx.locate.value(loc) if ctx.options.check else (0, 0)
    approval = tool.approval == "required"
    secret_env = tuple(sorted(name for name, value in (opts.env or {}).items() if getattr(value, "secret", False)))
    return ToolSpec(
        key=key,
        name=tool.name,
        kind=kind,  # type: ignore[arg-type]
        groups=share(ctx, groups),
        public=public,
        description=share(ctx, run.description),
        params=tuple(lean_param(ctx, p) for p in run.params),
        return_type=run.return_type,
        example=example_call(key, run.params),
        source=share(ctx, run.source),
        stdin=tool.stdin,
        inline=tool.inline,
        timeout=opts.timeout or ctx.options.default_timeout,
        cwd=setup.cwd,
        env=setup.env,
        secret_env=share(ctx, secret_env),
        env_passthrough=share(ctx, tuple(opts.env_passthrough or ())),
        limits=share(ctx, setup.limits),
        user=opts.user,
        file=ctx.name,
        env_file=env_file_path(ctx.path.parent / opts.env_file) if opts.env_file else "",
        line=line,
        col=col,
        annotations={name: value for name in _HINTS if (value := getattr(tool, name)) is not None},
        keywords=share(ctx, tuple(dict.fromkeys(tool.keywords or ()))),
        option_params=run.option_params,
        sandbox=setup.sandbox,
        approval=approval,
        approvers=tuple(dict.fromkeys(tool.approvers or ["admin"])) if approval else (),
        approval_timeout=tool.approval_timeout,
        run_async=tool.run_async,
        notify=tuple(dict.fromkeys(tool.notify or ())) if approval else (),
        output=setup.output,
        mcp_name=tool.mcp_name or "",
    )


def check_example_values(
    ctx: LoadContext, params: Sequence[Param], key: str, loc: tuple[Any, ...], kind: str, errors_before: int
) -> None:
    """Warn about each param of the example call for which no value obeying its rules can be made
    (not for a tool with errors: a broken rule is reported already)."""
    if kind == "fn" or ctx.errors() > errors_before:
        return
    for i, param in enumerate(params):
        if (param.required or param.example is not None) and example_value(param) is None:
            rules = f"matches its pattern {param.pattern!r}" if param.pattern else "obeys its rules"
            ctx.problem(
                (*loc, "params", i, "pattern" if param.pattern else "name"),
                key,
                f"param {param.name!r}: toolrun cannot make an example value that {rules}, so the tool's "
                "example call leaves it out; declare `example:`",
                "warning",
                "example-left-out",
            )


def share(ctx: LoadContext, value: T) -> T:
    """One object for equal values of one file (strings, tuples of strings, limits): a catalog repeats
    them across its tools, and every copy would stay resident in every worker (pickling keeps the
    sharing: the cache and the compacted copy hold one object). Numbers are never shared (1 == 1.0 ==
    True: a shared value could change type; and pickle copies numbers anyway)."""
    kind = type(value)
    if kind is tuple and not all(type(v) is str for v in value):  # type: ignore[attr-defined]
        return value
    if kind not in (str, tuple, ResourceLimits):
        return value
    return ctx.shared.setdefault((kind, value), value)  # type: ignore[no-any-return]


def lean_param(ctx: LoadContext, param: Param) -> Param:
    """`param` with its names interned and its repeated values shared (`share`)."""
    return Param(
        name=sys.intern(param.name),
        type=sys.intern(param.type),
        required=param.required,
        default=share(ctx, param.default),
        description=share(ctx, param.description),
        example=share(ctx, param.example),
        enum=share(ctx, param.enum),
        pattern=share(ctx, param.pattern),
        min=param.min,
        max=param.max,
        secret=param.secret,
    )


def merge(defaults: RuntimeOptions | None, tool: ToolDef) -> RuntimeOptions:
    """The tool's runtime options over the file's `defaults:` (env joined, limits merged field by field)."""
    from .schema import Limits, RuntimeOptions

    if defaults is None:
        return tool
    env = {**(defaults.env or {}), **(tool.env or {})}
    passthrough = list(dict.fromkeys([*(defaults.env_passthrough or []), *(tool.env_passthrough or [])]))
    limits = defaults.limits
    if tool.limits is not None:
        base = defaults.limits.model_dump(exclude_none=True) if defaults.limits else {}
        limits = Limits.model_validate({**base, **tool.limits.model_dump(exclude_none=True)})
    return RuntimeOptions.model_construct(
        timeout=tool.timeout if tool.timeout is not None else defaults.timeout,
        cwd=tool.cwd if tool.cwd is not None else defaults.cwd,
        env=env or None,
        env_file=tool.env_file if tool.env_file is not None else defaults.env_file,
        env_passthrough=passthrough or None,
        limits=limits,
        user=tool.user if tool.user is not None else defaults.user,
        sandbox=tool.sandbox if tool.sandbox is not None else defaults.sandbox,
    )


def example_call(key: str, params: Sequence[Param]) -> str:
    """`key(param=value, ...)` with Python literals: required params, and optional ones with an example.

    A param without `example:` or `default` gets a value made to obey its rules (examplevalue); one
    for which none can be made is left out (the catalog warns: `example-left-out`)."""
    shown = [p for p in params if p.required or p.example is not None]
    values = [(p.name, example_value(p)) for p in shown]
    return f"{key}({', '.join(f'{name}={value!r}' for name, value in values if value is not None)})"
