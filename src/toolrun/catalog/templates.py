"""Template lint: syntax, undeclared and unused variables, values interpolated without `| quote`."""

from __future__ import annotations

import difflib
import re
from typing import Any

from .. import render
from ..models import Param
from .problems import _LoaderBase

_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


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


class TemplateMixin(_LoaderBase):
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
