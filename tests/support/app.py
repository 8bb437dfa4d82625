"""The in-process app of the HTTP tests: a catalog, its fn module and an app factory.

The catalog has public tools (group `pub`), one tool for group `ops` and one for `finance`, so
scoping shows in every listing. `with servers(tmp_path) as make:` gives a factory: `make(flags)`
builds the app exactly as `toolrun serve` does (`build_app(settings, [catalog])`) and hands back a
started TestClient plus the ServerParts behind it (`server.parts`; `server.key(...)` mints API keys in its store).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from starlette.testclient import TestClient

from toolrun.server.parts import ServerParts
from toolrun.server.run import build_app
from toolrun.settings import Settings

from .catalogs import write_catalog

BASE_URL = "http://127.0.0.1"
FNS_MODULE = "toolrun_http_test_fns"

CATALOG = """\
version: 1
group: pub
tools:
  - name: echo
    public: true
    description: Print a message back.
    exec: printf '%s' {{ msg | quote }}
    params:
      - name: msg
        type: str
        example: hi
  - name: noargs
    public: true
    description: Takes nothing, says ok.
    exec: printf ok
  - name: fail
    public: true
    description: Writes to both streams and exits 3.
    exec: printf out; printf err >&2; exit 3
  - name: count
    public: true
    description: Echo an integer.
    exec: printf '%s' {{ n }}
    params:
      - name: n
        type: int
  - name: boom
    public: true
    description: An fn tool that raises.
    fn: toolrun_http_test_fns:boom
  - name: hold
    public: true
    description: An fn tool that waits for the test to release it.
    fn: toolrun_http_test_fns:hold
  - name: remember
    public: true
    description: Returns the session value it saw, then sets a new one.
    fn: toolrun_http_test_fns:remember
  - name: restart
    group: ops
    description: Restart a service (ops only).
    exec: printf 'restarted %s' {{ service | quote }}
    params:
      - name: service
        type: str
  - name: payroll
    group: finance
    description: Run the payroll (finance only).
    exec: printf paid
"""

FNS = '''\
"""fn tools of the HTTP tests."""

import asyncio

STARTED: "asyncio.Event | None" = None
RELEASE: "asyncio.Event | None" = None


def boom() -> str:
    raise ValueError("kaput")


def remember(value: str) -> str:
    from toolrun.context import get_session, session_available, set_session

    seen = get_session("value", "unset")
    set_session("value", value)
    return f"{seen}|{session_available()}"


async def hold() -> str:
    assert STARTED is not None and RELEASE is not None
    STARTED.set()
    await RELEASE.wait()
    return "released"
'''

ALL_KEYS = [
    "finance.payroll",
    "ops.restart",
    "pub.boom",
    "pub.count",
    "pub.echo",
    "pub.fail",
    "pub.hold",
    "pub.noargs",
    "pub.remember",
]
PUBLIC_KEYS = [k for k in ALL_KEYS if k.startswith("pub.")]
OPS_KEYS = sorted([*PUBLIC_KEYS, "ops.restart"])


def write_test_catalog(directory: Path, text: str = CATALOG) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{FNS_MODULE}.py").write_text(FNS, encoding="utf-8")
    return write_catalog(directory, text)


def fns() -> ModuleType:
    """The fn module as the server imported it (loaded with the catalog)."""
    return sys.modules[FNS_MODULE]


def load_settings(home: Path, flags: Mapping[str, Any] | None = None) -> Settings:
    # The test extra installs toolrun[semantic]: lexical search (no model process) unless a test asks
    environ = {"TOOLRUN_HOME": str(home), "SVC_SEARCH_SEMANTIC": "false"}
    return Settings.load(flags=dict(flags or {}), environ=environ)


@dataclass
class Server:
    client: TestClient
    app: Any
    parts: ServerParts

    def key(self, username: str, groups: list[str] | None = None, **kwargs: Any) -> str:
        key, _ = self.parts.access.create_key(username, groups or [], **kwargs)
        return key


def build(tmp_path: Path, flags: Mapping[str, Any] | None = None) -> tuple[Any, ServerParts]:
    """The guarded ASGI app of `toolrun serve` and its ServerParts."""
    catalog = write_test_catalog(tmp_path / "catalog")
    settings = load_settings(tmp_path / "toolrun-home", flags)
    app = build_app(settings, [str(catalog)])
    return app, app.app.state.parts


@contextmanager
def servers(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """A factory of started in-process servers, all closed at the end: `make({"debug": True})`."""
    with ExitStack() as stack:

        def make(flags: Mapping[str, Any] | None = None) -> Server:
            app, parts = build(tmp_path, flags)
            client = stack.enter_context(TestClient(app, base_url=BASE_URL))
            return Server(client, app, parts)

        yield make


def freeze_limiter(parts: ServerParts, at: float) -> None:
    """Swap the configured limiter for the same one on a frozen clock (windows align to the wall clock,
    so two quick calls could otherwise straddle a window boundary)."""
    from toolrun.state.memory import MemoryLimiter

    limiter = parts.service.limiter
    assert isinstance(limiter, MemoryLimiter)
    parts.service.limiter = MemoryLimiter(limiter.calls, limiter.window, clock=lambda: at)
