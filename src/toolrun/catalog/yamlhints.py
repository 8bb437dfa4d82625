"""A YAML syntax error in a catalog, made useful: which tool it is in, what to do, and the rest of the file.

A command written as a plain YAML value breaks as soon as it holds YAML syntax: `exec: grep -c foo: {{ f }}`
(a `: `), `exec: {{ cmd }} --x` (a `{` first), `exec: "a" b` (a quote first), a backquote or a `%` first.
`repair` names the tool, says to quote the command (or write it as a block), and gives the file back with
that one value quoted, so the load can go on and report the file's other problems; the line numbers stay.
"""

from __future__ import annotations

import json
import re

# Fields whose value is free text (a template): quoting it as a whole is what the author meant.
_TEXT_FIELDS = ("exec", "curl", "description", "title")
_FIELD_LINE = re.compile(r"^(\s*(?:-\s+)?)(" + "|".join(_TEXT_FIELDS) + r"):[ \t]+(\S.*?)\s*$")
_NAME_LINE = re.compile(r"^\s*(?:-\s+)?name:\s*['\"]?([\w.-]+)")
_GROUP_LINE = re.compile(r"^group:\s*['\"]?([\w-]+)")
_KEY_START = re.compile(r"^\s*(?:-\s+)?")
_ITEM = re.compile(r"\s*-\s")
_TOOLS_LINE = re.compile(r"^tools:\s*(#.*)?$")


def repair(text: str, lines: tuple[int, ...], skip: tuple[int, ...] = ()) -> tuple[str, str, int] | None:
    """For an error reported at 0-based `lines` (the problem's line, then its context's): (the text with the
    offending value quoted, the hint for the message, the line quoted), or None when no text field is there
    (or it is one of the lines in `skip`, quoted already: the error is not the value's)."""
    rows = text.split("\n")
    for line in dict.fromkeys(lines):
        if not 0 <= line < len(rows) or line in skip:
            continue
        match = _FIELD_LINE.match(rows[line])
        if match is None or match.group(3)[0] in "|>":
            continue
        indent, field, value = match.groups()
        rows[line] = f"{indent}{field}: {json.dumps(value, ensure_ascii=False)}"
        hint = (
            f"; the `{field}:` value holds YAML syntax (`: `, `#`, or first a `{{`, `[`, quote or backquote): quote it "
            f"(`{field}: '...'`, doubling any ' inside) or write it as a block (`{field}: |`, then the text on the "
            "next line, indented)"
        )
        return "\n".join(rows), hint, line
    return None


def _key_column(row: str) -> int:
    """Where a row's key starts (after its indentation and any `- `)."""
    return len(row) - len(_KEY_START.sub("", row, count=1))


def tool_at(text: str, line: int) -> str:
    """The key (or name) of the tool whose definition holds 0-based `line`, read from the text itself
    (the YAML does not parse): the `name:` of the item of the `tools:` list that holds the line."""
    rows = text.split("\n")
    top = next((i for i, row in enumerate(rows) if _TOOLS_LINE.match(row)), None)
    if top is None or not top < line < len(rows):
        return ""
    first = next((row for row in rows[top + 1 :] if row.strip() and not row.lstrip().startswith("#")), "")
    column = _key_column(first)  # where the keys of a tool start
    start = line
    while start > top and not (_ITEM.match(rows[start]) and _key_column(rows[start]) == column):
        start -= 1
    group = next((m.group(1) for row in rows if (m := _GROUP_LINE.match(row))), None)
    for i in range(start, len(rows)):
        row = rows[i]
        if i > start and row.strip() and len(row) - len(row.lstrip()) < column:
            break  # the next tool, or the end of the list
        match = _NAME_LINE.match(row)
        if match and _key_column(row) == column:
            return f"{group}.{match.group(1)}" if group else match.group(1)
    return ""
