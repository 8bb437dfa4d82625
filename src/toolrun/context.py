"""What a running fn tool can ask about its call: who is calling, and the session's values.

    from toolrun.context import current_identity, get_session, set_session

Within an MCP session `set_session` values persist for later calls of the same session (and
user). `POST /tools/{key}` and the CLI run identity-only: `get_session` returns the default and
what `set_session` writes lives for that one call and is never written back.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from .models import Identity


@dataclass
class CallContext:
    identity: Identity
    session: dict[str, Any] = field(default_factory=dict)
    persistent: bool = False  # True when the session values are written back after the call
    dirty: bool = False


_CURRENT: ContextVar[CallContext | None] = ContextVar("toolrun_call", default=None)


def current() -> CallContext | None:
    return _CURRENT.get()


def current_identity() -> Identity:
    ctx = _CURRENT.get()
    return ctx.identity if ctx is not None else Identity()


def get_session(name: str, default: Any = None) -> Any:
    ctx = _CURRENT.get()
    if ctx is None:
        return default
    return ctx.session.get(name, default)


def set_session(name: str, value: Any) -> None:
    ctx = _CURRENT.get()
    if ctx is None:
        return
    ctx.session[name] = value
    ctx.dirty = True


def session_available() -> bool:
    ctx = _CURRENT.get()
    return ctx is not None and ctx.persistent


def activate(ctx: CallContext) -> Any:
    return _CURRENT.set(ctx)


def deactivate(token: Any) -> None:
    _CURRENT.reset(token)
