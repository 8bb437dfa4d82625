"""One catalog file, start to end: read, parse, substitute, validate, build."""

from __future__ import annotations

from typing import Any

from ..models import ToolSpec
from .build import BuildMixin
from .parse import ParseMixin
from .positions import _Locator
from .source import NotACatalogFile, read_catalog
from .substitute import SubstituteMixin


class _FileLoader(BuildMixin, SubstituteMixin, ParseMixin):
    """Each job lives in its own mixin module; this class runs them in order."""

    def load(self) -> list[ToolSpec]:
        from pydantic import ValidationError

        from ..schema import CatalogFile, ToolDef

        try:
            raw = read_catalog(self.path)
        except NotACatalogFile as exc:
            self.problem_at((1, 1), "", str(exc))
            return []
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
        if not self.is_catalog(data):
            return []
        tools_raw = data.get("tools")
        header = self.substitute_tree({k: v for k, v in data.items() if k != "tools"}, (), "")
        try:
            head = CatalogFile.model_validate(header)
        except ValidationError as exc:
            self.report(exc, (), "", CatalogFile, header)
            return []
        self.declare_profiles(head)
        if tools_raw is None and head.sandboxes:
            return []  # a file of sandbox profiles only
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
            since = len(self.problems)
            item = self.substitute_tool(item, loc, key)
            try:
                tool = ToolDef.model_validate(item)
            except ValidationError as exc:
                self.report(exc, loc, key, ToolDef, item)
                continue
            spec = self.build(tool, head, loc)
            self.acknowledge(tool.allow_warnings, since, loc, key)
            if spec is not None and self.errors() == before:
                specs.append(spec)
        return specs

    def is_catalog(self, data: Any) -> bool:
        """Whether `data` is a mapping (the root was checked on its nodes: a tagged one, `!!set`, is not)."""
        if isinstance(data, dict):
            return True
        self.problem_at((1, 1), "", f"a catalog file is a mapping with `tools:`, not a {type(data).__name__}")
        return False
