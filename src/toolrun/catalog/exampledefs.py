"""A tool's `examples:`: each becomes an Example, checked against the tool's params.

Arguments are checked exactly as a call would check them (unknown names, wrong types, missing
required ones, enum/pattern/min/max), unless the example expects an `error`; every regular
expression must compile. A bad example is an error of the catalog, at the example's own line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..models import Example, Expect, ToolSpec

if TYPE_CHECKING:
    from .loadcontext import LoadContext
    from .schema import ToolDef


def build_examples(ctx: LoadContext, spec: ToolSpec, tool: ToolDef, loc: tuple[Any, ...]) -> ToolSpec:
    """`spec` with the tool's examples; each one's problems are errors at its own line."""
    from .examples import problems

    built: list[Example] = []
    for i, ed in enumerate(tool.examples or []):
        eloc = (*loc, "examples", i)
        e = ed.expect
        expect = (
            Expect(e.exit_code, e.stdout, e.stdout_matches, e.stderr_matches, e.json_fields, e.error)
            if e is not None
            else Expect()
        )
        line, col = ctx.locate.value(eloc) if ctx.options.check else (0, 0)
        example = Example(dict(ed.args), expect, ed.name, ed.timeout, ed.safe, line, col)
        for where, message in problems(spec, example, i + 1):
            ctx.problem((*eloc, *where), spec.key, message)
        built.append(example)
    return replace(spec, examples=tuple(built))
