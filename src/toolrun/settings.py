"""Every setting in one declared table; resolved as flags > environment > config file > defaults.

The environment name of a setting is ``SVC_`` + its name upper-cased with dots as underscores
(``rate_limit.enabled`` -> ``SVC_RATE_LIMIT_ENABLED``). The config file is TOML, at
``<config dir>/config.toml`` (see `paths`), with dotted names as tables:
``[rate_limit]`` / ``enabled = true``. `docs/configuration.md` documents each one; a test keeps
the two in step.
"""

from __future__ import annotations

import ipaddress
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import UsageError
from .paramtypes import parse_bool


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    type: type
    default: Any
    help: str

    @property
    def env(self) -> str:
        return "SVC_" + self.name.upper().replace(".", "_")


SETTINGS: tuple[Setting, ...] = (
    Setting("catalog", list, [], "Catalog files or directories (os.pathsep-separated in the environment)."),
    Setting("host", str, "127.0.0.1", "Address `serve` binds to."),
    Setting("port", int, 8080, "Port `serve` listens on."),
    Setting("debug", bool, False, "Error bodies of POST /tools/{key} carry the full traceback (spec `DEBUG`)."),
    Setting("ui_enabled", bool, False, "Serve the browser UI at /ui."),
    Setting("rate_limit.enabled", bool, False, "Limit calls per (user, tool) bucket."),
    Setting("rate_limit.calls", int, 60, "Calls allowed per bucket in one window."),
    Setting("rate_limit.window", int, 60, "Window length in seconds."),
    Setting("rate_limit.fail_open", bool, False, "Allow calls when the shared limiter backend is down."),
    Setting("default_timeout", float, 60.0, "Timeout in seconds of tools that declare none."),
    Setting("max_output", int, 10 * 1024 * 1024, "Bytes of stdout and of stderr kept per call."),
    Setting("max_concurrent_calls", int, 256, "Tool calls running at once; beyond it calls get 503."),
    Setting("queue_timeout", float, 2.0, "Seconds a call waits for a free slot before the 503 (0: none)."),
    Setting("max_body_bytes", int, 1024 * 1024, "Largest request body accepted (413 beyond)."),
    Setting("request_timeout", float, 30.0, "Seconds a client has to send its request head and body."),
    Setting("shutdown_grace", float, 10.0, "Seconds in-flight calls get to finish on SIGTERM."),
    Setting("allowed_hosts", list, ["127.0.0.1", "localhost", "[::1]", "::1"], "Accepted Host headers."),
    Setting("allowed_origins", list, [], "Origins allowed to POST and to receive CORS headers."),
    Setting("redis_url", str, "", "A redis:// URL: keys, buckets, sessions and cache move to Redis."),
    Setting("readiness_timeout", float, 1.0, "Seconds each /readyz check may take."),
    Setting("mcp_direct", bool, False, "MCP also lists each catalog tool as its own tool."),
    Setting("catalog_cache", bool, True, "Cache parsed catalogs by content hash in the cache dir."),
    Setting("log_level", str, "info", "Logging level: debug, info, warning, error."),
    Setting("log_format", str, "text", "Log lines as `text` or `json` (one JSON object per line)."),
    Setting(
        "forwarded_allow_ips",
        list,
        [],
        "Proxy addresses (IPs or CIDRs, `*` for any) whose X-Forwarded-For/-Proto are trusted; none by default.",
    ),
    Setting("metrics_token", str, "", "When set, /metrics requires `Authorization: Bearer <token>`."),
    Setting("metrics_allow_ips", list, [], "When set, /metrics answers only these client addresses (IPs or CIDRs)."),
)
BY_NAME = {s.name: s for s in SETTINGS}


def paths(environ: Mapping[str, str] | None = None) -> dict[str, Path]:
    """Config, data and cache dirs; TOOLRUN_HOME puts all three under one directory."""
    environ = os.environ if environ is None else environ
    home = environ.get("TOOLRUN_HOME")
    if home:
        base = Path(home)
        return {"config": base / "config", "data": base / "data", "cache": base / "cache"}
    import platformdirs

    return {
        "config": Path(platformdirs.user_config_dir("toolrun")),
        "data": Path(platformdirs.user_data_dir("toolrun")),
        "cache": Path(platformdirs.user_cache_dir("toolrun")),
    }


def _parse(setting: Setting, raw: Any, origin: str, text: bool = True) -> Any:
    """`raw` as the setting's type; `text=False` (a TOML file) takes typed values only: `port = "80"` is an error."""
    kind = setting.type
    try:
        if isinstance(raw, str) and (text or kind is str):
            if kind is bool:
                if not raw.strip():
                    return False
                word = parse_bool(raw)  # the words tool params and the CLI accept
                if word is None:
                    raise ValueError(raw)
                return word
            if kind is list:
                sep = os.pathsep if setting.name == "catalog" else ","
                return [part.strip() for part in raw.split(sep) if part.strip()]
            return kind(raw)
        if kind is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        if not isinstance(raw, kind) or (kind is int and isinstance(raw, bool)):
            raise ValueError(raw)
        if isinstance(raw, list) and not all(isinstance(item, str) for item in raw):
            raise ValueError(raw)
        return raw
    except (ValueError, TypeError):
        raise UsageError(f"setting {setting.name} from {origin}: expected {_expected(kind)}, got {raw!r}") from None


def _finite(low: float, high: float, low_open: bool = False) -> Any:
    def ok(value: Any) -> bool:
        return math.isfinite(value) and (value > low if low_open else value >= low) and value <= high

    return ok


_DAY = 24 * 3600.0
# Settings whose type alone does not make them safe: (check, the accepted range as users read it).
# A zero window divides by zero, a zero timeout fails every call, zero concurrency refuses every call.
RANGES: dict[str, tuple[Any, str]] = {
    "port": (_finite(0, 65535), "an integer from 0 to 65535"),
    "rate_limit.calls": (_finite(1, 1e9), "an integer >= 1"),
    "rate_limit.window": (_finite(1, 365 * _DAY), "whole seconds >= 1"),
    "default_timeout": (_finite(0, 365 * _DAY, low_open=True), "seconds > 0"),
    "max_output": (_finite(1, 2**40), "bytes >= 1"),
    "max_concurrent_calls": (_finite(1, 1e6), "an integer from 1 to 1000000"),
    "queue_timeout": (_finite(0, _DAY), "seconds from 0 (no waiting) to 86400"),
    "max_body_bytes": (_finite(1, 2**40), "bytes >= 1"),
    "request_timeout": (_finite(0, _DAY, low_open=True), "seconds > 0"),
    "shutdown_grace": (_finite(0, _DAY), "seconds >= 0"),
    "readiness_timeout": (_finite(0, 3600, low_open=True), "seconds > 0 (at most 3600)"),
    "log_level": (lambda v: v.strip().lower() in ("debug", "info", "warning", "error"), "debug, info, warning, error"),
    "log_format": (lambda v: v.strip().lower() in ("text", "json"), "text or json"),
}


def check_redis_url(url: str) -> str | None:
    """Why `url` is not a Redis URL toolrun can use, or None when it is fine."""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return str(exc)
    if parts.scheme in ("redis", "rediss"):
        if not parts.hostname:
            return "no host name"
        db = parts.path.strip("/")
        if db and not db.isdigit():
            return f"the database {db!r} is not a number"
        return None
    if parts.scheme == "unix":
        return None if parts.path else "no socket path"
    return f"scheme {parts.scheme + ':' if parts.scheme else '(none)'} is not redis:, rediss: or unix:"


def _check(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """Refuse, in one line naming the setting and the accepted range, a value that would start a broken server."""
    for name, (ok, expected) in RANGES.items():
        value = values[name]
        if not ok(value):
            raise UsageError(f"setting {name} from {origins[name]}: expected {expected}, got {value!r}")
    url = values["redis_url"]
    if url:
        why = check_redis_url(url)
        if why is not None:
            # The URL may hold a password: name the problem, not the URL.
            raise UsageError(
                f"setting redis_url from {origins['redis_url']}: expected a redis://[:password@]host[:port][/db], "
                f"rediss://... or unix:///path URL ({why})"
            )
    for name in ("forwarded_allow_ips", "metrics_allow_ips"):
        for item in values[name]:
            if item == "*" and name == "forwarded_allow_ips":
                continue
            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise UsageError(
                    f"setting {name} from {origins[name]}: expected IP addresses or CIDR networks"
                    f"{' (or *)' if name == 'forwarded_allow_ips' else ''}, got {item!r}"
                ) from None


def _expected(kind: type) -> str:
    return "list of strings" if kind is list else kind.__name__


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and name not in BY_NAME:
            flat.update(_flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


class Settings:
    """Resolved settings; read with `settings["rate_limit.enabled"]` or `settings.get(...)`."""

    def __init__(self, values: dict[str, Any], dirs: dict[str, Path]) -> None:
        self._values = values
        self.dirs = dirs

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self._values.get(name, default)

    def as_dict(self) -> dict[str, Any]:
        return dict(self._values)

    @classmethod
    def load(
        cls,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        config_file: Path | None = None,
    ) -> Settings:
        environ = os.environ if environ is None else environ
        dirs = paths(environ)
        path = config_file or Path(environ.get("SVC_CONFIG") or dirs["config"] / "config.toml")
        file_values: dict[str, Any] = {}
        if path.is_file():
            try:
                file_values = _flatten(tomllib.loads(path.read_text(encoding="utf-8")))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise UsageError(f"config file {path}: {exc}") from None
            unknown = sorted(set(file_values) - set(BY_NAME))
            if unknown:
                raise UsageError(f"config file {path}: unknown setting {unknown[0]!r}")
        values: dict[str, Any] = {}
        origins: dict[str, str] = {}
        for s in SETTINGS:
            value, origins[s.name] = s.default, "the default"
            if s.name in file_values:
                value, origins[s.name] = _parse(s, file_values[s.name], str(path), text=False), str(path)
            if s.env in environ:
                value, origins[s.name] = _parse(s, environ[s.env], s.env), s.env
            if flags and flags.get(s.name) not in (None, [], ()):
                value, origins[s.name] = _parse(s, flags[s.name], "command line"), "the command line"
            values[s.name] = value
        _check(values, origins)
        return cls(values, dirs)
