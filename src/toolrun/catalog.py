"""YAML catalog files -> ToolSpecs.

Load order for one file: read -> YAML (libyaml) -> ``${VAR}`` substitution -> pydantic models ->
checks (exactly one of exec/curl/fn, defaults of the right type, template syntax, declared and
used variables, fn imports) -> ToolSpecs. Problems carry ``file:line:col``; line numbers come
from a node tree composed only when a problem needs one, so a clean load pays nothing for them.
A file whose tools loaded without errors is cached by content hash (plus the hashes of the
environment values and env files it read), so a warm load skips YAML and checks alike.

The format itself is documented in docs/catalog.md; the JSON Schema in schema/ is generated
from the pydantic models in models.py.
"""

from __future__ import annotations

import difflib
import functools
import gc
import hashlib
import importlib
import inspect
import json
import os
import pickle
import re
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import render
from .errors import CatalogError, ParamError, Problem
from .models import EXEC_RETURN_TYPE, PARAM_TYPES, Param, ResourceLimits, ToolSpec

if TYPE_CHECKING:  # the cold path imports these when it runs: a warm load needs neither
    import yaml
    from pydantic import ValidationError

    from .schema import CatalogFile, ParamDef, RuntimeOptions, ToolDef

__all__ = [
    "BASE_ENV",
    "Catalog",
    "LoadOptions",
    "check",
    "child_env",
    "example_call",
    "expand",
    "load",
    "parse_env_file",
    "resolve_fn",
]

CACHE_VERSION = "toolrun-catalog-7"
ENV_REF = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TEMPLATE_FIELDS = ("exec", "curl")
# The child's environment starts from these server variables only (plus what the tool declares).
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# Names Jinja reads as constants or operators: a param so named could never be referenced.
RESERVED_NAMES = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else", "loop"}
)
_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)
_FN_ONLY_OPTIONS = ("cwd", "env", "env_file", "env_passthrough", "limits", "stdin", "user")


@functools.cache
def _yaml_loader() -> Any:
    """libyaml's safe loader that notices duplicate mapping keys (YAML itself keeps the last)."""
    import yaml

    class YamlLoader(yaml.CSafeLoader):
        duplicates = False

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            mapping: dict[Any, Any] = super().construct_mapping(node, deep)
            if len(mapping) != len(node.value):
                self.duplicates = True  # or a `<<` merge: composing the nodes tells them apart
            return mapping

    return YamlLoader


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
    check: bool = False  # validate-catalog: exact positions for every finding, never cached


# -- files -------------------------------------------------------------------------------------


def expand(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and the *.yaml / *.yml files of directories named (sorted, not recursive).

    A file named twice (or also found through its directory) is loaded once.
    """
    files: list[Path] = []
    seen: set[Path] = set()
    for raw in paths:
        path = Path(raw)
        found = (
            sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
            if path.is_dir()
            else [path]
        )
        for file in found:
            real = file.resolve()
            if real not in seen:
                seen.add(real)
                files.append(file)
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
            # Errors are rare: load again in check mode for exact positions and every finding.
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
                        tool.col,
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


# -- positions ---------------------------------------------------------------------------------


class _Locator:
    """Maps a data path (('tools', 3, 'exec')) to a line and column, composing nodes on demand."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._root: yaml.Node | None = None
        self._lines: list[str] | None = None
        self._failed = False

    def root(self) -> yaml.Node | None:
        import yaml

        if self._root is None and not self._failed:
            try:
                self._root = yaml.compose(self.text, Loader=yaml.CSafeLoader)
            except yaml.YAMLError:
                self._failed = True
        return self._root

    def lines(self) -> list[str]:
        if self._lines is None:
            self._lines = self.text.splitlines()
        return self._lines

    def node(self, loc: Sequence[Any]) -> tuple[yaml.Node | None, yaml.Node | None, bool]:
        """(key node, value node, whether all of `loc` was found) of the deepest part found."""
        import yaml

        node = self.root()
        key_node: yaml.Node | None = None
        for part in loc:
            if isinstance(node, yaml.MappingNode):
                for k, v in reversed(node.value):  # YAML keeps the last of duplicate keys
                    if k.value == part:
                        key_node, node = k, v
                        break
                else:
                    return key_node, node, False
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                key_node, node = None, node.value[part]
            else:
                return key_node, node, False
        return key_node, node, True

    @staticmethod
    def _mark(node: yaml.Node | None) -> tuple[int, int]:
        if node is None:
            return 1, 1
        return node.start_mark.line + 1, node.start_mark.column + 1

    def key(self, loc: Sequence[Any]) -> tuple[int, int]:
        """Where the field named by `loc` is written (its key), else the nearest enclosing node."""
        key_node, node, _ = self.node(loc)
        return self._mark(key_node if key_node is not None else node)

    def value(self, loc: Sequence[Any]) -> tuple[int, int]:
        """Where the value at `loc` starts; the nearest enclosing node when it is absent."""
        key_node, node, found = self.node(loc)
        if not found and key_node is not None:
            return self._mark(key_node)
        return self._mark(node)

    def scalar(self, loc: Sequence[Any], offset: int) -> tuple[int, int]:
        """The position of character `offset` of the scalar at `loc` (exact for one-line and `|` scalars)."""
        import yaml

        _, node, _ = self.node(loc)
        if not isinstance(node, yaml.ScalarNode):
            return self._mark(node)
        line0, col0 = node.start_mark.line, node.start_mark.column
        before = str(node.value)[:offset]
        nl = before.count("\n")
        tcol = offset - (before.rfind("\n") + 1)
        if node.style in ("|", ">"):
            # The content starts on the line after the indicator, indented.
            fline0 = line0 + 1 + nl
            lines = self.lines()
            text = lines[fline0] if fline0 < len(lines) else ""
            indent = len(text) - len(text.lstrip(" "))
            return fline0 + 1, indent + tcol + 1
        if node.style in ("'", '"'):
            col0 += 1
        if nl:
            return line0 + nl + 1, tcol + 1
        return line0 + 1, col0 + tcol + 1

    def scalar_line(self, loc: Sequence[Any], line: int) -> tuple[int, int]:
        """The position of the start of (1-based) line `line` of the scalar at `loc`."""
        import yaml

        _, node, _ = self.node(loc)
        if not isinstance(node, yaml.ScalarNode):
            return self._mark(node)
        value = str(node.value)
        offset = 0
        for _ in range(max(0, line - 1)):
            nl = value.find("\n", offset)
            if nl < 0:
                break
            offset = nl + 1
        return self.scalar(loc, offset)

    def find(self, loc: Sequence[Any], finder: Callable[[str], int | None]) -> tuple[int, int] | None:
        """The position of what `finder` finds in the source text of the value at `loc` (any scalar style)."""
        _, node, found = self.node(loc)
        if not found or node is None:
            return None
        lines = self.lines()
        l0, c0 = node.start_mark.line, node.start_mark.column
        l1, c1 = node.end_mark.line, node.end_mark.column
        if l0 >= len(lines):
            return None
        if l0 == l1:
            text = lines[l0][c0:c1]
        else:
            text = "\n".join([lines[l0][c0:], *lines[l0 + 1 : l1], lines[l1][:c1] if l1 < len(lines) else ""])
        offset = finder(text)
        if offset is None or offset < 0:
            return None
        before = text[:offset]
        nl = before.count("\n")
        if not nl:
            return l0 + 1, c0 + offset + 1
        return l0 + nl + 1, offset - before.rfind("\n")

    def duplicate_keys(self) -> list[tuple[int, int, str, tuple[Any, ...]]]:
        """(line, col, key, path of the mapping) of every repeated key."""
        import yaml

        found: list[tuple[int, int, str, tuple[Any, ...]]] = []
        stack: list[tuple[yaml.Node | None, tuple[Any, ...]]] = [(self.root(), ())]
        while stack:
            node, path = stack.pop()
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode):
                        if k.value in seen and k.value != "<<":
                            found.append((k.start_mark.line + 1, k.start_mark.column + 1, k.value, path))
                        seen.add(k.value)
                        stack.append((v, (*path, k.value)))
            elif isinstance(node, yaml.SequenceNode):
                stack.extend((item, (*path, i)) for i, item in enumerate(node.value))
        return sorted(found)


def _find_name(template: str, name: str, unquoted_only: bool = False) -> int | None:
    """Offset of the first use of `name` inside a `{{ }}` or `{% %}` tag of `template`."""
    word = re.compile(rf"(?<![\w.'\"]){re.escape(name)}(?![\w'\"])")
    for tag in _TAG.finditer(template):
        text = tag.group(0)
        if unquoted_only and (text.startswith("{%") or "quote" in text):
            continue
        match = word.search(text)
        if match:
            return tag.start() + match.start()
    return None


# -- one file -----------------------------------------------------------------------------------


class _FileLoader:
    def __init__(self, path: Path, environ: Mapping[str, str], options: LoadOptions) -> None:
        self.path = path
        self.name = str(path)
        self.environ = environ
        self.options = options
        self.problems: list[Problem] = []
        self.used_env: dict[str, str | None] = {}
        self.extra_files: dict[str, str] = {}
        self.substituted: set[tuple[Any, ...]] = set()
        self.has_refs = True
        self.cacheable = True  # False once a result depends on something the cache cannot check
        self.locate = _Locator("")

    # problems
    def problem(self, loc: Sequence[Any], key: str, message: str, severity: str = "error") -> None:
        """A problem with the field at `loc` (positioned at its key)."""
        line, col = self.locate.key(loc)
        self.problems.append(Problem(self.name, line, col, key, message, severity))

    def problem_at(self, pos: tuple[int, int], key: str, message: str, severity: str = "error") -> None:
        self.problems.append(Problem(self.name, pos[0], pos[1], key, message, severity))

    def errors(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")

    # ${VAR}
    def substitute(self, text: str, loc: tuple[Any, ...], key: str, template: bool) -> str:
        if "${" not in text:
            return text
        self.substituted.add(loc)

        reported: set[tuple[tuple[Any, ...], str]] = set()

        def repl(match: re.Match[str]) -> str:
            escaped, name, default = match.group(1), match.group(2), match.group(3)
            if escaped:
                return match.group(0)[1:]  # $${VAR} -> ${VAR}, verbatim
            value = self.environ.get(name)
            self.used_env[name] = value
            if value is None or (default is not None and value == ""):
                if default is None:
                    if (loc, name) not in reported:
                        reported.add((loc, name))
                        ref = match.group(0)
                        pos = self.locate.find(loc, lambda text: text.find(ref)) or self.locate.value(loc)
                        self.problem_at(
                            pos,
                            key,
                            f"environment variable {name!r} is not set (write ${{{name}:-default}} for a default)",
                        )
                    return ""
                value = default
            if template and any(c in value for c in "{}%#"):
                # Inserted as a Jinja string literal: the value is never read as template code.
                return "{{ " + json.dumps(value, ensure_ascii=False) + " }}"
            return value

        return ENV_REF.sub(repl, text)

    def substitute_tree(self, value: Any, loc: tuple[Any, ...], key: str) -> Any:
        if isinstance(value, str):
            return self.substitute(value, loc, key, False)
        if isinstance(value, list):
            return [self.substitute_tree(v, (*loc, i), key) for i, v in enumerate(value)]
        if isinstance(value, dict):
            return {k: self.substitute_tree(v, (*loc, k), key) for k, v in value.items()}
        return value

    def substitute_tool(self, item: dict[str, Any], loc: tuple[Any, ...], key: str) -> dict[str, Any]:
        if not self.has_refs:
            return item
        out: dict[str, Any] = {}
        for k, v in item.items():
            if isinstance(v, str):
                out[k] = self.substitute(v, (*loc, k), key, k in TEMPLATE_FIELDS) if "${" in v else v
            else:
                out[k] = self.substitute_tree(v, (*loc, k), key)
        return out

    # the file
    def parse(self, text: str) -> tuple[bool, Any]:
        import yaml

        loader = _yaml_loader()(text)
        try:
            data = loader.get_single_data()
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            pos = (mark.line + 1, mark.column + 1) if mark else (1, 1)
            what = getattr(exc, "problem", None) or str(exc)
            context = getattr(exc, "context", None)
            cmark = getattr(exc, "context_mark", None)
            if context and cmark is not None and (cmark.line, cmark.column) != (pos[0] - 1, pos[1] - 1):
                context += f" started at line {cmark.line + 1}, column {cmark.column + 1}"
            self.problem_at(pos, "", f"YAML syntax error: {what}" + (f" ({context})" if context else ""))
            return False, None
        finally:
            loader.dispose()
        if loader.duplicates:
            self.report_duplicates(data)
        return True, data

    def report_duplicates(self, data: Any) -> None:
        for line, col, name, path in self.locate.duplicate_keys():
            key = ""
            if len(path) >= 2 and path[0] == "tools" and isinstance(data, dict):
                tools = data.get("tools")
                if isinstance(tools, list) and isinstance(path[1], int) and path[1] < len(tools):
                    key = self.key_of(tools[path[1]], path[1], data.get("group"))
            where = ".".join(str(p) for p in path[2:] if not isinstance(p, int)) if key else ""
            field_name = f"{where}.{name}" if where else name
            self.problem_at(
                (line, col), key, f"duplicate field {field_name!r} (YAML would silently keep only the last)"
            )

    @staticmethod
    def key_of(item: Any, index: int, file_group: Any) -> str:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            return f"tools[{index}]"
        group = item.get("group") or file_group
        return f"{group}.{item['name']}" if isinstance(group, str) else str(item["name"])

    def load(self) -> list[ToolSpec]:
        from pydantic import ValidationError

        from .schema import CatalogFile, ToolDef

        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            self.problem_at((1, 1), "", f"cannot read catalog: {exc.strerror or exc}")
            return []
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self.problem_at((1, 1), "", f"catalog is not UTF-8 text ({exc.reason} at byte {exc.start})")
            return []
        self.locate = _Locator(text)
        self.has_refs = "${" in text  # most files reference no variable: skip the walk
        ok, data = self.parse(text)
        if not ok:
            return []
        if data is None:
            self.problem_at((1, 1), "", "catalog file is empty (expected a mapping with `tools:`)", "warning")
            return []
        if not isinstance(data, dict):
            self.problem_at((1, 1), "", f"a catalog file is a mapping with `tools:`, not a {type(data).__name__}")
            return []
        tools_raw = data.get("tools")
        header = self.substitute_tree({k: v for k, v in data.items() if k != "tools"}, (), "")
        try:
            head = CatalogFile.model_validate(header)
        except ValidationError as exc:
            self.report(exc, (), "", CatalogFile, header)
            return []
        if tools_raw is None:
            self.problem(("tools",), "", "no `tools:` list in this file", "warning")
            return []
        if not isinstance(tools_raw, list):
            self.problem_at(self.locate.value(("tools",)), "", "`tools:` must be a list of tool definitions")
            return []
        specs: list[ToolSpec] = []
        for index, item in enumerate(tools_raw):
            loc = ("tools", index)
            if not isinstance(item, dict):
                self.problem_at(
                    self.locate.value(loc), "", "a tool definition is a mapping (name, exec/curl/fn, params...)"
                )
                continue
            key = self.key_of(item, index, head.group)
            before = self.errors()
            item = self.substitute_tool(item, loc, key)
            try:
                tool = ToolDef.model_validate(item)
            except ValidationError as exc:
                self.report(exc, loc, key, ToolDef, item)
                continue
            spec = self.build(tool, head, loc)
            if spec is not None and self.errors() == before:
                specs.append(spec)
        return specs

    def report(self, exc: ValidationError, base: tuple[Any, ...], key: str, model: type[Any], data: Any) -> None:
        seen: set[tuple[Any, ...]] = set()
        for err in exc.errors():
            eloc = _data_loc(err["loc"], data)
            if eloc in seen:
                continue  # a value no member of a union accepts: report it once
            seen.add(eloc)
            loc = (*base, *eloc)
            kind = err["type"]
            field_name = eloc[-1] if eloc else ""
            where = ".".join(str(p) for p in eloc if not isinstance(p, int)) or "value"
            pos = self.locate.value(loc)
            if kind == "extra_forbidden":
                known = _fields_at(model, eloc[:-1])
                close = difflib.get_close_matches(str(field_name), known, n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                message = f"unknown field {field_name!r}{hint}"
                pos = self.locate.key(loc)
            elif kind == "missing":
                message = f"missing required field {field_name!r}"
                pos = self.locate.value(loc[:-1])
            elif kind == "literal_error" and field_name == "type":
                message = f"unknown param type {err['input']!r} (expected one of {', '.join(PARAM_TYPES)})"
            elif kind == "string_pattern_mismatch" and (field_name in ("name", "group") or where == "groups"):
                message = f"{where}: {err['input']!r} is not a valid name (letters, digits, _ and -)"
            elif kind == "string_pattern_mismatch" and err["loc"][-1] == "[key]":
                message = f"{where.rsplit('.', 1)[0]}: {err['input']!r} is not a variable name"
                pos = self.locate.key(loc)
            elif kind == "string_pattern_mismatch" and where == "env_passthrough":
                message = f"env_passthrough: {err['input']!r} is not a variable name (or a PREFIX_* pattern)"
            else:
                message = f"{where}: {err['msg']}"
                if kind not in ("size", "model_type", "dict_type", "list_type") and _is_scalar(err.get("input")):
                    message += f" (got {err['input']!r})"
            self.problem_at(pos, key, message)

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
            self.check_template(template, params or [], tool.stdin, key, loc, kind)
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
        if self.errors() > before:
            return None
        line, col = self.locate.value(loc) if self.options.check else (0, 0)
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
            inline=tool.inline,
            timeout=opts.timeout or self.options.default_timeout,
            cwd=cwd,
            env=env,
            env_passthrough=tuple(opts.env_passthrough or ()),
            limits=limits,
            user=opts.user,
            file=self.name,
            line=line,
            col=col,
        )

    def build_params(self, tool: ToolDef, key: str, loc: tuple[Any, ...], kind: str) -> list[Param] | None:
        if tool.params is None:
            return None
        params: list[Param] = []
        seen: set[str] = set()
        for i, pd in enumerate(tool.params):
            ploc = (*loc, "params", i)
            if pd.name in seen:
                self.problem_at(self.locate.value((*ploc, "name")), key, f"parameter {pd.name!r} is declared twice")
                continue
            seen.add(pd.name)
            if kind != "fn" and pd.name in RESERVED_NAMES:
                self.problem_at(
                    self.locate.value((*ploc, "name")),
                    key,
                    f"parameter name {pd.name!r} is a template keyword; choose another name",
                )
                continue
            param = _param(pd)
            if pd.pattern is not None:
                try:
                    re.compile(pd.pattern)
                except re.error as exc:
                    self.problem_at(
                        self.locate.value((*ploc, "pattern")), key, f"parameter {pd.name!r}: bad pattern ({exc})"
                    )
                    param = replace(param, pattern=None)
            if pd.min is not None and pd.max is not None and pd.min > pd.max:
                self.problem_at(
                    self.locate.value((*ploc, "min")), key, f"parameter {pd.name!r}: min {pd.min:g} > max {pd.max:g}"
                )
            if pd.required and pd.default is not None:
                self.problem(
                    (*ploc, "default"),
                    key,
                    f"parameter {pd.name!r} is required, so its default is never used",
                    "warning",
                )
            if pd.enum is not None:
                for j, choice in enumerate(pd.enum):
                    if not _is_type(choice, pd.type):
                        self.problem_at(
                            self.locate.value((*ploc, "enum", j)),
                            key,
                            f"parameter {pd.name!r}: enum value {choice!r} is not {_a(pd.type)}",
                        )
                        break
            for what in ("default", "example"):
                value = getattr(pd, what)
                if value is None:
                    continue
                vloc = (*ploc, what)
                lenient = vloc in self.substituted  # ${VAR} text given for an int, say
                if not lenient and not _is_type(value, pd.type):
                    self.problem_at(
                        self.locate.value(vloc),
                        key,
                        f"parameter {pd.name!r}: {what} {value!r} is {_a(_type_of(value))}, not {_a(pd.type)}",
                    )
                    continue
                try:
                    from .params import coerce

                    coerced = coerce(param, value)
                except ParamError as exc:
                    self.problem_at(self.locate.value(vloc), key, f"parameter {pd.name!r}: bad {what}: {exc}")
                    continue
                param = replace(param, **{what: coerced})
            params.append(param)
        return params

    def check_template(
        self, template: str, params: list[Param], stdin: bool, key: str, loc: tuple[Any, ...], kind: str
    ) -> None:
        tloc = (*loc, kind)
        analysis = render.analyse(template)
        if analysis.error:
            pos = self.locate.scalar_line(tloc, analysis.error_line)
            self.problem_at(pos, key, f"template error in {kind}: {analysis.error}")
            return

        def where(name: str, unquoted: bool = False) -> tuple[int, int]:
            # Searching the source text (composing the node tree) happens only once a problem needs it.
            pos = None
            if unquoted:
                pos = self.locate.find(tloc, lambda text: _find_name(text, name, unquoted_only=True))
            pos = pos or self.locate.find(tloc, lambda text: _find_name(text, name))
            return pos or self.locate.value(tloc)

        declared = {p.name: p for p in params}
        jinja_globals = render.JINJA_GLOBALS
        for name in sorted(analysis.names - set(declared) - set(jinja_globals)):
            close = difflib.get_close_matches(name, list(declared), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.problem_at(where(name), key, f"template uses {name!r}, which is not a declared param{hint}")
        if not stdin:
            for i, p in enumerate(params):
                if p.name not in analysis.names:
                    self.problem_at(
                        self.locate.value((*loc, "params", i, "name")),
                        key,
                        f"param {p.name!r} is declared but never used in {kind}",
                        "warning",
                    )
        for name in sorted(analysis.unquoted):
            param = declared.get(name)
            if param is not None and param.type in ("str", "list", "dict"):
                self.problem_at(
                    where(name, unquoted=True),
                    key,
                    f"param {name!r} ({param.type}) is interpolated without `| quote`",
                    "warning",
                )

    def inspect_fn(
        self, target: str, key: str, loc: tuple[Any, ...], declared: list[Param] | None
    ) -> tuple[list[Param], str, str] | None:
        module_name, sep, attr = target.partition(":")
        if not sep or not module_name or not attr:
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} must be of the form module:function")
            return None
        try:
            fn = resolve_fn(target, self.path.parent)
        except Exception as exc:
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} does not import: {type(exc).__name__}: {exc}")
            return None
        if not callable(fn):
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} is not callable")
            return None
        self.track_sources(module_name, fn)
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return declared or [], "unknown", inspect.getdoc(fn) or ""
        hints = _type_hints(fn)
        doc = inspect.getdoc(fn) or ""
        return_type = _annotation_text(hints.get("return", sig.return_annotation))
        accepts_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        named = {
            p.name: p
            for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)
        }
        if declared is not None:
            ok = True
            names = {p.name for p in declared}
            for dp in declared:
                if dp.name not in named and not accepts_any:
                    self.problem_at(self.locate.value(loc), key, f"fn {target!r} has no parameter {dp.name!r}")
                    ok = False
            for name, p in named.items():
                if p.default is inspect.Parameter.empty and name not in names:
                    self.problem_at(
                        self.locate.value(loc), key, f"fn {target!r} requires {name!r}, which is not a declared param"
                    )
                    ok = False
            return (declared, return_type, doc) if ok else None
        params: list[Param] = []
        for p in named.values():
            required = p.default is inspect.Parameter.empty
            ptype = _annotation_type(hints.get(p.name, p.annotation))
            if ptype is None and not required:
                ptype = _type_of(p.default) if _type_of(p.default) in PARAM_TYPES else None
            if ptype is None:
                self.problem_at(
                    self.locate.value(loc),
                    key,
                    f"fn parameter {p.name!r} has no str/int/float/bool/list/dict annotation: annotate it or "
                    "declare `params:`",
                )
                return None
            default = None if required else _json_safe(p.default)
            params.append(Param(p.name, ptype, required, default, "", None))
        return params, return_type, doc

    def track_sources(self, module_name: str, fn: Any) -> None:
        """Record the files an fn's signature comes from, so the cache notices when they change."""
        files = {getattr(sys.modules.get(module_name), "__file__", None)}
        try:
            files.add(inspect.getsourcefile(fn))
        except TypeError:  # a builtin or C function
            files.add(None)
        for name in files:
            path = Path(name) if name else None
            if path is None or path.suffix != ".py" or not path.is_file():
                self.cacheable = False
                continue
            self.extra_files[str(path.resolve())] = hashlib.sha256(path.read_bytes()).hexdigest()

    def build_env(self, opts: RuntimeOptions, key: str, loc: tuple[Any, ...]) -> dict[str, str]:
        env: dict[str, str] = {}
        if opts.env_file:
            env_path = (self.path.parent / opts.env_file).resolve()
            try:
                data = env_path.read_bytes()
                content = data.decode("utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                self.problem((*loc, "env_file"), key, f"cannot read env_file {opts.env_file!r}: {reason}")
            else:
                self.extra_files[str(env_path)] = hashlib.sha256(data).hexdigest()
                for name, value in parse_env_file(content).items():
                    if not ENV_NAME.match(name):
                        self.problem(
                            (*loc, "env_file"), key, f"env_file {opts.env_file!r}: {name!r} is not a variable name"
                        )
                    env[name] = value
        for var, setting in (opts.env or {}).items():
            env[var] = _env_text(setting)
        return env


def _load_file(path: Path, environ: Mapping[str, str], options: LoadOptions) -> tuple[list[ToolSpec], list[Problem]]:
    # A load allocates hundreds of thousands of containers and frees none of them: the cyclic
    # GC would walk them again and again for nothing (it doubles the cost of unpickling).
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_file_uncollected(path, environ, options)
    finally:
        if was_enabled:
            gc.enable()


def _load_file_uncollected(
    path: Path, environ: Mapping[str, str], options: LoadOptions
) -> tuple[list[ToolSpec], list[Problem]]:
    cache_file = None
    if options.cache_dir is not None and not options.check:
        try:
            raw = path.read_bytes()
        except OSError:
            raw = None
        if raw is not None:
            head = f"{CACHE_VERSION}\0{path}\0{path.resolve()}\0{options.default_timeout}\0{options.max_output}\0"
            digest = hashlib.sha256(head.encode("utf-8", "surrogatepass") + raw).hexdigest()
            cache_file = options.cache_dir / f"{digest}.pickle"
            cached = _read_cache(cache_file, environ)
            if cached is not None:
                return cached
    loader = _FileLoader(path, environ, options)
    tools = loader.load()
    if cache_file is not None and not loader.errors() and loader.cacheable:
        _write_cache(cache_file, tools, loader.problems, loader.used_env, loader.extra_files)
    return tools, loader.problems


def _env_digest(value: str | None) -> str:
    return "-" if value is None else hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def _read_cache(cache_file: Path, environ: Mapping[str, str]) -> tuple[list[ToolSpec], list[Problem]] | None:
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
        warnings: list[Problem] = entry["warnings"]
        return tools, warnings
    except Exception:
        return None


def _write_cache(
    cache_file: Path,
    tools: list[ToolSpec],
    warnings: list[Problem],
    used_env: dict[str, str | None],
    files: dict[str, str],
) -> None:
    entry = {
        "env": {k: _env_digest(v) for k, v in used_env.items()},
        "files": files,
        "tools": tools,
        "warnings": warnings,
    }
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


_UNION_MEMBERS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


def _data_loc(loc: Sequence[Any], data: Any) -> tuple[Any, ...]:
    """The part of a pydantic error location that addresses the data (not union member names)."""
    out: list[Any] = []
    node = data
    for part in loc:
        in_dict = isinstance(node, dict) and part in node
        if in_dict or (isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
            node = node[part]
        else:
            if isinstance(node, dict) and isinstance(part, str) and part not in _UNION_MEMBERS and "[" not in part:
                out.append(part)  # a missing field
            break
        out.append(part)
    return tuple(out)


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


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


def _type_of(value: Any) -> str:
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


def _is_type(value: Any, kind: str) -> bool:
    actual = _type_of(value)
    return actual == kind or (kind == "float" and actual == "int")


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _env_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _json_safe(value: Any) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _type_hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return {}


_ANNOTATIONS = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "list": "list",
    "tuple": "list",
    "set": "list",
    "sequence": "list",
    "dict": "dict",
    "mapping": "dict",
}


def _annotation_type(annotation: Any) -> str | None:
    """The param type of an annotation: str/int/float/bool, list[...] and dict[...] (Optional allowed)."""
    if annotation is inspect.Parameter.empty:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _annotation_type(members[0]) if len(members) == 1 else None
    if origin is typing.Literal:
        kinds = {_type_of(v) for v in typing.get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else None
    target = origin if origin is not None else annotation
    if isinstance(target, str):  # an annotation that could not be evaluated
        text = target.split("[", 1)[0].split("|", 1)[0].strip().removeprefix("typing.")
        return _ANNOTATIONS.get(text.lower())
    name = getattr(target, "__name__", "")
    return _ANNOTATIONS.get(name.lower()) if name else None


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "unknown"
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not typing.get_args(annotation):
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
    """KEY=VALUE lines; blank lines and # comments skipped; `export ` and matching quotes stripped.

    Values are taken literally: no variable expansion, no escapes (a value in double quotes may
    hold `#`, `=` and spaces). Lines without `=` are ignored.
    """
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


_PLACEHOLDER: dict[str, Any] = {"str": "text", "int": 1, "float": 1.0, "bool": True, "list": [], "dict": {}}


def _example_value(param: Param) -> Any:
    for value in (param.example, param.default):
        if value is not None:
            return value
    if param.enum:
        return param.enum[0]
    if param.type in ("int", "float") and param.min is not None:
        return int(param.min) if param.type == "int" else float(param.min)
    return _PLACEHOLDER.get(param.type, "text")


def example_call(key: str, params: Sequence[Param]) -> str:
    """`key(param=value, ...)` with Python literals: required params, and optional ones with an example."""
    shown = [p for p in params if p.required or p.example is not None]
    return f"{key}({', '.join(f'{p.name}={_example_value(p)!r}' for p in shown)})"


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
    if tool.user is not None:
        import pwd

        try:
            entry = pwd.getpwnam(tool.user)
        except KeyError:
            pass
        else:
            env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name)
    env.update(tool.env)
    return env
