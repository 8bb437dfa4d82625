"""Command templates: one sandboxed Jinja environment, strict undefined, and the `quote` filter.

How values render (documented in docs/catalog.md):

=========  ==========================  ======================================
value      ``{{ v }}``                 ``{{ v | quote }}``
=========  ==========================  ======================================
str        as is                       POSIX-quoted (``shlex.quote``)
int/float  ``str(v)``                  quoted text of ``str(v)``
bool       ``true`` / ``false``        ``true`` / ``false``
None       empty string                ``''``
list       compact JSON                each item quoted, joined by one space
dict       compact JSON                the compact JSON, quoted as one word
=========  ==========================  ======================================
"""

from __future__ import annotations

import json
import re
import shlex
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, TemplateSyntaxError, nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ToolFailed


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
    if isinstance(value, (list, tuple)):
        return " ".join(shlex.quote(_text(item)) for item in value)
    return shlex.quote(_text(value))


def _finalize(value: Any) -> Any:
    return _text(value)


_ENV = ImmutableSandboxedEnvironment(
    undefined=StrictUndefined,
    autoescape=False,
    keep_trailing_newline=True,
    finalize=_finalize,
)
_ENV.filters["quote"] = quote
FILTERS = frozenset(_ENV.filters)


def environment() -> ImmutableSandboxedEnvironment:
    return _ENV


@lru_cache(maxsize=None)
def compiled(source: str) -> Any:
    """Compile a template once per process (on first use)."""
    return _ENV.from_string(source)


def render(source: str, variables: dict[str, Any]) -> str:
    """Render a command template; an undefined variable raises before anything runs."""
    try:
        return str(compiled(source).render(variables))
    except TemplateSyntaxError:
        raise
    except Exception as exc:  # UndefinedError, SecurityError, filter errors...
        raise ToolFailed(exc) from exc


# -- load-time analysis --------------------------------------------------------------------------

_SIMPLE_TAG = re.compile(
    r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*((?:\|\s*[A-Za-z_][A-Za-z0-9_]*\s*)*)\}\}"
    r"|\{%-?\s*(if|elif)\s+(not\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*-?%\}"
    r"|\{%-?\s*(else|endif)\s*-?%\}"
)


class Analysis:
    """What a template uses: its free variables, the unquoted ones, and any syntax error."""

    __slots__ = ("names", "unquoted", "error", "error_line")

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.unquoted: set[str] = set()
        self.error: str | None = None
        self.error_line = 1


def _analyse_simple(source: str) -> Analysis | None:
    """Fast path for the common shapes (`{{ x | quote }}`, `{% if x %}`); None means "ask Jinja"."""
    analysis = Analysis()
    depth = 0
    pos = 0
    for match in _SIMPLE_TAG.finditer(source):
        between = source[pos : match.start()]
        if "{{" in between or "{%" in between or "{#" in between:
            return None
        pos = match.end()
        name, filters, if_kw, _neg, if_name, other = match.groups()
        if name:
            chain = [f.strip() for f in filters.split("|") if f.strip()]
            if any(f not in FILTERS for f in chain):
                return None
            analysis.names.add(name)
            if "quote" not in chain:
                analysis.unquoted.add(name)
        elif if_kw:
            if if_kw == "if":
                depth += 1
            elif depth == 0:
                return None
            analysis.names.add(if_name)
        elif other == "else":
            if depth == 0:
                return None
        else:
            if depth == 0:
                return None
            depth -= 1
    rest = source[pos:]
    if depth or "{{" in rest or "{%" in rest or "{#" in rest:
        return None
    return analysis


def _walk_unquoted(node: nodes.Node, out: set[str]) -> None:
    """Names that reach an Output node without passing through `quote`."""
    if isinstance(node, nodes.Filter) and node.name == "quote":
        return
    if isinstance(node, nodes.Name) and node.ctx == "load":
        out.add(node.name)
        return
    for child in node.iter_child_nodes():
        _walk_unquoted(child, out)


def analyse(source: str) -> Analysis:
    """Check a template at load time without compiling it to Python."""
    simple = _analyse_simple(source)
    if simple is not None:
        return simple
    analysis = Analysis()
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError as exc:
        analysis.error = exc.message or "template syntax error"
        analysis.error_line = exc.lineno or 1
        return analysis
    from jinja2 import meta

    for flt in tree.find_all(nodes.Filter):
        if flt.name not in FILTERS:
            analysis.error = f"no filter named {flt.name!r}"
            analysis.error_line = flt.lineno
            return analysis
    for test in tree.find_all(nodes.Test):
        if test.name not in _ENV.tests:
            analysis.error = f"no test named {test.name!r}"
            analysis.error_line = test.lineno
            return analysis
    analysis.names = set(meta.find_undeclared_variables(tree))
    for output in tree.find_all(nodes.Output):
        for child in output.nodes:
            if not isinstance(child, nodes.TemplateData):
                _walk_unquoted(child, analysis.unquoted)
    return analysis
