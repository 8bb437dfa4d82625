"""Declared params: names, types, defaults, examples, enums, patterns and bounds checked.

What each type allows (which types a `default`, `example` or `enum` entry may have, whether it may be
secret) is read from the type's row of the `paramtypes` table; a `default` or `example` must also
pass the call-time coercion and constraints (params.coerce).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import ParamError
from ..models import Param
from ..params import coerce, compile_pattern
from ..paramtypes import TYPES, type_of

if TYPE_CHECKING:
    from .loadcontext import LoadContext
    from .schema import ParamDef, ToolDef

# Names Jinja reads as constants or operators: a param so named could never be referenced.
RESERVED_NAMES = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else", "loop"}
)

SECRET_TYPES = tuple(t.name for t in TYPES.values() if t.secret)


def build_params(ctx: LoadContext, tool: ToolDef, key: str, loc: tuple[Any, ...], kind: str) -> list[Param] | None:
    """The tool's declared params (None: it declares none), each checked; a param whose name cannot be
    used is left out, one with another problem is kept (its problems are errors of the tool)."""
    if tool.params is None:
        return None
    params: list[Param] = []
    seen: set[str] = set()
    for i, pd in enumerate(tool.params):
        ploc = (*loc, "params", i)
        if not _usable_name(ctx, pd, seen, key, ploc, kind):
            continue
        seen.add(pd.name)
        param = _param(pd)
        _check_secret(ctx, pd, params, key, ploc, kind)
        param = _check_constraints(ctx, pd, param, key, ploc)
        for what in ("default", "example"):
            param = _check_value(ctx, pd, param, what, key, ploc)
        params.append(param)
    return params


def _usable_name(ctx: LoadContext, pd: ParamDef, seen: set[str], key: str, ploc: tuple[Any, ...], kind: str) -> bool:
    if pd.name in seen:
        ctx.problem_at(ctx.locate.value((*ploc, "name")), key, f"parameter {pd.name!r} is declared twice")
        return False
    if kind != "fn" and pd.name in RESERVED_NAMES:
        ctx.problem_at(
            ctx.locate.value((*ploc, "name")),
            key,
            f"parameter name {pd.name!r} is a template keyword; choose another name",
        )
        return False
    return True


def _check_secret(
    ctx: LoadContext, pd: ParamDef, before: list[Param], key: str, ploc: tuple[Any, ...], kind: str
) -> None:
    """A secret param: of a type that may be secret, and (for a command) with an environment variable of its own."""
    if not pd.secret:
        return
    if not TYPES[pd.type].secret:
        ctx.problem_at(
            ctx.locate.value((*ploc, "secret")),
            key,
            f"parameter {pd.name!r}: only a {' or '.join(SECRET_TYPES)} param can be secret, not {_a(pd.type)}",
        )
    if kind == "fn":
        return
    from ..exec.render import secret_env_name

    clash = [q.name for q in before if q.secret and secret_env_name(q.name) == secret_env_name(pd.name)]
    if clash:
        ctx.problem_at(
            ctx.locate.value((*ploc, "name")),
            key,
            f"secret parameters {clash[0]!r} and {pd.name!r} would share the environment variable "
            f"{secret_env_name(pd.name)}; rename one",
        )


def _check_constraints(ctx: LoadContext, pd: ParamDef, param: Param, key: str, ploc: tuple[Any, ...]) -> Param:
    """The pattern compiles (else it is dropped), min is not above max, the enum entries are of the type;
    a default on a required param is a warning."""
    if pd.pattern is not None:
        try:
            compile_pattern(pd.pattern)
        except ValueError as exc:
            ctx.problem_at(ctx.locate.value((*ploc, "pattern")), key, f"parameter {pd.name!r}: bad pattern: {exc}")
            param = replace(param, pattern=None)
    if pd.min is not None and pd.max is not None and pd.min > pd.max:
        ctx.problem_at(ctx.locate.value((*ploc, "min")), key, f"parameter {pd.name!r}: min {pd.min:g} > max {pd.max:g}")
    if pd.required and pd.default is not None:
        ctx.problem(
            (*ploc, "default"), key, f"parameter {pd.name!r} is required, so its default is never used", "warning"
        )
    if pd.enum is not None:
        kind = TYPES[pd.type]
        for j, choice in enumerate(pd.enum):
            if not kind.holds(choice):
                ctx.problem_at(
                    ctx.locate.value((*ploc, "enum", j)),
                    key,
                    f"parameter {pd.name!r}: enum value {choice!r} is not {_a(pd.type)}",
                )
                break
    return param


def _check_value(ctx: LoadContext, pd: ParamDef, param: Param, what: str, key: str, ploc: tuple[Any, ...]) -> Param:
    """`param` with its `default` or `example` (`what`) coerced as a call would; a problem when it is not
    of the type as written (unless `${VAR}` made it: then text may stand for a number) or the call would refuse it."""
    value = getattr(pd, what)
    if value is None:
        return param
    vloc = (*ploc, what)
    lenient = vloc in ctx.substituted  # ${VAR} text given for an int, say
    if not lenient and not TYPES[pd.type].holds(value):
        ctx.problem_at(
            ctx.locate.value(vloc),
            key,
            f"parameter {pd.name!r}: {what} {value!r} is {_a(type_of(value))}, not {_a(pd.type)}",
        )
        return param
    try:
        coerced = coerce(param, value)
    except ParamError as exc:
        ctx.problem_at(ctx.locate.value(vloc), key, f"parameter {pd.name!r}: bad {what}: {exc}")
        return param
    return replace(param, **{what: coerced})


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


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"
