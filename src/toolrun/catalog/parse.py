"""YAML text -> data (libyaml), with duplicate keys found and reported."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from .positions import _Locator
from .problems import _LoaderBase
from .yamlhints import repair, tool_at

if TYPE_CHECKING:
    import yaml


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


class ParseMixin(_LoaderBase):
    def parse(self, text: str, repaired: tuple[int, ...] = ()) -> tuple[bool, Any]:
        """The file's data; after a syntax error in a command (a value `yamlhints.repair` can quote), the
        data of the file with that value quoted, so that its other problems are found too."""
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
            message = f"YAML syntax error: {what}" + (f" ({context})" if context else "")
            lines = (pos[0] - 1, *((cmark.line,) if cmark is not None else ()))
            fixed = repair(text, lines, skip=repaired) if len(repaired) < 20 else None
            key = tool_at(text, fixed[2] if fixed else pos[0] - 1)
            self.problem_at(pos, key, message + (fixed[1] if fixed else ""))
            if fixed is None:
                return False, None
            self.locate = _Locator(fixed[0])  # the same lines: positions of later problems hold
            return self.parse(fixed[0], (*repaired, fixed[2]))
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
