"""Where each caller value lands in a command: the data flow of a template through the shell.

`uses(source)` follows every value from the template (through `{% set %}`, `{% for %}`, filters
and guards) to the spot of the shell command it is rendered into, and returns one `Use` per
rendered value: is it still shell-quoted when it arrives (`quote` was the last thing applied), is
it inside a quoted string of the command, at the start of a shell word, before a `--`, the
argument of `sh -c` or `eval` (or reaches one through a shell variable it was assigned to), right
after a backslash, inside a shell comment, and is it guarded by an `{% if %}` that tests it.

Two ways in, one scanner: a template made only of `{{ name | filters }}` and `{% if [not] name %}`
tags (most commands) is tokenised by a regex, without Jinja (parsing costs milliseconds a template);
anything else is walked through Jinja's AST. Both produce the same events for the scanner
(`shellscan.Shell`, the shell lexer).
The catalog turns these into warnings (docs/catalog.md lists them); `curl` tools also use them
at call time to refuse a value that would reach curl's option position.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from ..exec import render
from .shellscan import COMMAND, EVAL, SHELL_C, Shell

__all__ = ["COMMAND", "EVAL", "NUMBER", "QUOTED", "RAW", "SAFE", "SHELL_C", "Use", "uses"]

# States of a value as it reaches the output: a count (never negative, no shell syntax), still shell-quoted,
# a number (from `int`, `float`...; it can be negative), or raw text.
SAFE, QUOTED, NUMBER, RAW = "safe", "quoted", "number", "raw"
_RANK = {SAFE: 0, QUOTED: 1, NUMBER: 2, RAW: 3}
_NUMERIC = frozenset({"int", "float", "abs", "round"})
_COUNTS = frozenset({"length", "count", "wordcount"})  # never negative: no option, no shell syntax
_KEEPS = frozenset({"default", "d"})


@dataclass(frozen=True, slots=True)
class Use:
    """One param value rendered into the command."""

    name: str
    state: str  # QUOTED, NUMBER or RAW
    context: str  # "plain", "single" (inside '...') or "double" (inside "...")
    word_start: bool  # the value begins a shell word
    after_dashdash: bool  # a `--` word came before it in this command
    prev_word: str  # the word before it in this command ("" when first)
    role: str  # "" or what the shell runs it as: COMMAND (the command name), EVAL, SHELL_C
    guarded: bool  # inside a guard that tests it (`{% if x %}`, `x is defined`, `x | default`)
    via: str  # "" or how it got there: "{% set y %}", "{% for y %}", "$V" (a shell variable)
    after_quote: str  # a filter applied after `quote` (which undoes it), or ""
    line: int
    escaped: bool = False  # a backslash comes right before it: it escapes the value's first character
    comment: bool = False  # it lands inside a shell comment (`# ...`), which a newline in it ends
    shell: str = ""  # for SHELL_C: the shell's name as written (`sh`, `bash`...)

    @property
    def code(self) -> bool:
        """The shell runs it as code: the command name, the argument of `eval`, `sh -c`'s string."""
        return bool(self.role)


@dataclass
class _Value:
    """The params an expression carries, each with its state, and how it got there."""

    states: dict[str, str] = field(default_factory=dict)
    unguarded: set[str] = field(default_factory=set)  # params rendered without a guard
    via: dict[str, str] = field(default_factory=dict)
    after_quote: dict[str, str] = field(default_factory=dict)

    def merge(self, other: _Value) -> _Value:
        for name, state in other.states.items():
            if name not in self.states or _RANK[state] > _RANK[self.states[name]]:
                self.states[name] = state
        self.unguarded |= other.unguarded
        self.via.update(other.via)
        self.after_quote.update(other.after_quote)
        return self

    def to(self, state: str) -> _Value:
        return _Value(dict.fromkeys(self.states, state), set(self.unguarded), dict(self.via), dict(self.after_quote))


# -- events: ("text", str) | ("out", _Value, guards, line) | ("branch",) | ("next",) | ("end",) ---------


def uses(source: str, words: tuple[str, ...] = ()) -> list[Use]:
    """Every param value the template renders, where and how (`words`: the command words before it).

    A value assigned to a shell variable that the command later runs as code (`V={{ v }}; eval "$V"`)
    gives a second Use, with that role and `via` `$V`."""
    events = _simple_events(source)
    if events is None:
        events = _jinja_events(source)
    found: list[Use] = []
    shell = Shell(words)
    stack: list[tuple[Shell, Shell | None]] = []
    for event in events:
        kind = event[0]
        if kind == "text":
            shell.feed(event[1])
            _reached(shell, found)
        elif kind == "branch":
            stack.append((shell.copy(), None))
        elif kind == "next":
            before, first = stack[-1]
            stack[-1] = (before, first or shell)
            shell = before.copy()
        elif kind == "end":
            _, first = stack.pop()
            shell = first or shell
        else:
            value, guards, line = event[1], event[2], event[3]
            info = shell.value()
            assigned = info.pop("assigned")
            for name, state in sorted(value.states.items()):
                guarded = name in guards or name not in value.unguarded
                via, after = value.via.get(name, ""), value.after_quote.get(name, "")
                use = Use(name, state, guarded=guarded, via=via, after_quote=after, line=line, **info)
                found.append(use)
                if assigned and state in (QUOTED, RAW):
                    shell.tainted.setdefault(assigned, []).append(use)
    _reached(shell, found)
    return found


def _reached(shell: Shell, found: list[Use]) -> None:
    """The Uses of values that reach code through a shell variable, since the last look."""
    seen = {(u.name, u.via, u.role) for u in found}
    for var, role, name in shell.reached:
        for use in shell.tainted.get(var, []):
            if (use.name, f"${var}", role) not in seen:
                seen.add((use.name, f"${var}", role))
                found.append(replace(use, role=role, shell=name, via=f"${var}", escaped=False, comment=False))
    shell.reached.clear()


_SIMPLE = re.compile(
    r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*((?:\|\s*[A-Za-z_][A-Za-z0-9_]*\s*)*)\}\}"
    r"|\{%-?\s*(if|elif)\s+(not\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*-?%\}"
    r"|\{%-?\s*(else|endif)\s*-?%\}"
)


def _simple_events(source: str) -> list[tuple[Any, ...]] | None:
    if render.analyse_simple(source) is None or "{%-" in source or "-%}" in source:
        return None  # Jinja decides (whitespace control changes the text: let Jinja's AST say how)
    events: list[tuple[Any, ...]] = []
    guards: list[set[str]] = []  # per open if: the names its current branch knows to be set
    known: list[set[str]] = []  # per open if: the names set when its earlier tests failed (`if not x`)
    pos = 0
    for match in _SIMPLE.finditer(source):
        events.append(("text", source[pos : match.start()]))
        line = source.count("\n", 0, match.start()) + 1
        pos = match.end()
        name, filters, if_kw, neg, if_name, other = match.groups()
        if name:
            chain = [f.strip() for f in filters.split("|") if f.strip()]
            value = _Value({name: RAW}, {name})
            for flt in chain:
                value = _apply(flt, value, _Value())
            events.append(("out", value, set().union(*guards), line))
        elif if_kw == "if":
            events.append(("branch",))
            guards.append(set() if neg else {if_name})
            known.append({if_name} if neg else set())
        elif if_kw:  # elif
            events.append(("next",))
            guards[-1] = known[-1] | (set() if neg else {if_name})
            known[-1] = known[-1] | ({if_name} if neg else set())
        elif other == "else":
            events.append(("next",))
            guards[-1] = set(known[-1])
        else:
            events.append(("end",))
            guards.pop()
            known.pop()
    events.append(("text", source[pos:]))
    return events


def _apply(flt: str, inner: _Value, args: _Value) -> _Value:
    """The value after filter `flt`."""
    if flt == "quote":
        out = inner.to(QUOTED)
        out.after_quote = {}
        return out
    if flt in _KEEPS:
        out = _Value(dict(inner.states), set(), dict(inner.via), dict(inner.after_quote))
        return out.merge(args)
    if flt in _COUNTS:
        return inner.to(SAFE)
    out = inner.to(NUMBER if flt in _NUMERIC else RAW).merge(args.to(RAW))
    for name, state in inner.states.items():
        if state == QUOTED:
            out.after_quote[name] = flt
    return out


def _jinja_events(source: str) -> list[tuple[Any, ...]]:
    tree = render.environment().parse(source)
    walker = _Walker()
    walker.body(tree.body, set())
    return walker.events


class _Walker:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.locals: dict[str, _Value] = {}
        self.transform: list[str] = []  # enclosing {% filter %} blocks

    def body(self, items: list[Any], guards: set[str]) -> None:
        from jinja2 import nodes

        for node in items:
            if isinstance(node, nodes.Output):
                self.output(node, guards)
            elif isinstance(node, nodes.If):
                self.branches(node, guards)
            elif isinstance(node, nodes.For):
                self.loop(node, guards)
            elif isinstance(node, nodes.Assign):
                self.assign(node.target, self.expr(node.node, guards), "set")
            elif isinstance(node, nodes.AssignBlock):
                self.assign_block(node, guards)
            elif isinstance(node, nodes.FilterBlock):
                self.transform.append(node.filter.name)
                self.body(node.body, guards)
                self.transform.pop()
            elif isinstance(node, nodes.With):
                for target, expr in zip(node.targets, node.values, strict=False):
                    self.assign(target, self.expr(expr, guards), "set")
                self.body(node.body, guards)
            elif isinstance(node, nodes.Scope | nodes.ScopedEvalContextModifier):
                self.body(node.body, guards)
            # Macro and call blocks: their bodies render only when called; a call's arguments are raw values.

    def output(self, node: Any, guards: set[str]) -> None:
        from jinja2 import nodes

        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                self.events.append(("text", child.data))
                continue
            value = self.expr(child, guards)
            for flt in reversed(self.transform):
                value = _apply(flt, value, _Value())
            self.events.append(("out", value, guards, child.lineno))

    def loop(self, node: Any, guards: set[str]) -> None:
        self.assign(node.target, self.expr(node.iter, guards).to(RAW), "for")
        self.events.append(("branch",))
        self.body(node.body, guards)
        self.events.append(("next",))
        self.body(node.else_, guards)
        self.events.append(("end",))

    def assign_block(self, node: Any, guards: set[str]) -> None:
        inner = _Walker()
        inner.locals = self.locals
        inner.body(node.body, guards)
        value = _Value()
        for event in inner.events:
            if event[0] == "out":
                value.merge(event[1])
        self.assign(node.target, value, "set")

    def branches(self, node: Any, guards: set[str]) -> None:
        self.events.append(("branch",))
        known_false: set[str] = set()  # names an earlier test proved set when it failed
        for i, branch in enumerate([node, *node.elif_]):
            if i:
                self.events.append(("next",))
            pos, neg = _guards(branch.test)
            self.body(branch.body, guards | known_false | pos)
            known_false |= neg
        self.events.append(("next",))
        self.body(node.else_, guards | known_false)
        self.events.append(("end",))

    def assign(self, target: Any, value: _Value, how: str) -> None:
        from jinja2 import nodes

        names = [target.name] if isinstance(target, nodes.Name) else [n.name for n in target.find_all(nodes.Name)]
        for name in names:
            carried = _Value(dict(value.states), set(value.unguarded), dict(value.via), dict(value.after_quote))
            for param in carried.states:
                carried.via.setdefault(param, f"{{% {how} {name} %}}")
            self.locals[name] = carried

    def expr(self, node: Any, guards: set[str]) -> _Value:
        from jinja2 import nodes

        if isinstance(node, nodes.Name):
            if node.name in self.locals:
                local = self.locals[node.name]
                return _Value(dict(local.states), local.unguarded - guards, dict(local.via), dict(local.after_quote))
            return _Value({node.name: RAW}, set() if node.name in guards else {node.name})
        if isinstance(node, nodes.Filter):
            inner = self.expr(node.node, guards) if node.node is not None else _Value()
            args = _Value()
            for arg in [*node.args, *(kw.value for kw in node.kwargs)]:
                args.merge(self.expr(arg, guards))
            return _apply(node.name, inner, args)
        if isinstance(node, nodes.Const | nodes.Test | nodes.Compare | nodes.Not):
            return _Value()
        if isinstance(node, nodes.CondExpr):
            pos, neg = _guards(node.test)
            value = self.expr(node.expr1, guards | pos)
            return value.merge(self.expr(node.expr2, guards | neg)) if node.expr2 is not None else value
        if isinstance(node, nodes.Concat | nodes.Add | nodes.And | nodes.Or):
            value = _Value()
            parts = node.nodes if isinstance(node, nodes.Concat) else [node.left, node.right]
            for part in parts:
                value.merge(self.expr(part, guards))
            return value
        value = _Value()
        for child in node.iter_child_nodes():
            value.merge(self.expr(child, guards))
        return value.to(RAW)


def _guards(test: Any) -> tuple[set[str], set[str]]:
    """(names set when `test` is true, names set when it is false)."""
    from jinja2 import nodes

    if isinstance(test, nodes.Name):
        return {test.name}, set()
    if isinstance(test, nodes.Test) and isinstance(test.node, nodes.Name):
        if test.name == "defined":
            return {test.node.name}, set()
        if test.name == "undefined":
            return set(), {test.node.name}
    if isinstance(test, nodes.Not):
        pos, neg = _guards(test.node)
        return neg, pos
    if isinstance(test, nodes.And):
        (lp, ln), (rp, rn) = _guards(test.left), _guards(test.right)
        return lp | rp, ln & rn
    if isinstance(test, nodes.Or):
        (lp, ln), (rp, rn) = _guards(test.left), _guards(test.right)
        return lp & rp, ln | rn
    return set(), set()
