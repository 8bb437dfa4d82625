"""Help text whose placeholders read as words: `KEY [ARGS]...`, `--catalog FILE`, `--port INTEGER`
(a patch of Typer internals).

Typer 0.29 writes a parameter's type in help as a Python annotation (`--catalog <list[str]>`, `key <str>`)
and a required argument in braces (`{key}`); click's words (`TEXT`, `INTEGER`, an argument's name in capitals)
are what a terminal user expects. It relies on private Typer APIs, so pyproject.toml bounds typer to the
minor version it was written against, and `help_misfit` names what does not fit on any other:
tests/test_dependency_patches.py fails with this patch's name on a Typer whose internals moved, and at run
time the patch is then left out (the help is only uglier, never wrong).
"""

from __future__ import annotations

import inspect
from typing import Any, get_args, get_origin

PATCH = (
    "toolrun.cli.helpwords (help placeholders as words: replaces typer.core._TyperParameter.display_type and "
    "TyperArgument's display_type_rich, _rich_display_name and _usage_display_name)"
)
_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "NUMBER", "bool": "BOOLEAN"}
_METHODS = (
    ("_TyperParameter", "display_type", ["self", "ctx"]),
    ("TyperArgument", "display_type_rich", ["self", "ctx"]),
    ("TyperArgument", "_rich_display_name", ["self"]),
    ("TyperArgument", "_usage_display_name", ["self"]),
)


def help_misfit() -> str | None:
    """What the installed Typer lacks that the patch relies on (naming the patch), or None when it fits."""
    try:
        import typer
        from typer import core as typer_core
    except ImportError as exc:  # pragma: no cover - no Typer at all
        return f"{PATCH} does not fit this Typer: {exc}"
    problems = []
    for owner, name, params in _METHODS:
        method = getattr(getattr(typer_core, owner, None), name, None)
        if not callable(method):
            problems.append(f"typer.core.{owner}.{name} is gone")
        elif list(inspect.signature(method).parameters) != params:
            problems.append(f"typer.core.{owner}.{name}({', '.join(params)}) changed")
    if problems:
        return f"{PATCH} does not fit typer {getattr(typer, '__version__', '?')}: " + "; ".join(problems)
    return None


def type_word(annotation: Any) -> str:
    """The placeholder of a type: `TEXT`, `INTEGER`, `NUMBER`, `BOOLEAN`; a list's item word."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) is list and args:
        return type_word(args[0])
    if args and get_origin(annotation) is not list:  # X | None
        return type_word(args[0])
    name = getattr(annotation, "__name__", str(annotation))
    return _WORDS.get(name, name.upper())


def install_help_words() -> None:
    if help_misfit() is not None:
        return
    from typer import core as typer_core

    def display_type(self: Any, ctx: Any) -> str:
        if self.metavar is not None:
            return str(self.metavar)
        desc = self.type_descriptor
        if desc.is_choice and desc.choices is not None:
            return "[" + "|".join(str(getattr(c, "value", c)) for c in desc.choices) + "]"
        return type_word(desc.annotation)

    def argument_type(self: Any, ctx: Any) -> None:
        return None  # the name column already says what the argument is

    def argument_name(self: Any) -> str:
        name = str(self.metavar or self.name or "").upper()
        return name + ("..." if self.nargs != 1 else "")

    def argument_usage(self: Any) -> str:
        name = str(self.metavar or self.name or "").upper()
        shown = name if self.required else f"[{name}]"
        return shown + ("..." if self.nargs != 1 else "")

    setattr(typer_core._TyperParameter, "display_type", display_type)  # noqa: B010
    setattr(typer_core.TyperArgument, "display_type_rich", argument_type)  # noqa: B010
    setattr(typer_core.TyperArgument, "_rich_display_name", argument_name)  # noqa: B010
    setattr(typer_core.TyperArgument, "_usage_display_name", argument_usage)  # noqa: B010
