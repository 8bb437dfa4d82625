"""A tool's environment: env files, `env:` values, and the allowlisted environment of its process."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..models import ToolSpec

if TYPE_CHECKING:
    from .loadcontext import LoadContext
    from .schema import RuntimeOptions

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The child's environment starts from these server variables only (plus what the tool declares).
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL", "TERM")
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def build_env(ctx: LoadContext, opts: RuntimeOptions, key: str, loc: tuple[Any, ...]) -> dict[str, str]:
    """The tool's `env_file` (read, recorded in `ctx.extra_files`), then its `env:` values over it."""
    env = read_env_file(ctx, opts.env_file, key, loc) if opts.env_file else {}
    for var, setting in (opts.env or {}).items():
        env[var] = _env_text(setting)
    return env


def env_file_path(path: Path) -> str:
    """An env file's absolute path: its folder resolved, its own name kept. A name that is a link (to a secrets
    agent's `current/app.env`) stays one: a load reads, and the catalog cache hashes, where it leads now, and each
    sandboxed call hides where it leads then (a target resolved once is not the one a rotation puts there)."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def read_env_file(ctx: LoadContext, name: str, key: str, loc: tuple[Any, ...]) -> dict[str, str]:
    """The variables of the env file `name` (relative to the catalog file); a problem when it cannot be read."""
    env_path = Path(env_file_path(ctx.path.parent / name))
    try:
        data = env_path.read_bytes()
        content = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        ctx.problem((*loc, "env_file"), key, f"cannot read env_file {name!r}: {reason}")
        return {}
    ctx.extra_files[str(env_path)] = hashlib.sha256(data).hexdigest()
    env = parse_env_file(content)
    for var in env:
        if not ENV_NAME.match(var):
            ctx.problem((*loc, "env_file"), key, f"env_file {name!r}: {var!r} is not a variable name")
    return env


def _env_text(value: Any) -> str:
    if hasattr(value, "secret") and hasattr(value, "value"):  # schema.SecretEnv
        value = value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_env_file(content: str) -> dict[str, str]:
    """KEY=VALUE lines; blank lines and # comments skipped; `export ` and matching quotes stripped.

    Values are taken literally: no variable expansion, no escapes (a value in double quotes may
    hold `#`, `=` and spaces). Lines without `=` are ignored.
    """
    env: dict[str, str] = {}
    for line in content.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[name.strip()] = value
    return env


def child_env(tool: ToolSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The allowlisted environment of a tool's process: a small base, passthrough names, the tool's env."""
    env = {name: environ[name] for name in BASE_ENV if name in environ}
    env.setdefault("PATH", DEFAULT_PATH)
    for pattern in tool.env_passthrough:
        if pattern.endswith("*"):
            prefix = pattern[:-1]
            env.update({k: v for k, v in environ.items() if k.startswith(prefix)})
        elif pattern in environ:
            env[pattern] = environ[pattern]
    if tool.user is not None:
        import pwd

        try:
            entry = pwd.getpwnam(tool.user)
        except KeyError:
            pass
        else:
            env.update(HOME=entry.pw_dir, USER=entry.pw_name, LOGNAME=entry.pw_name)
    env.update(tool.env)
    return env
