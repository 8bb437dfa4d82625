"""Declared params: names, types, defaults, examples, enums, patterns and bounds checked."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ParamError
from ..models import Param
from ..params import compile_pattern
from .problems import _LoaderBase

if TYPE_CHECKING:
    from ..schema import ParamDef, ToolDef

# Names Jinja reads as constants or operators: a param so named could never be referenced.
RESERVED_NAMES = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else", "loop"}
)


class ParamsMixin(_LoaderBase):
    def build_params(self, tool: ToolDef, key: str, loc: tuple[Any, ...], kind: str) -> list[Param] | None:
        if tool.params is None:
            return None
        params: list[Param] = []
        seen: set[str] = set()
        for i, pd in enumerate(tool.params):
            ploc = (*loc, "params", i)
            if pd.name in seen:
                self.problem_at(self.locate.value((*ploc, "name")), key, f"parameter {pd.name!r} is declared twice")
                continue
            seen.add(pd.name)
            if kind != "fn" and pd.name in RESERVED_NAMES:
                self.problem_at(
                    self.locate.value((*ploc, "name")),
                    key,
                    f"parameter name {pd.name!r} is a template keyword; choose another name",
                )
                continue
            param = _param(pd)
            if pd.secret and pd.type != "str":
                self.problem_at(
                    self.locate.value((*ploc, "secret")),
                    key,
                    f"parameter {pd.name!r}: only a str param can be secret, not {_a(pd.type)}",
                )
            if pd.secret and kind != "fn":
                from ..render import secret_env_name

                clash = [q.name for q in params if q.secret and secret_env_name(q.name) == secret_env_name(pd.name)]
                if clash:
                    self.problem_at(
                        self.locate.value((*ploc, "name")),
                        key,
                        f"secret parameters {clash[0]!r} and {pd.name!r} would share the environment variable "
                        f"{secret_env_name(pd.name)}; rename one",
                    )
            if pd.pattern is not None:
                try:
                    compile_pattern(pd.pattern)
                except ValueError as exc:
                    self.problem_at(
                        self.locate.value((*ploc, "pattern")), key, f"parameter {pd.name!r}: bad pattern: {exc}"
                    )
                    param = replace(param, pattern=None)
            if pd.min is not None and pd.max is not None and pd.min > pd.max:
                self.problem_at(
                    self.locate.value((*ploc, "min")), key, f"parameter {pd.name!r}: min {pd.min:g} > max {pd.max:g}"
                )
            if pd.required and pd.default is not None:
                self.problem(
                    (*ploc, "default"),
                    key,
                    f"parameter {pd.name!r} is required, so its default is never used",
                    "warning",
                )
            if pd.enum is not None:
                for j, choice in enumerate(pd.enum):
                    if not _is_type(choice, pd.type):
                        self.problem_at(
                            self.locate.value((*ploc, "enum", j)),
                            key,
                            f"parameter {pd.name!r}: enum value {choice!r} is not {_a(pd.type)}",
                        )
                        break
            for what in ("default", "example"):
                value = getattr(pd, what)
                if value is None:
                    continue
                vloc = (*ploc, what)
                lenient = vloc in self.substituted  # ${VAR} text given for an int, say
                if not lenient and not _is_type(value, pd.type):
                    self.problem_at(
                        self.locate.value(vloc),
                        key,
                        f"parameter {pd.name!r}: {what} {value!r} is {_a(_type_of(value))}, not {_a(pd.type)}",
                    )
                    continue
                try:
                    from ..params import coerce

                    coerced = coerce(param, value)
                except ParamError as exc:
                    self.problem_at(self.locate.value(vloc), key, f"parameter {pd.name!r}: bad {what}: {exc}")
                    continue
                param = replace(param, **{what: coerced})
            params.append(param)
        return params


def _param(pd: ParamDef) -> Param:
    required = pd.required if pd.required is not None else pd.default is None
    return Param(
        name=pd.name,
        type=pd.type,
        required=required,
        default=pd.default,
        description=pd.description,
        example=pd.example,
        enum=tuple(pd.enum) if pd.enum is not None else None,
        pattern=pd.pattern,
        min=pd.min,
        max=pd.max,
        secret=pd.secret,
    )


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "dict"
    return type(value).__name__


def _is_type(value: Any, kind: str) -> bool:
    actual = _type_of(value)
    return actual == kind or (kind == "float" and actual == "int")


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"
