"""Command templates: one sandboxed Jinja environment, strict undefined, and the `quote` filter.

How values render (documented in docs/catalog.md):

=========  ==========================  ======================================
value      ``{{ v }}``                 ``{{ v | quote }}``
=========  ==========================  ======================================
str        as is                       POSIX-quoted (``shlex.quote``)
int/float  ``str(v)``                  quoted text of ``str(v)``
bool       ``true`` / ``false``        ``true`` / ``false``
None       empty string                ``''``
absent     raises UndefinedVariable    raises UndefinedVariable
list       compact JSON                each item quoted, joined by one space
dict       compact JSON                the compact JSON, quoted as one word
=========  ==========================  ======================================

A variable the call did not provide (an optional param without a default that the caller left
out) is *undefined*: rendering it raises `UndefinedVariable` before anything runs, with or without
`quote`; no empty string is ever substituted. A guard still works: an undefined value is false
(`{% if x %}`), `x is defined` is false and `x | default(...)` gives the default.

A `secret` param renders as a reference to the environment variable that holds its value
(``${TOOLRUN_SECRET_<NAME>}``, or ``"$TOOLRUN_SECRET_<NAME>"`` through ``quote``): see SecretRef.
"""

from __future__ import annotations

import json
import re
import shlex
from collections import OrderedDict
from contextlib import suppress
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from .. import speedups
from ..errors import ToolFailed, UndefinedVariable

if TYPE_CHECKING:
    from jinja2 import nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    from ..models import ToolSpec

# Jinja is imported on first need (about 25 ms): a catalog of plain templates, with a warm cache, never needs it.
# The names Jinja resolves by itself (its default globals); tests/test_render.py keeps this in step with Jinja.
JINJA_GLOBALS = frozenset({"range", "dict", "lipsum", "cycler", "joiner", "namespace"})


SECRET_ENV_PREFIX = "TOOLRUN_SECRET_"


def secret_env_name(param: str) -> str:
    """The child's environment variable that carries a secret param: TOOLRUN_SECRET_<NAME>."""
    return SECRET_ENV_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", param).upper()


class SecretRef(str):
    """What a template sees for a secret param: a shell reference to the variable holding its value.

    ``{{ token }}`` renders ``${TOOLRUN_SECRET_TOKEN}``, ``{{ token | quote }}`` renders
    ``"$TOOLRUN_SECRET_TOKEN"`` (one word, whatever the value holds); the value itself goes into
    the child's environment, never onto its command line. ``{% if token %}`` tests the value.
    """

    env_name: str
    filled: bool

    def __new__(cls, env_name: str, filled: bool = True) -> SecretRef:
        ref = super().__new__(cls, "${" + env_name + "}")
        ref.env_name = env_name
        ref.filled = filled
        return ref

    def __bool__(self) -> bool:
        return self.filled


def secret_refs(tool: ToolSpec, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The template's view of `values` (each given secret as a SecretRef) and the variables holding them."""
    refs = dict(values)
    env: dict[str, str] = {}
    for p in tool.params:
        value = values.get(p.name)
        if p.secret and isinstance(value, str):
            name = secret_env_name(p.name)
            refs[p.name] = SecretRef(name, bool(value))
            env[name] = value
    return refs, env


def _text(value: Any) -> str:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def quote(value: Any) -> str:
    """POSIX shell quoting; a list becomes its quoted items joined by single spaces."""
    if type(value) is SecretRef:
        return f'"${value.env_name}"'
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(_text(item)) for item in value)
    return shlex.quote(_text(value))


def _finalize(value: Any) -> Any:
    return _text(value)


def undefined_message(name: str) -> str:
    """The message of an undefined variable, the same on the plain and the Jinja path."""
    return f"{name!r} is undefined: the call did not provide it and it has no default"


@cache
def _not_provided() -> type[Any]:
    """Jinja's strict undefined, except that it is false: `{% if x %}` guards an absent value."""
    from jinja2 import StrictUndefined
    from jinja2.utils import missing

    class NotProvided(StrictUndefined):
        __slots__ = ()

        def __bool__(self) -> bool:  # type: ignore[override]
            return False

        @property
        def _undefined_message(self) -> str:
            if self._undefined_hint is None and self._undefined_obj is missing:
                return undefined_message(str(self._undefined_name))
            return str(super()._undefined_message)

    return NotProvided


@cache
def environment() -> ImmutableSandboxedEnvironment:
    """The one sandboxed Jinja environment: strict undefined, no autoescape, the `quote` filter."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(
        undefined=_not_provided(),
        autoescape=False,
        keep_trailing_newline=True,
        finalize=_finalize,
    )
    env.filters["quote"] = quote
    return env


@cache
def filter_names() -> frozenset[str]:
    return frozenset(environment().filters)


# Compiled templates kept per process, the most recently used first out. A template is compiled on its first
# call, never at load (a load only parses it, to report errors), and one compiled template holds about 5 KB:
# 10,000 tools called once each would otherwise keep 50 MB in every worker. Templates of the plain shape
# (text, `{{ x }}`, `{{ x | quote }}`: most of them) render without Jinja and are never compiled.
COMPILED_MAX = 2048
# Templates of the plain shapes are joined without Jinja (the `plain_render` speedup, speedups.py).
PLAIN_RENDER = speedups.on("plain_render")
_COMPILED: OrderedDict[str, Any] = OrderedDict()


def compiled(source: str) -> Any:
    """The compiled template, compiled on first use and kept while it is among the COMPILED_MAX most recent."""
    template = _COMPILED.get(source)
    if template is None:
        template = environment().from_string(source)
        _COMPILED[source] = template
        while len(_COMPILED) > COMPILED_MAX:
            _COMPILED.popitem(last=False)
    else:
        with suppress(KeyError):  # another thread dropped it meanwhile
            _COMPILED.move_to_end(source)
    return template


def render(source: str, variables: dict[str, Any]) -> str:
    """Render a command template; an undefined variable raises before anything runs.

    Every failure (sandbox violation, syntax error, a value a filter cannot handle) raises
    ToolFailed wrapping the Jinja error, so the doors map it like any tool error; an undefined
    variable raises its subclass UndefinedVariable.
    """
    parts = _plain_parts(source) if PLAIN_RENDER else None
    try:
        if parts is None:
            return str(compiled(source).render(variables))
        out = []
        for part in parts:
            if isinstance(part, str):
                out.append(part)
            elif part[0] not in variables:
                from jinja2 import UndefinedError

                raise UndefinedError(undefined_message(part[0]))
            else:
                out.append(quote(variables[part[0]]) if part[1] else _text(variables[part[0]]))
        return "".join(out)
    except Exception as exc:  # UndefinedError, SecurityError, TemplateSyntaxError, filter errors...
        from jinja2 import UndefinedError

        raise (UndefinedVariable if isinstance(exc, UndefinedError) else ToolFailed)(exc) from exc


def _stray_tag(text: str, before_tag: bool = False) -> bool:
    """Template text that still opens a tag the fast scanners did not match: Jinja must decide.

    Right before a matched tag, a trailing `{` counts too: `{{{ x }}` lexes as `{{` then `{`."""
    return "{{" in text or "{%" in text or "{#" in text or (before_tag and text.endswith("{"))


# `{{ name }}` and `{{ name | quote }}`: the shape of most command templates.
_PLAIN_TAG = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*quote\s*)?\}\}")
# Names that Jinja resolves by itself when the variables lack them (globals, template specials).
_SPECIAL_NAMES = frozenset({"self", "loop", "caller", "varargs", "kwargs", "super"})


@lru_cache(maxsize=8192)  # a few hundred bytes each; recomputing one costs microseconds
def _plain_parts(source: str) -> tuple[str | tuple[str, bool], ...] | None:
    """A template made only of text, `{{ name }}` and `{{ name | quote }}`, as parts rendered without Jinja:
    text, or (name, quoted). None for anything else (Jinja renders it).

    It renders exactly as Jinja would (tests/test_render.py checks the two against each other)."""
    if "\r" in source:  # Jinja normalises newlines in template text
        return None
    parts: list[str | tuple[str, bool]] = []
    pos = 0
    for match in _PLAIN_TAG.finditer(source):
        between = source[pos : match.start()]
        if _stray_tag(between, before_tag=True):
            return None
        name = match.group(1)
        if name in _KEYWORDS or name in _SPECIAL_NAMES or name in JINJA_GLOBALS:
            return None
        if between:
            parts.append(between)
        parts.append((name, match.group(2) is not None))
        pos = match.end()
    rest = source[pos:]
    if _stray_tag(rest):
        return None
    if rest:
        parts.append(rest)
    return tuple(parts)


# -- load-time analysis --------------------------------------------------------------------------

_SIMPLE_TAG = re.compile(
    r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*((?:\|\s*[A-Za-z_][A-Za-z0-9_]*\s*)*)\}\}"
    r"|\{%-?\s*(if|elif)\s+(not\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*-?%\}"
    r"|\{%-?\s*(else|endif)\s*-?%\}"
)


class Analysis:
    """What a template uses: its free variables, the unquoted ones, and any syntax error."""

    __slots__ = ("error", "error_line", "names", "unquoted")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.unquoted: set[str] = set()
        self.error: str | None = None
        self.error_line = 1


# Words Jinja reads as constants or operators, never as variable names.
_KEYWORDS = frozenset(
    {
        *("true", "false", "none", "True", "False", "None"),
        *("and", "or", "not", "in", "is", "if", "else", "elif", "endif", "for", "endfor", "recursive"),
        *("block", "set", "macro", "call", "filter", "raw", "with", "without"),
        *("import", "include", "extends", "from", "as"),
    }
)


def analyse_simple(source: str) -> Analysis | None:
    """Fast path for the common shapes (`{{ x | quote }}`, `{% if x %}`); None means "ask Jinja".

    It accepts only templates Jinja compiles too (balanced if/elif/else/endif, at most one else
    per if and no elif after it, no keyword used as a name); anything else goes to Jinja.
    """
    analysis = Analysis()
    seen_else: list[bool] = []  # one entry per open `if`: has its `else` been seen?
    pos = 0
    for match in _SIMPLE_TAG.finditer(source):
        between = source[pos : match.start()]
        if _stray_tag(between, before_tag=True):
            return None
        pos = match.end()
        name, filters, if_kw, _neg, if_name, other = match.groups()
        if name:
            chain = [f.strip() for f in filters.split("|") if f.strip()]
            if name in _KEYWORDS or any(f != "quote" and f not in filter_names() for f in chain):
                return None
            analysis.names.add(name)
            if "quote" not in chain:
                analysis.unquoted.add(name)
        elif if_kw:
            if if_name in _KEYWORDS:
                return None
            if if_kw == "if":
                seen_else.append(False)
            elif not seen_else or seen_else[-1]:
                return None
            analysis.names.add(if_name)
        elif other == "else":
            if not seen_else or seen_else[-1]:
                return None
            seen_else[-1] = True
        else:
            if not seen_else:
                return None
            seen_else.pop()
    rest = source[pos:]
    if seen_else or _stray_tag(rest):
        return None
    return analysis


def _walk_unquoted(node: nodes.Node, out: set[str]) -> None:
    """Names that reach an Output node without passing through `quote`."""
    from jinja2 import nodes

    if isinstance(node, nodes.Filter) and node.name == "quote":
        return
    if isinstance(node, nodes.Name) and node.ctx == "load":
        out.add(node.name)
        return
    for child in node.iter_child_nodes():
        _walk_unquoted(child, out)


def analyse(source: str) -> Analysis:
    """Check a template at load time without compiling it to Python."""
    simple = analyse_simple(source)
    if simple is not None:
        return simple
    from jinja2 import TemplateSyntaxError, nodes

    env = environment()
    analysis = Analysis()
    try:
        tree = env.parse(source)
    except TemplateSyntaxError as exc:
        analysis.error = exc.message or "template syntax error"
        analysis.error_line = exc.lineno or 1
        return analysis
    from jinja2 import meta

    for flt in tree.find_all(nodes.Filter):
        if flt.name not in filter_names():
            analysis.error = f"no filter named {flt.name!r}"
            analysis.error_line = flt.lineno
            return analysis
    for test in tree.find_all(nodes.Test):
        if test.name not in env.tests:
            analysis.error = f"no test named {test.name!r}"
            analysis.error_line = test.lineno
            return analysis
    analysis.names = set(meta.find_undeclared_variables(tree))
    for output in tree.find_all(nodes.Output):
        for child in output.nodes:
            if not isinstance(child, nodes.TemplateData):
                _walk_unquoted(child, analysis.unquoted)
    return analysis
