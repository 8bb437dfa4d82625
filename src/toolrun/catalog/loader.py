"""One catalog file, start to end: read, parse, substitute, validate, build."""

from __future__ import annotations

import difflib
from typing import Any

from ..models import ToolSpec
from .build import BuildMixin
from .parse import ParseMixin
from .positions import _Locator
from .source import NotACatalogFile, link_note, read_catalog
from .substitute import SubstituteMixin

CATALOG_FIELDS = frozenset({"$schema", "version", "group", "defaults", "tools"})  # schema.CatalogFile's


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

    def is_catalog(self, data: Any) -> bool:
        """Whether `data` is a catalog's top-level mapping; if not, its one error is reported."""
        if not isinstance(data, dict):
            what = f"a catalog file is a mapping with `tools:`, not a {type(data).__name__}"
            self.problem_at((1, 1), "", what + link_note(self.path))
            return False
        if "tools" not in data and not data.keys() <= CATALOG_FIELDS:
            self.not_a_catalog(data)
            return False
        return True

    def not_a_catalog(self, data: dict[Any, Any]) -> None:
        """A mapping with neither `tools:` nor only catalog fields: some other file (a password file, a
        config) was named as a catalog. One error naming the file; none of its content is quoted."""
        for name in data:
            if isinstance(name, str) and difflib.get_close_matches(name, ["tools"], n=1, cutoff=0.75):
                where = self.locate.key((name,))
                self.problem_at(where, "", "no `tools:` list; this top-level field is not one: is `tools:` misspelled?")
                return
        self.problem_at(
            (1, 1),
            "",
            f"not a catalog file{link_note(self.path)}: a catalog is a mapping with `tools:`, and this one has "
            "other top-level fields (its content is not shown)",
        )
