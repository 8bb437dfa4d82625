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
from typing import Any

from ..models import PARAM_TYPES, Param
from .paramdefs import _type_of
from .problems import _LoaderBase


class FnMixin(_LoaderBase):
    def inspect_fn(
        self, target: str, key: str, loc: tuple[Any, ...], declared: list[Param] | None
    ) -> tuple[list[Param], str, str] | None:
        module_name, sep, attr = target.partition(":")
        if not sep or not module_name or not attr:
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} must be of the form module:function")
            return None
        try:
            fn = resolve_fn(target, self.path.parent)
        except Exception as exc:
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} does not import: {type(exc).__name__}: {exc}")
            return None
        if not callable(fn):
            self.problem_at(self.locate.value(loc), key, f"fn {target!r} is not callable")
            return None
        self.track_sources(module_name, fn)
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            return declared or [], "unknown", inspect.getdoc(fn) or ""
        hints = _type_hints(fn)
        doc = inspect.getdoc(fn) or ""
        return_type = _annotation_text(hints.get("return", sig.return_annotation))
        accepts_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
        named = {
            p.name: p
            for p in sig.parameters.values()
            if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY)
        }
        if declared is not None:
            ok = True
            names = {p.name for p in declared}
            for dp in declared:
                if dp.name not in named and not accepts_any:
                    self.problem_at(self.locate.value(loc), key, f"fn {target!r} has no parameter {dp.name!r}")
                    ok = False
            for name, p in named.items():
                if p.default is inspect.Parameter.empty and name not in names:
                    self.problem_at(
                        self.locate.value(loc), key, f"fn {target!r} requires {name!r}, which is not a declared param"
                    )
                    ok = False
            return (declared, return_type, doc) if ok else None
        params: list[Param] = []
        for p in named.values():
            required = p.default is inspect.Parameter.empty
            ptype = _annotation_type(hints.get(p.name, p.annotation))
            if ptype is None and not required:
                ptype = _type_of(p.default) if _type_of(p.default) in PARAM_TYPES else None
            if ptype is None:
                self.problem_at(
                    self.locate.value(loc),
                    key,
                    f"fn parameter {p.name!r} has no str/int/float/bool/list/dict annotation: annotate it or "
                    "declare `params:`",
                )
                return None
            default = None if required else _json_safe(p.default)
            params.append(Param(p.name, ptype, required, default, "", None))
        return params, return_type, doc

    def track_sources(self, module_name: str, fn: Any) -> None:
        """Record the files an fn's signature comes from, so the cache notices when they change."""
        files = {getattr(sys.modules.get(module_name), "__file__", None)}
        try:
            files.add(inspect.getsourcefile(fn))
        except TypeError:  # a builtin or C function
            files.add(None)
        for name in files:
            path = Path(name) if name else None
            if path is None or path.suffix != ".py" or not path.is_file():
                self.cacheable = False
                continue
            self.extra_files[str(path.resolve())] = hashlib.sha256(path.read_bytes()).hexdigest()


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


_ANNOTATIONS = {
    "str": "str",
    "int": "int",
    "float": "float",
    "bool": "bool",
    "list": "list",
    "tuple": "list",
    "set": "list",
    "sequence": "list",
    "dict": "dict",
    "mapping": "dict",
}


def _annotation_type(annotation: Any) -> str | None:
    """The param type of an annotation: str/int/float/bool, list[...] and dict[...] (Optional allowed)."""
    if annotation is inspect.Parameter.empty:
        return None
    origin = typing.get_origin(annotation)
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _annotation_type(members[0]) if len(members) == 1 else None
    if origin is typing.Literal:
        kinds = {_type_of(v) for v in typing.get_args(annotation)}
        return kinds.pop() if len(kinds) == 1 else None
    target = origin if origin is not None else annotation
    if isinstance(target, str):  # an annotation that could not be evaluated
        text = target.split("[", 1)[0].split("|", 1)[0].strip().removeprefix("typing.")
        return _ANNOTATIONS.get(text.lower())
    name = getattr(target, "__name__", "")
    return _ANNOTATIONS.get(name.lower()) if name else None


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
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
