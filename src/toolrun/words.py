"""Counted nouns in messages ("1 tool", "2 tools") and durations ("30 seconds")."""

from __future__ import annotations

# Nouns whose plural is not the word plus "s".
_IRREGULAR = {"match": "matches", "entry": "entries", "process": "processes", "is": "are", "was": "were"}


def plural(count: int, noun: str, many: str | None = None) -> str:
    """`1 tool`, `0 tools`, `2 tools` (`many`: the plural when it is not `noun` + s)."""
    if count == 1:
        return f"{count} {noun}"
    if many is None:
        head, _, last = noun.rpartition(" ")  # `tool process` -> `tool processes`
        many = f"{head} {_IRREGULAR.get(last, last + 's')}" if head else _IRREGULAR.get(noun, noun + "s")
    return f"{count} {many}"


def seconds(value: float) -> str:
    """`1 second`, `0.2 seconds`, `30 seconds`."""
    return f"{value:g} second" + ("" if value == 1 else "s")
