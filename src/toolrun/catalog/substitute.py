"""`${VAR}` and `${VAR:-default}` in catalog values (`$${VAR}` stays verbatim)."""

from __future__ import annotations

import json
import re
from typing import Any

from .problems import _LoaderBase

ENV_REF = re.compile(r"\$(\$?)\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
TEMPLATE_FIELDS = ("exec", "curl")


class SubstituteMixin(_LoaderBase):
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
