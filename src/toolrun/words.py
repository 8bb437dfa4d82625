"""Counted nouns in messages ("1 tool", "2 tools"), and a catalog's warnings as the lines a door prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # errors.py uses `plural` itself
    from .errors import Problem

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


def warning_lines(warnings: Sequence[Problem], shown: int = 20) -> list[str]:
    """The catalog's warnings, one line each (at most `shown`, then how many more and where to see them)."""
    lines = [f"catalog {p}" for p in warnings[:shown]]
    if len(warnings) > shown:
        more = len(warnings) - shown
        lines.append(f"... and {plural(more, 'more warning')} (toolrun validate-catalog lists them all)")
    if warnings:
        lines.append(
            "acknowledge a deliberate one with `allow_warnings: [<name>]` on its tool; "
            "`toolrun validate-catalog --strict` fails on any"
        )
    return lines
