"""One validated tool definition -> a ToolSpec: kind, defaults merged, groups, limits, example."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..models import EXEC_RETURN_TYPE, Param, ResourceLimits, ToolSpec
from .envfiles import EnvMixin
from .exampledefs import ExamplesMixin
from .examplevalue import example_value
from .fn import FnMixin
from .paramdefs import ParamsMixin
from .sandboxes import SandboxMixin
from .templates import TemplateMixin

if TYPE_CHECKING:
    from ..schema import CatalogFile, RuntimeOptions, ToolDef

T = TypeVar("T")

_FN_ONLY_OPTIONS = ("cwd", "env", "env_file", "env_passthrough", "limits", "stdin", "user", "protocols")


class BuildMixin(ParamsMixin, TemplateMixin, FnMixin, EnvMixin, ExamplesMixin, SandboxMixin):
    def build(self, tool: ToolDef, head: CatalogFile, loc: tuple[Any, ...]) -> ToolSpec | None:
        group = tool.group or head.group
        before = self.errors()
        if not group:
            self.problem((*loc, "name"), tool.name, "no group: set `group:` at the top of the file or on the tool")
            return None
        key = f"{group}.{tool.name}"
        kinds = [k for k in ("exec", "curl", "fn") if getattr(tool, k) is not None]
        if len(kinds) != 1:
            found = " and ".join(kinds) if kinds else "none"
            where = (*loc, kinds[1]) if len(kinds) > 1 else (*loc, "name")
            self.problem(where, key, f"a tool needs exactly one of exec, curl or fn (found {found})")
            return None
        kind = kinds[0]
        opts = _merge(head.defaults, tool)
        params = self.build_params(tool, key, loc, kind)
        return_type = EXEC_RETURN_TYPE
        description = tool.description
        option_params: tuple[tuple[str, bool], ...] = ()
        if kind == "fn":
            source = str(tool.fn)
            ignored = [name for name in _FN_ONLY_OPTIONS if name in tool.model_fields_set]
            if ignored:
                self.problem(
                    (*loc, ignored[0]), key, f"fn tools run in-process and ignore {', '.join(ignored)}", "warning"
                )
            fn_info = self.inspect_fn(source, key, (*loc, "fn"), params)
            if fn_info is None:
                return None
            params, return_type, doc = fn_info
            description = description or doc
        else:
            template = tool.exec if kind == "exec" else tool.curl
            assert template is not None
            if tool.inline:
                self.problem((*loc, "inline"), key, "`inline` applies to fn tools only; ignored", "warning")
            if not template.strip():
                self.problem((*loc, kind), key, f"`{kind}:` is empty")
                return None
            option_params = self.check_template(template, params or [], tool.stdin, key, loc, kind)
            source = template
            if kind == "curl":
                protocols = tool.protocols if tool.protocols is not None else self.options.curl_protocols
                # `--json @-` goes before the template's words: after a `--` there, curl would read it as a URL.
                source = (
                    f"curl -s -o - --proto ={','.join(protocols)} "
                    + ("--json @- " if tool.stdin else "")
                    + template.strip()
                )
            elif tool.protocols is not None:
                self.problem((*loc, "protocols"), key, "`protocols` applies to curl tools only; ignored", "warning")
        params = params or []
        groups = [group, *[g for g in tool.groups if g != group]]
        public = tool.public or "public" in groups
        if public and "public" not in groups:
            groups.append("public")
        env = self.build_env(opts, key, loc)
        cwd = None
        if opts.cwd:
            cwd = str((self.path.parent / opts.cwd).resolve())
            if self.options.check and kind != "fn" and not Path(cwd).is_dir():
                self.problem((*loc, "cwd"), key, f"cwd {opts.cwd!r} is not a directory here", "warning")
        limits = (
            ResourceLimits(
                cpu=opts.limits.cpu,
                memory=opts.limits.memory,
                open_files=opts.limits.open_files,
                file_size=opts.limits.file_size,
                processes=opts.limits.processes,
                output=opts.limits.output or self.options.max_output,
            )
            if opts.limits is not None
            else ResourceLimits(output=self.options.max_output)
        )
        if opts.user is not None:
            import pwd

            try:
                pwd.getpwnam(opts.user)
            except KeyError:
                self.problem((*loc, "user"), key, f"user {opts.user!r} does not exist on this machine")
        self.check_example_values(params, key, loc, kind, before)
        sandbox = self.sandbox_of(tool.sandbox if kind == "fn" else opts.sandbox, kind, key, loc)
        if tool.read_only and tool.destructive:
            self.problem((*loc, "destructive"), key, "a read_only tool cannot be destructive", "warning")
        for name in ("approvers", "approval_timeout"):
            if getattr(tool, name) is not None and tool.approval != "required":
                self.problem((*loc, name), key, f"`{name}` applies with `approval: required` only; ignored", "warning")
        if self.errors() > before:
            return None
        line, col = self.locate.value(loc) if self.options.check else (0, 0)
        share = self.share
        spec = ToolSpec(
            key=key,
            name=tool.name,
            kind=kind,  # type: ignore[arg-type]
            groups=share(tuple(sys.intern(g) for g in dict.fromkeys(groups))),
            public=public,
            description=share(description),
            params=tuple(self.lean_param(p) for p in params),
            return_type=return_type,
            example=example_call(key, params),
            source=share(source),
            stdin=tool.stdin,
            inline=tool.inline,
            timeout=opts.timeout or self.options.default_timeout,
            cwd=cwd,
            env=env,
            secret_env=share(
                tuple(sorted(name for name, value in (opts.env or {}).items() if getattr(value, "secret", False)))
            ),
            env_passthrough=share(tuple(opts.env_passthrough or ())),
            limits=share(limits),
            user=opts.user,
            file=self.name,
            line=line,
            col=col,
            annotations={
                name: value
                for name in ("title", "read_only", "destructive", "idempotent", "open_world")
                if (value := getattr(tool, name)) is not None
            },
            keywords=share(tuple(dict.fromkeys(tool.keywords or ()))),
            option_params=option_params,
            sandbox=sandbox,
            approval=tool.approval == "required",
            approvers=tuple(dict.fromkeys(tool.approvers or ["admin"])) if tool.approval == "required" else (),
            approval_timeout=tool.approval_timeout,
            run_async=tool.run_async,
        )
        if tool.examples:
            spec = self.build_examples(spec, tool, loc)
        return spec

    def check_example_values(
        self, params: Sequence[Param], key: str, loc: tuple[Any, ...], kind: str, errors_before: int
    ) -> None:
        """Warn about each param of the example call for which no value obeying its rules can be made
        (not for a tool with errors: a broken rule is reported already)."""
        if kind == "fn" or self.errors() > errors_before:
            return
        for i, param in enumerate(params):
            if (param.required or param.example is not None) and example_value(param) is None:
                rules = f"matches its pattern {param.pattern!r}" if param.pattern else "obeys its rules"
                self.problem(
                    (*loc, "params", i, "pattern" if param.pattern else "name"),
                    key,
                    f"param {param.name!r}: toolrun cannot make an example value that {rules}, so the tool's "
                    "example call leaves it out; declare `example:`",
                    "warning",
                    "example-left-out",
                )

    def share(self, value: T) -> T:
        """One object for equal values of one file (strings, tuples of strings, limits): a catalog repeats
        them across its tools, and every copy would stay resident in every worker (pickling keeps the
        sharing: the cache and the compacted copy hold one object). Numbers are never shared (1 == 1.0 ==
        True: a shared value could change type; and pickle copies numbers anyway)."""
        kind = type(value)
        if kind is tuple and not all(type(v) is str for v in value):  # type: ignore[attr-defined]
            return value
        if kind not in (str, tuple, ResourceLimits):
            return value
        return self.shared.setdefault((kind, value), value)  # type: ignore[no-any-return]

    def lean_param(self, param: Param) -> Param:
        share = self.share
        return Param(
            name=sys.intern(param.name),
            type=sys.intern(param.type),
            required=param.required,
            default=share(param.default),
            description=share(param.description),
            example=share(param.example),
            enum=share(param.enum),
            pattern=share(param.pattern),
            min=param.min,
            max=param.max,
            secret=param.secret,
        )


def _merge(defaults: RuntimeOptions | None, tool: ToolDef) -> RuntimeOptions:
    from ..schema import Limits, RuntimeOptions

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
