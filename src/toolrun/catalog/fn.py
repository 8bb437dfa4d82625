"""fn tools: import the function, read its signature into params, track its source files."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import sys
import types
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import Param
from ..paramtypes import ANNOTATION_TYPES, PARAM_TYPES, TYPES, type_of

if TYPE_CHECKING:
    from .loadcontext import LoadContext


def inspect_fn(
    ctx: LoadContext, target: str, key: str, loc: tuple[Any, ...], declared: list[Param] | None
) -> tuple[list[Param], str, str] | None:
    """(params, return type, docstring) of the fn `module:function`: its declared params checked against
    its signature, or (none declared) params read from the signature. None after a problem."""
    fn = _import_fn(ctx, target, key, loc)
    if fn is None:
        return None
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return declared or [], "unknown", inspect.getdoc(fn) or ""
    hints = _type_hints(fn)
    doc = inspect.getdoc(fn) or ""
    return_type = _annotation_text(hints.get("return", sig.return_annotation))
    named = {
        p.name: p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)
    }
    if declared is not None:
        accepts_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        ok = _declared_fit(ctx, target, key, loc, declared, named, accepts_any)
        return (declared, return_type, doc) if ok else None
    params = _params_of(ctx, target, key, loc, named, hints)
    return None if params is None else (params, return_type, doc)


def _import_fn(ctx: LoadContext, target: str, key: str, loc: tuple[Any, ...]) -> Any:
    """The callable `target` names (its source files tracked), or None after a problem."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        ctx.problem_at(ctx.locate.value(loc), key, f"fn {target!r} must be of the form module:function")
        return None
    try:
        fn = resolve_fn(target, ctx.path.parent)
    except Exception as exc:
        ctx.problem_at(ctx.locate.value(loc), key, f"fn {target!r} does not import: {type(exc).__name__}: {exc}")
        return None
    if not callable(fn):
        ctx.problem_at(ctx.locate.value(loc), key, f"fn {target!r} is not callable")
        return None
    track_sources(ctx, module_name, fn)
    return fn


def _declared_fit(
    ctx: LoadContext,
    target: str,
    key: str,
    loc: tuple[Any, ...],
    declared: list[Param],
    named: dict[str, inspect.Parameter],
    accepts_any: bool,
) -> bool:
    """Whether the function takes every declared param and declares every one it requires (problems if not)."""
    ok = True
    names = {p.name for p in declared}
    for dp in declared:
        if dp.name not in named and not accepts_any:
            ctx.problem_at(ctx.locate.value(loc), key, f"fn {target!r} has no parameter {dp.name!r}")
            ok = False
    for name, p in named.items():
        if p.default is inspect.Parameter.empty and name not in names:
            ctx.problem_at(
                ctx.locate.value(loc), key, f"fn {target!r} requires {name!r}, which is not a declared param"
            )
            ok = False
    return ok


def _params_of(
    ctx: LoadContext,
    target: str,
    key: str,
    loc: tuple[Any, ...],
    named: dict[str, inspect.Parameter],
    hints: dict[str, Any],
) -> list[Param] | None:
    """Params read from the signature: each parameter's annotation (else its default's type) gives its type."""
    params: list[Param] = []
    for p in named.values():
        required = p.default is inspect.Parameter.empty
        ptype = _annotation_type(hints.get(p.name, p.annotation))
        if ptype is None and not required:
            ptype = type_of(p.default) if type_of(p.default) in TYPES else None
        if ptype is None:
            ctx.problem_at(
                ctx.locate.value(loc),
                key,
                f"fn parameter {p.name!r} has no {'/'.join(PARAM_TYPES)} annotation: annotate it or declare `params:`",
            )
            return None
        default = None if required else _json_safe(p.default)
        params.append(Param(p.name, ptype, required, default, "", None))
    return params


def track_sources(ctx: LoadContext, module_name: str, fn: Any) -> None:
    """Record the files an fn's signature comes from in `ctx.extra_files`, so the cache notices when they
    change; one that is no readable .py file makes the file uncacheable (`ctx.cacheable`)."""
    files = {getattr(sys.modules.get(module_name), "__file__", None)}
    try:
        files.add(inspect.getsourcefile(fn))
    except TypeError:  # a builtin or C function
        files.add(None)
    for name in files:
        path = Path(name) if name else None
        if path is None or path.suffix != ".py" or not path.is_file():
            ctx.cacheable = False
            continue
        ctx.extra_files[str(path.resolve())] = hashlib.sha256(path.read_bytes()).hexdigest()


def _json_safe(value: Any) -> Any:
    if isinstance(value, tuple):
        value = list(value)
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return None
    return value


def _type_hints(fn: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return {}


def _annotation_type(annotation: Any) -> str | None:
    """The param type of an annotation: str/int/float/bool, list[...] and dict[...] (Optional allowed)."""
    if annotation is inspect.Parameter.empty:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _annotation_type(members[0]) if len(members) == 1 else None
    if origin is typing.Literal:
        kinds = {type_of(v) for v in typing.get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 and kinds <= TYPES.keys() else None
    target = origin if origin is not None else annotation
    if isinstance(target, str):  # an annotation that could not be evaluated
        text = target.split("[", 1)[0].split("|", 1)[0].strip().removeprefix("typing.")
        return ANNOTATION_TYPES.get(text.lower())
    name = getattr(target, "__name__", "")
    return ANNOTATION_TYPES.get(name.lower()) if name else None


def _annotation_text(annotation: Any) -> str:
    if annotation is inspect.Signature.empty:
        return "unknown"
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def resolve_fn(target: str, base_dir: Path | None = None) -> Any:
    """Import `module:function` (the catalog's directory is searched first)."""
    module_name, _, attr = target.partition(":")
    if base_dir is not None:
        base = str(base_dir.resolve())
        if base not in sys.path:
            sys.path.insert(0, base)
    module = importlib.import_module(module_name)
    _remember_code(module_name, module)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


# module name -> (the module object, sha256 of its file when this process first imported it): the code an fn
# tool runs in this process, which a job's digest binds (jobrecord.digest). A module is imported once per process,
# so a file edited later runs only after a restart (or in another worker), where its hash differs.
_CODE: dict[str, tuple[Any, str]] = {}


def _remember_code(module_name: str, module: Any) -> None:
    known = _CODE.get(module_name)
    if known is not None and known[0] is module:
        return
    name = getattr(module, "__file__", None)
    try:
        code = hashlib.sha256(Path(name).read_bytes()).hexdigest() if name else "no source file"
    except OSError as exc:
        code = f"unreadable: {type(exc).__name__}"
    _CODE[module_name] = (module, code)


def fn_code(target: str, file: str) -> str:
    """What an fn tool `target` (module:function, from catalog `file`) runs in this process: the sha256 of its
    module's file as this process imported it. One that does not import is named so (its digest never matches)."""
    module_name = target.partition(":")[0]
    known = _CODE.get(module_name)
    if known is None or sys.modules.get(module_name) is not known[0]:
        try:
            resolve_fn(target, Path(file).parent if file else None)
        except Exception as exc:
            return f"does not import: {type(exc).__name__}"
        known = _CODE.get(module_name)
    return known[1] if known is not None else "unknown"
