"""What a catalog file may be before it is parsed, and what its YAML may grow into once parsed.

- A catalog file is a regular file (a symlink to one is followed) of at most `MAX_CATALOG_BYTES`.
  Anything else named as a catalog (a FIFO, a device such as /dev/zero, a directory entry that is a
  socket, a file that is too big) is refused before a byte of it is read, so a reload can never block
  on an open() or read without end. The refusal names the file (and where a link leads), never its
  content.
- YAML aliases (`*name`) repeat a value without copying its text: nine anchors of ten aliases each
  (the "billion laughs") are 10^9 values in a few hundred bytes. `expansion_problem` counts the
  composed document with every alias expanded, in time linear in the file (each node is counted once,
  its total remembered), before anything walks the data: a document that expands past
  `expansion_limit(file size)` is refused at the value that crosses the limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import yaml

MAX_CATALOG_BYTES = 32 * 1024 * 1024  # 10,000 tools take about 5.3 MB of YAML
EXPANSION_RATIO = 10  # aliases may make a file's parsed content this many times its own size...
EXPANSION_FLOOR = 1_000_000  # ...or this many values and characters, whichever is more
_READ_CHUNK = 1024 * 1024


class NotACatalogFile(OSError):
    """A catalog path that names something a catalog cannot be; the message names it, never its content."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def link_note(path: Path) -> str:
    """' (a link to <target>)' when `path` is a symbolic link somewhere along the way, else ''."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError):
        return ""
    return f" (a link to {real})" if real != path.absolute() else ""


def read_catalog(path: Path) -> bytes:
    """The bytes of the catalog file at `path`: a regular file of at most MAX_CATALOG_BYTES, else
    NotACatalogFile (an OSError). Opening never blocks (a FIFO is refused, not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotACatalogFile(f"not a catalog file: {_kind(info.st_mode)}{link_note(path)}")
        if info.st_size > MAX_CATALOG_BYTES:
            raise NotACatalogFile(_too_big(info.st_size, path))
        chunks: list[bytes] = []
        total = 0
        while True:  # bounded even where st_size lies (/proc files say 0) or the file grows while read
            chunk = os.read(fd, min(_READ_CHUNK, MAX_CATALOG_BYTES + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > MAX_CATALOG_BYTES:
                raise NotACatalogFile(_too_big(total, path, "over "))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _too_big(size: int, path: Path, over: str = "") -> str:
    return (
        f"the file is {over}{size:,} bytes, more than the {MAX_CATALOG_BYTES:,} bytes a catalog file may have"
        f"{link_note(path)}"
    )


def expansion_limit(text_size: int) -> int:
    """How big a file of `text_size` characters may grow once its aliases are expanded."""
    return min(max(EXPANSION_RATIO * text_size, EXPANSION_FLOOR), 2 * MAX_CATALOG_BYTES)


def _children(node: yaml.Node) -> list[yaml.Node]:
    value = node.value
    if isinstance(value, str):  # a scalar
        return []
    if value and isinstance(value[0], tuple):  # a mapping: (key, value) pairs
        return [part for pair in value for part in pair]
    return list(value)


def expanded_sizes(root: yaml.Node) -> tuple[dict[int, int], yaml.Node | None]:
    """Each collection's size with every alias expanded (a scalar counts its characters + 1; a
    collection 1 + its children's sizes), by id(node); and a node found inside itself (a recursive
    alias), if any.

    Iterative and memoised: each distinct node is visited once, however often aliases repeat it;
    scalars are summed where they stand. For 10,000 tools (390,000 nodes) it costs about 5% of the parse."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, after = stack.pop()
        nid = id(node)
        if after:
            on_path.discard(nid)
            total = 1
            for kid in _children(node):
                value = kid.value
                total += len(value) + 1 if isinstance(value, str) else sizes[id(kid)]
            sizes[nid] = total
            continue
        if nid in sizes:
            continue
        if nid in on_path:
            return sizes, node
        on_path.add(nid)
        stack.append((node, True))
        stack.extend((kid, False) for kid in _children(node) if not isinstance(kid.value, str) and id(kid) not in sizes)
    return sizes, None


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    value = node.value
    return len(value) + 1 if isinstance(value, str) else sizes[id(node)]


def expansion_problem(root: yaml.Node, text_size: int) -> tuple[tuple[int, int], str] | None:
    """(line, column) and message when `root` holds a recursive alias or expands past its limit, else None."""
    sizes, loop = expanded_sizes(root)
    if loop is not None:
        return _mark(loop), "a YAML alias refers to a value that contains it: a catalog cannot hold a recursive value"
    limit = expansion_limit(text_size)
    if _size(root, sizes) <= limit:
        return None
    node = root
    while True:  # down to the first value whose own children each fit: the one that crosses the limit
        bigger = next((kid for kid in _children(node) if _size(kid, sizes) > limit), None)
        if bigger is None:
            break
        node = bigger
    return _mark(node), (
        f"YAML aliases expand this value to {_size(node, sizes):,} values and characters, more than the {limit:,} "
        f"this file may hold once its aliases are expanded ({EXPANSION_RATIO} times its size, at least "
        f"{EXPANSION_FLOOR:,}): an alias bomb?"
    )


def _mark(node: yaml.Node) -> tuple[int, int]:
    mark = node.start_mark
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
