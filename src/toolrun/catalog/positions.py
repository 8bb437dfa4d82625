"""Where a field is written: a data path ('tools', 3, 'exec') -> line and column.

The node tree is composed only when a problem needs a position, so a clean load pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import yaml


class Locator:
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
