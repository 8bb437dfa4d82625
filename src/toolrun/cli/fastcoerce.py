"""Typer option coercion without pydantic (a patch of Typer internals).

It relies on private Typer APIs, so pyproject.toml bounds typer to the minor version it was written
against, and `typer_misfit` names what does not fit on any other: tests/test_dependency_patches.py
fails with this patch's name on a Typer whose internals moved, and at run time the patch is then
left out (Typer's own coercion is only slower, never wrong).
"""

from __future__ import annotations

import dataclasses
import inspect
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from .. import speedups

PATCH = "toolrun.cli.fastcoerce (fast option coercion: replaces typer.core._TyperParameter.get_runtime_param)"


def typer_misfit() -> str | None:
    """What the installed Typer lacks that the patch relies on (naming the patch), or None when it fits.

    Cheap (it runs on every `toolrun` start): names and signatures only. The attributes the patched
    method reads (`_runtime_param`, `type_descriptor`) are checked by the test that runs the patch."""
    try:
        import typer
        from typer import core as typer_core
        from typer._click.exceptions import BadParameter  # noqa: F401
        from typer._coercion import RuntimeParam
    except ImportError as exc:
        return f"{PATCH} does not fit this Typer: {exc}"
    version = getattr(typer, "__version__", "?")
    problems = []
    hook = getattr(getattr(typer_core, "_TyperParameter", None), "get_runtime_param", None)
    if not callable(hook):
        problems.append("typer.core._TyperParameter.get_runtime_param is gone")
    runtime: Any = RuntimeParam  # whatever this Typer has under that name
    if not dataclasses.is_dataclass(runtime):
        problems.append("typer._coercion.RuntimeParam is not a dataclass")
    else:
        names = [f.name for f in dataclasses.fields(runtime)]
        if names[:2] != ["parameter_info", "annotation"]:
            problems.append(f"RuntimeParam's fields are {names}, not parameter_info, annotation")
    coerce = getattr(runtime, "_coerce_value", None)
    if coerce is None or list(inspect.signature(coerce).parameters) != ["self", "value", "param", "ctx"]:
        problems.append("RuntimeParam._coerce_value(self, value, param, ctx) is gone or changed")
    if problems:
        return f"{PATCH} does not fit typer {version}: " + "; ".join(problems)
    return None


def install_fast_coercion() -> None:
    """Coerce plain str/int/float/bool/list[str] options without pydantic.

    Typer 0.29 builds a pydantic TypeAdapter for every non-flag parameter, which imports pydantic
    and costs ~70-120 ms per command; our options are all plain scalars or lists of strings, so a
    tiny coercion does the same job. Any other annotation (or a Typer without this hook) falls
    back to Typer's own machinery, so a Typer upgrade can only make us slower, never wrong.
    """
    if not speedups.on("cli_coercion") or typer_misfit() is not None:
        return
    try:
        from typer import core as typer_core
        from typer._click.exceptions import BadParameter
        from typer._coercion import RuntimeParam
    except Exception:  # pragma: no cover - a Typer without these internals
        return
    original = getattr(typer_core._TyperParameter, "get_runtime_param", None)
    if original is None:  # pragma: no cover
        return
    fast_param = _fast_param_class(RuntimeParam, BadParameter)

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            desc = self.type_descriptor
            info = desc.parameter_info
            found = _plain_kind(desc.annotation)
            plain = getattr(info, "min", None) is None and getattr(info, "max", None) is None
            if found is not None and plain and not desc.is_choice and not desc.is_file and not desc.is_path:
                self._runtime_param = fast_param(
                    parameter_info=info, annotation=desc.annotation, kind=found[0], many=found[1]
                )
        return original(self)

    setattr(typer_core._TyperParameter, "get_runtime_param", get_runtime_param)  # noqa: B010


def _plain_kind(annotation: Any) -> tuple[type, bool] | None:
    """(the scalar type, whether a list of it) of an option this patch coerces; None for any other."""
    if get_origin(annotation) in (Union, UnionType):
        args = [a for a in get_args(annotation) if a is not NoneType]
        if len(args) != 1:
            return None
        annotation = args[0]
    if annotation in (str, int, float, bool):
        return annotation, False
    if get_origin(annotation) is list and get_args(annotation) == (str,):
        return str, True
    return None


def _fast_param_class(runtime_param: Any, bad_parameter: Any) -> Any:
    """Typer's RuntimeParam with a coercion of plain values: the words tool params and settings accept for a bool,
    the type itself for the others, and Typer's own error for a value that is not one."""
    from ..paramtypes import parse_bool

    @dataclasses.dataclass(frozen=True)
    class FastParam(runtime_param):  # type: ignore[misc]
        kind: type = str
        many: bool = False

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.many:
                return [str(v) for v in value]
            if isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool)):
                return value
            if self.kind is bool:
                word = parse_bool(str(value))
                if word is not None:
                    return word
            else:
                try:
                    return self.kind(value)
                except (TypeError, ValueError):
                    pass
            raise bad_parameter(f"{value!r} is not a valid {self.kind.__name__}.", ctx=ctx, param=param)

    return FastParam
