"""YAML catalog files -> ToolSpecs.

Load order for one file: read -> YAML (libyaml) -> ``${VAR}`` substitution -> pydantic models ->
checks (exactly one of exec/curl/fn, defaults of the right type, template syntax, declared and
used variables, fn imports) -> ToolSpecs. Problems carry ``file:line:col``; line numbers come
from a node tree composed only when a problem needs one, so a clean load pays nothing for them.
A file whose tools all loaded cleanly is cached by content hash (plus the hashes of the
environment values it referenced), so a warm load skips YAML and checks alike.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import inspect
import json
import os
import pickle
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from . import render
from .errors import CatalogError, ParamError, Problem
from .models import (
    EXEC_RETURN_TYPE,
    PARAM_TYPES,
    CatalogFile,
    Limits,
    Param,
    ParamDef,
    ResourceLimits,
    RuntimeOptions,
    ToolDef,
    ToolSpec,
)

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _Loader = yaml.SafeLoader

CACHE_VERSION = "toolrun-catalog-3"
ENV_REF = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
TEMPLATE_FIELDS = ("exec", "curl")
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
_SIZE = re.compile(r"^\s*(\d+)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)


@dataclass
class Catalog:
    """The loaded tools, by key, sorted; plus any warnings found while loading."""

    tools: dict[str, ToolSpec]
    warnings: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.tools)


@dataclass(frozen=True)
class LoadOptions:
    default_timeout: float = 60.0
    max_output: int = 10 * 1024 * 1024
    cache_dir: Path | None = None
    check: bool = False  # validate-catalog: compose nodes for duplicate YAML keys, never cache


# -- files -------------------------------------------------------------------------------------


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and the *.yaml / *.yml files of directories named (sorted, not recursive)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file()))
        else:
            files.append(path)
    return files


def load(
    paths: Sequence[str | os.PathLike[str]],
    environ: Mapping[str, str] | None = None,
    options: LoadOptions | None = None,
) -> Catalog:
    """Load a catalog; raise CatalogError listing every error found."""
    options = options or LoadOptions()
    catalog, problems = check(paths, environ, options)
    if any(p.severity == "error" for p in problems):
        if not options.check:
            # Errors are rare: load again in check mode for exact lines and every finding.
            from dataclasses import replace

            _, problems = check(paths, environ, replace(options, check=True))
        raise CatalogError([p for p in problems if p.severity == "error"] or problems)
    return catalog


def check(
    paths: Sequence[str | os.PathLike[str]],
    environ: Mapping[str, str] | None = None,
    options: LoadOptions | None = None,
) -> tuple[Catalog, list[Problem]]:
    """Load what loads and return it with every problem (errors and warnings)."""
    environ = os.environ if environ is None else environ
    options = options or LoadOptions()
    problems: list[Problem] = []
    tools: dict[str, ToolSpec] = {}
    files = expand(paths)
    if not files:
        problems.append(Problem("-", 1, 1, "", "no catalog files given"))
    for path in files:
        file_tools, file_problems = _load_file(path, environ, options)
        problems.extend(file_problems)
        for tool in file_tools:
            first = tools.get(tool.key)
            if first is not None:
                problems.append(
                    Problem(
                        tool.file,
                        tool.line,
                        1,
                        tool.key,
                        f"duplicate key {tool.key!r} (first defined at {first.file}:{first.line})",
                    )
                )
                continue
            tools[tool.key] = tool
    catalog = Catalog(
        tools=dict(sorted(tools.items())),
        warnings=[p for p in problems if p.severity == "warning"],
        files=[str(f) for f in files],
    )
    return catalog, problems


# -- one file -----------------------------------------------------------------------------------


class _Locator:
    """Maps a data path (('tools', 3, 'exec')) to a line and column, composing nodes on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._root: yaml.Node | None = None
        self._failed = False

    def root(self) -> yaml.Node | None:
        if self._root is None and not self._failed:
            try:
                self._root = yaml.compose(self.text, Loader=_Loader)
            except yaml.YAMLError:
                self._failed = True
        return self._root

    def node(self, loc: Sequence[Any]) -> tuple[yaml.Node | None, yaml.Node | None]:
        """(key node, value node) of the deepest part of `loc` found."""
        node = self.root()
        key_node: yaml.Node | None = None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if k.value == part:
                        key_node, node = k, v
                        break
                else:
                    break
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                key_node, node = None, node.value[part]
            else:
                break
        return key_node, node

    def __call__(self, loc: Sequence[Any], prefer_key: bool = True) -> tuple[int, int]:
        key_node, node = self.node(loc)
        target = key_node if (prefer_key and key_node is not None) else node
        if target is None:
            return 1, 1
        return target.start_mark.line + 1, target.start_mark.column + 1

    def template_line(self, loc: Sequence[Any], template_line: int) -> tuple[int, int]:
        _, node = self.node(loc)
        if node is None:
            return 1, 1
        line = node.start_mark.line + 1
        if isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            line += 1
        return line + template_line - 1, node.start_mark.column + 1

    def duplicate_keys(self) -> list[tuple[int, int, str]]:
        found: list[tuple[int, int, str]] = []
        stack = [self.root()]
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode):
                        if k.value in seen:
                            found.append((k.start_mark.line + 1, k.start_mark.column + 1, k.value))
                        seen.add(k.value)
                    stack.append(v)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        return sorted(found)


class _FileLoader:
    def __init__(self, path: Path, environ: Mapping[str, str], options: LoadOptions) -> None:
        self.path = path
        self.name = str(path)
        self.environ = environ
        self.options = options
        self.problems: list[Problem] = []
        self.used_env: dict[str, str | None] = {}
        self.extra_files: dict[str, str] = {}
        self.has_fn = False
        self.locate = _Locator("")

    # problems
    def problem(self, loc: Sequence[Any], key: str, message: str, severity: str = "error") -> None:
        line, col = self.locate(loc)
        self.problems.append(Problem(self.name, line, col, key, message, severity))

    def problem_at(self, line: int, col: int, key: str, message: str, severity: str = "error") -> None:
        self.problems.append(Problem(self.name, line, col, key, message, severity))

    # ${VAR}
    def substitute(self, text: str, loc: tuple[Any, ...], key: str, template: bool) -> str:
        if "${" not in text:
            return text

        def repl(match: re.Match[str]) -> str:
            escaped, name, default = match.group(1), match.group(2), match.group(3)
            if escaped:
                return "${" + name + (":-" + default if default is not None else "") + "}"
            value = self.environ.get(name)
            self.used_env[name] = value
            if value is None or (default is not None and value == ""):
                if default is None:
                    self.problem(
                        loc, key, f"environment variable {name!r} is not set (write ${{{name}:-default}} for a default)"
                    )
                    return ""
                value = default
            if template and any(c in value for c in "{}%#"):
                # Inserted as a Jinja string literal: the value is never read as template code.
                return "{{ " + json.dumps(value, ensure_ascii=False) + " }}"
            return value

        return ENV_REF.sub(repl, text)

    def substitute_tree(self, value: Any, loc: tuple[Any, ...], key: str, template: bool = False) -> Any:
        if isinstance(value, str):
            return self.substitute(value, loc, key, template)
        if isinstance(value, list):
            return [self.substitute_tree(v, (*loc, i), key) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {
                k: self.substitute_tree(v, (*loc, k), key, template=k in TEMPLATE_FIELDS and len(loc) == 2)
                for k, v in value.items()
            }
        return value

    # the file
    def load(self) -> list[ToolSpec]:
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            self.problem_at(1, 1, "", f"cannot read catalog: {exc.strerror or exc}")
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem_at(1, 1, "", f"catalog is not UTF-8 text ({exc.reason} at byte {exc.start})")
            return []
        self.locate = _Locator(text)
        try:
            data = yaml.load(text, Loader=_Loader)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            what = getattr(exc, "problem", None) or str(exc)
            context = getattr(exc, "context", None)
            self.problem_at(line, col, "", f"YAML syntax error: {what}" + (f" ({context})" if context else ""))
            return []
        if self.options.check:
            for line, col, dup in self.locate.duplicate_keys():
                self.problem_at(line, col, "", f"duplicate field {dup!r} (YAML keeps only the last)")
        if data is None:
            self.problem_at(1, 1, "", "catalog file is empty (expected a mapping with `tools:`)", "warning")
            return []
        if not isinstance(data, dict):
            self.problem_at(1, 1, "", f"a catalog file is a mapping with `tools:`, not a {type(data).__name__}")
            return []
        tools_raw = data.get("tools")
        header = {k: v for k, v in data.items() if k != "tools"}
        header = self.substitute_tree(header, (), "")
        try:
            head = CatalogFile.model_validate(header)
        except ValidationError as exc:
            self.report(exc, (), "", CatalogFile)
            return []
        if tools_raw is None:
            self.problem(("tools",), "", "no `tools:` list in this file", "warning")
            return []
        if not isinstance(tools_raw, list):
            self.problem(("tools",), "", "`tools:` must be a list of tool definitions")
            return []
        specs: list[ToolSpec] = []
        for index, item in enumerate(tools_raw):
            loc = ("tools", index)
            if not isinstance(item, dict):
                self.problem(loc, "", "a tool definition is a mapping (name, exec/curl/fn, params...)")
                continue
            key = f"{item.get('group') or head.group or '?'}.{item.get('name', '?')}"
            item = self.substitute_tree(item, loc, key)
            try:
                tool = ToolDef.model_validate(item)
            except ValidationError as exc:
                self.report(exc, loc, key, ToolDef)
                continue
            spec = self.build(tool, head, loc)
            if spec is not None:
                specs.append(spec)
        return specs

    def report(self, exc: ValidationError, base: tuple[Any, ...], key: str, model: type[Any]) -> None:
        for err in exc.errors():
            loc = (*base, *err["loc"])
            kind = err["type"]
            field_name = err["loc"][-1] if err["loc"] else ""
            if kind == "extra_forbidden":
                known = _fields_at(model, err["loc"][:-1])
                close = difflib.get_close_matches(str(field_name), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown field {field_name!r}{hint}"
            elif kind == "missing":
                message = f"missing required field {field_name!r}"
            elif kind == "literal_error" and field_name == "type":
                message = f"unknown param type {err['input']!r} (expected one of {', '.join(PARAM_TYPES)})"
            elif kind == "string_pattern_mismatch":
                message = f"{field_name} {err['input']!r} is not a valid name (letters, digits, _ and -)"
            else:
                where = ".".join(str(p) for p in err["loc"] if not isinstance(p, int)) or "value"
                message = f"{where}: {err['msg']}"
            self.problem(loc, key, message)

    def build(self, tool: ToolDef, head: CatalogFile, loc: tuple[Any, ...]) -> ToolSpec | None:
        group = tool.group or head.group
        before = len([p for p in self.problems if p.severity == "error"])
        if not group:
            self.problem((*loc, "name"), tool.name, "no group: set `group:` at the top of the file or on the tool")
            return None
        key = f"{group}.{tool.name}"
        kinds = [k for k in ("exec", "curl", "fn") if getattr(tool, k) is not None]
        if len(kinds) != 1:
            found = " and ".join(kinds) if kinds else "none"
            self.problem((*loc, "name"), key, f"a tool needs exactly one of exec, curl or fn (found {found})")
            return None
        kind = kinds[0]
        opts = _merge(head.defaults, tool)
        params = self.build_params(tool, key, loc)
        return_type = EXEC_RETURN_TYPE
        source = ""
        description = tool.description
        if kind == "fn":
            self.has_fn = True
            fn_info = self.inspect_fn(str(tool.fn), key, (*loc, "fn"), params is None)
            if fn_info is None:
                return None
            inferred, return_type, doc = fn_info
            if params is None:
                params = inferred
            description = description or doc
            source = str(tool.fn)
        else:
            template = tool.exec if kind == "exec" else tool.curl
            assert template is not None
            self.check_template(template, params or [], tool.stdin, key, (*loc, kind))
            source = template
            if kind == "curl":
                source = "curl -s -o - " + template.strip() + (" --json @-" if tool.stdin else "")
        params = params or []
        groups = [group, *[g for g in tool.groups if g != group]]
        public = tool.public or "public" in groups
        if public and "public" not in groups:
            groups.append("public")
        env = self.build_env(opts, key, loc)
        cwd = None
        if opts.cwd:
            cwd = str((self.path.parent / opts.cwd).resolve())
            if self.options.check and not Path(cwd).is_dir():
                self.problem((*loc, "cwd"), key, f"cwd {opts.cwd!r} is not a directory here", "warning")
        limits = self.build_limits(opts.limits, key, (*loc, "limits"))
        if len([p for p in self.problems if p.severity == "error"]) > before:
            return None
        line, _ = self.locate(loc, prefer_key=False) if self.options.check else (0, 0)
        return ToolSpec(
            key=key,
            name=tool.name,
            kind=kind,  # type: ignore[arg-type]
            groups=tuple(dict.fromkeys(groups)),
            public=public,
            description=description,
            params=tuple(params),
            return_type=return_type,
            example=example_call(key, params),
            source=source,
            stdin=tool.stdin,
            timeout=opts.timeout or self.options.default_timeout,
            cwd=cwd,
            env=env,
            env_passthrough=tuple(opts.env_passthrough or ()),
            limits=limits,
            file=self.name,
            line=line,
        )

    def build_params(self, tool: ToolDef, key: str, loc: tuple[Any, ...]) -> list[Param] | None:
        if tool.params is None:
            return None
        params: list[Param] = []
        seen: set[str] = set()
        for i, pd in enumerate(tool.params):
            ploc = (*loc, "params", i)
            if pd.name in seen:
                self.problem((*ploc, "name"), key, f"parameter {pd.name!r} is declared twice")
                continue
            seen.add(pd.name)
            param = _param(pd)
            if pd.pattern is not None:
                try:
                    re.compile(pd.pattern)
                except re.error as exc:
                    self.problem((*ploc, "pattern"), key, f"parameter {pd.name!r}: bad pattern ({exc})")
                    continue
            if pd.required and pd.default is not None:
                self.problem(
                    (*ploc, "default"), key, f"parameter {pd.name!r} is required, so its default is never used", "warning"
                )
            for what in ("default", "example"):
                value = getattr(pd, what)
                if value is None:
                    continue
                try:
                    from .params import coerce

                    coerced = coerce(param, value)
                except ParamError as exc:
                    self.problem((*ploc, what), key, f"{what} of the wrong type: {exc}")
                    continue
                if what == "default" and _loose_type(value) != pd.type and (pd.type, _loose_type(value)) != (
                    "float",
                    "int",
                ):
                    self.problem((*ploc, what), key, f"default {value!r} is not a {pd.type}")
                    continue
                if what == "default":
                    param = _replace_default(param, coerced)
            if pd.enum is not None:
                for choice in pd.enum:
                    if _loose_type(choice) != pd.type:
                        self.problem((*ploc, "enum"), key, f"enum value {choice!r} is not a {pd.type}")
                        break
            params.append(param)
        return params

    def check_template(
        self, template: str, params: list[Param], stdin: bool, key: str, loc: tuple[Any, ...]
    ) -> None:
        analysis = render.analyse(template)
        if analysis.error:
            line, col = self.locate.template_line(loc, analysis.error_line)
            self.problem_at(line, col, key, f"template error: {analysis.error}")
            return
        declared = {p.name: p for p in params}
        for name in sorted(analysis.names - set(declared)):
            close = difflib.get_close_matches(name, list(declared), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.problem(loc, key, f"template uses {name!r}, which is not a declared param{hint}")
        if not stdin:
            for name in declared:
                if name not in analysis.names:
                    self.problem(loc, key, f"param {name!r} is declared but never used in the command", "warning")
        for name in sorted(analysis.unquoted):
            param = declared.get(name)
            if param is not None and param.type in ("str", "list", "dict"):
                self.problem(
                    loc, key, f"param {name!r} ({param.type}) is interpolated without `| quote`", "warning"
                )

    def inspect_fn(
        self, target: str, key: str, loc: tuple[Any, ...], infer: bool
    ) -> tuple[list[Param], str, str] | None:
        module_name, sep, attr = target.partition(":")
        if not sep or not module_name or not attr:
            self.problem(loc, key, f"fn {target!r} must be of the form module:function")
            return None
        try:
            fn = resolve_fn(target, self.path.parent)
        except Exception as exc:
            self.problem(loc, key, f"fn {target!r} does not import: {type(exc).__name__}: {exc}")
            return None
        if not callable(fn):
            self.problem(loc, key, f"fn {target!r} is not callable")
            return None
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return [], "unknown", ""
        params: list[Param] = []
        for p in sig.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            ptype = _annotation_type(p.annotation)
            if infer and ptype is None:
                self.problem(
                    loc, key, f"fn parameter {p.name!r} has no str/int/float/bool/list/dict annotation; declare params"
                )
                return None
            required = p.default is inspect.Parameter.empty
            params.append(
                Param(p.name, ptype or "str", required, None if required else p.default, "", None)
            )
        doc = inspect.getdoc(fn) or ""
        return params, _annotation_text(sig.return_annotation), doc

    def build_env(self, opts: RuntimeOptions, key: str, loc: tuple[Any, ...]) -> dict[str, str]:
        env: dict[str, str] = {}
        if opts.env_file:
            env_path = (self.path.parent / opts.env_file).resolve()
            try:
                content = env_path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                self.problem((*loc, "env_file"), key, f"cannot read env_file {opts.env_file!r}: {exc}")
            else:
                self.extra_files[str(env_path)] = hashlib.sha256(content.encode()).hexdigest()
                env.update(parse_env_file(content))
        env.update(opts.env or {})
        for name in env:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
                self.problem((*loc, "env"), key, f"environment name {name!r} is not valid")
        return env

    def build_limits(self, limits: Limits | None, key: str, loc: tuple[Any, ...]) -> ResourceLimits:
        if limits is None:
            return ResourceLimits(output=self.options.max_output)
        values: dict[str, Any] = {}
        for name in ("memory", "file_size", "output"):
            raw = getattr(limits, name)
            if raw is None:
                continue
            size = parse_size(raw)
            if size is None:
                self.problem((*loc, name), key, f"limits.{name}: {raw!r} is not a size (bytes, or with K/M/G)")
                continue
            values[name] = size
        return ResourceLimits(
            cpu=limits.cpu,
            memory=values.get("memory"),
            open_files=limits.open_files,
            file_size=values.get("file_size"),
            processes=limits.processes,
            output=values.get("output", self.options.max_output),
        )


def _load_file(path: Path, environ: Mapping[str, str], options: LoadOptions) -> tuple[list[ToolSpec], list[Problem]]:
    cache_file = None
    raw: bytes | None = None
    if options.cache_dir is not None and not options.check:
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None
        if raw is not None:
            digest = hashlib.sha256(
                f"{CACHE_VERSION}\0{path.resolve()}\0{options.default_timeout}\0{options.max_output}\0".encode() + raw
            ).hexdigest()
            cache_file = options.cache_dir / f"{digest}.pickle"
            cached = _read_cache(cache_file, environ)
            if cached is not None:
                return cached, []
    loader = _FileLoader(path, environ, options)
    tools = loader.load()
    if cache_file is not None and not loader.problems and not loader.has_fn:
        _write_cache(cache_file, tools, loader.used_env, loader.extra_files)
    return tools, loader.problems


def _env_digest(value: str | None) -> str:
    return "-" if value is None else hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _read_cache(cache_file: Path, environ: Mapping[str, str]) -> list[ToolSpec] | None:
    try:
        with cache_file.open("rb") as fh:
            entry = pickle.load(fh)
    except Exception:
        return None
    try:
        for name, digest in entry["env"].items():
            if _env_digest(environ.get(name)) != digest:
                return None
        for file_name, digest in entry["files"].items():
            if hashlib.sha256(Path(file_name).read_bytes()).hexdigest() != digest:
                return None
        tools: list[ToolSpec] = entry["tools"]
        return tools
    except Exception:
        return None


def _write_cache(
    cache_file: Path, tools: list[ToolSpec], used_env: dict[str, str | None], files: dict[str, str]
) -> None:
    entry = {"env": {k: _env_digest(v) for k, v in used_env.items()}, "files": files, "tools": tools}
    try:
        cache_file.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = cache_file.with_suffix(f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(entry, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache_file)
    except OSError:
        pass  # a cache that cannot be written is only a slower next start


# -- helpers ------------------------------------------------------------------------------------


def _fields_at(model: type[Any], loc: Sequence[Any]) -> list[str]:
    """Field names (and aliases) of the model found by following `loc` through nested models."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        info = getattr(current, "model_fields", {}).get(part)
        if info is None:
            break
        annotation = info.annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            inner = getattr(candidate, "__args__", (candidate,))
            for t in (candidate, *inner):
                if isinstance(t, type) and hasattr(t, "model_fields"):
                    current = t
                    break
    fields = getattr(current, "model_fields", {})
    return [info.alias or name for name, info in fields.items()]


def _merge(defaults: RuntimeOptions | None, tool: ToolDef) -> RuntimeOptions:
    if defaults is None:
        return tool
    env = {**(defaults.env or {}), **(tool.env or {})}
    passthrough = list(dict.fromkeys([*(defaults.env_passthrough or []), *(tool.env_passthrough or [])]))
    limits = defaults.limits
    if tool.limits is not None:
        base = defaults.limits.model_dump() if defaults.limits else {}
        limits = Limits(**{**base, **tool.limits.model_dump(exclude_none=True)})
    return RuntimeOptions(
        timeout=tool.timeout if tool.timeout is not None else defaults.timeout,
        cwd=tool.cwd if tool.cwd is not None else defaults.cwd,
        env=env or None,
        env_file=tool.env_file if tool.env_file is not None else defaults.env_file,
        env_passthrough=passthrough or None,
        limits=limits,
    )


def _param(pd: ParamDef) -> Param:
    required = pd.required if pd.required is not None else pd.default is None
    return Param(
        name=pd.name,
        type=pd.type,
        required=required,
        default=pd.default,
        description=pd.description,
        example=pd.example,
        enum=tuple(pd.enum) if pd.enum is not None else None,
        pattern=pd.pattern,
        min=pd.min,
        max=pd.max,
    )


def _replace_default(param: Param, default: Any) -> Param:
    from dataclasses import replace

    return replace(param, default=default)


def _loose_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


_ANNOTATIONS = {"str": "str", "int": "int", "float": "float", "bool": "bool", "list": "list", "dict": "dict"}


def _annotation_type(annotation: Any) -> str | None:
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    origin = getattr(annotation, "__origin__", None)
    if origin is not None:
        text = getattr(origin, "__name__", str(origin))
    base = str(text).split("[", 1)[0].split("|", 1)[0].strip().lower()
    base = {"list": "list", "dict": "dict", "sequence": "list", "mapping": "dict"}.get(base, base)
    return _ANNOTATIONS.get(base)


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "unknown"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def resolve_fn(target: str, base_dir: Path | None = None) -> Any:
    """Import `module:function` (the catalog's directory is searched first)."""
    module_name, _, attr = target.partition(":")
    if base_dir is not None:
        base = str(base_dir.resolve())
        if base not in sys.path:
            sys.path.insert(0, base)
    module = importlib.import_module(module_name)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def parse_env_file(content: str) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments skipped; `export ` and matching quotes stripped."""
    env: dict[str, str] = {}
    for line in content.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[name.strip()] = value
    return env


def parse_size(raw: int | str) -> int | None:
    if isinstance(raw, int):
        return raw if raw > 0 else None
    match = _SIZE.match(raw)
    if not match:
        return None
    number, unit = int(match.group(1)), match.group(2).upper()
    return number * {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}[unit]


def _example_value(param: Param) -> str:
    for value in (param.example, param.default):
        if value is not None:
            return repr(value)
    return f"<{param.type}>"


def example_call(key: str, params: Sequence[Param]) -> str:
    """`key(param=value, ...)`: required params, and optional ones that have an example."""
    shown = [p for p in params if p.required or p.example is not None]
    return f"{key}({', '.join(f'{p.name}={_example_value(p)}' for p in shown)})"


def child_env(tool: ToolSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted environment of a tool's process: a small base, passthrough names, the tool's env."""
    env = {name: environ[name] for name in BASE_ENV if name in environ}
    env.setdefault("PATH", DEFAULT_PATH)
    for pattern in tool.env_passthrough:
        if pattern.endswith("*"):
            prefix = pattern[:-1]
            env.update({k: v for k, v in environ.items() if k.startswith(prefix)})
        elif pattern in environ:
            env[pattern] = environ[pattern]
    env.update(tool.env)
    return env
