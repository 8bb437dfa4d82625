"""Every setting in one declared table; resolved as flags > environment > config file > defaults.

The environment name of a setting is ``SVC_`` + its name upper-cased with dots as underscores
(``rate_limit.enabled`` -> ``SVC_RATE_LIMIT_ENABLED``). The config file is TOML, at
``<config dir>/config.toml`` (see `paths`), with dotted names as tables:
``[rate_limit]`` / ``enabled = true``. `docs/configuration.md` documents each one; a test keeps
the two in step.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from .errors import UsageError
from .paramtypes import parse_bool

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Setting:
    """One row of the table, as the loader, the docs test and `toolrun serve --help` read it."""

    name: str
    type: type
    default: Any
    help: str
    attr: str = ""  # the attribute of Settings holding it (the name, dots as underscores)

    @property
    def env(self) -> str:
        return "SVC_" + self.name.upper().replace(".", "_")


def setting(default: T, help: str, *, name: str = "") -> T:
    """One row of the settings table: its default and help (`name=` only for a dotted name).

    Typed as the default so that `port: int = setting(8080, ...)` reads as an int to mypy, as a
    pydantic `Field` would; at run time it is the dataclass field carrying the row.
    """
    return field(default=default, metadata={"help": help, "name": name})


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting, one row each (adding a setting is adding a row); resolved by `Settings.load`.

    Read a setting as an attribute (`settings.rate_limit_enabled`, typed: its dotted name with dots as
    underscores). List settings are tuples: the whole object is immutable.
    """

    catalog: tuple[str, ...] = setting((), "Catalog files or directories (os.pathsep-separated in the environment).")
    host: str = setting("127.0.0.1", "Address `serve` binds to.")
    port: int = setting(8080, "Port `serve` listens on.")
    workers: int = setting(0, "Worker processes of `serve` (0: one per CPU, at most 8; 1: one process).")
    debug: bool = setting(False, "Error bodies of POST /tools/{key} carry the full traceback (spec `DEBUG`).")
    ui_enabled: bool = setting(False, "Serve the browser UI at /ui.")
    rate_limit_enabled: bool = setting(False, "Limit calls per (user, tool) bucket.", name="rate_limit.enabled")
    rate_limit_calls: int = setting(60, "Calls allowed per bucket in one window.", name="rate_limit.calls")
    rate_limit_window: int = setting(60, "Window length in seconds.", name="rate_limit.window")
    rate_limit_fail_open: bool = setting(
        False, "Allow calls when the shared limiter backend is down.", name="rate_limit.fail_open"
    )
    default_timeout: float = setting(60.0, "Timeout in seconds of tools that declare none.")
    max_output: int = setting(10 * 1024 * 1024, "Bytes of stdout and of stderr kept per call.")
    max_concurrent_calls: int = setting(256, "Tool calls running at once; beyond it calls get 503.")
    queue_timeout: float = setting(2.0, "Seconds a call waits for a free slot before the 503 (0: none).")
    max_body_bytes: int = setting(1024 * 1024, "Largest request body accepted (413 beyond).")
    request_timeout: float = setting(30.0, "Seconds a client has to send its request head and body.")
    shutdown_grace: float = setting(10.0, "Seconds in-flight calls get to finish on SIGTERM.")
    allowed_hosts: tuple[str, ...] = setting(("127.0.0.1", "localhost", "[::1]", "::1"), "Accepted Host headers.")
    allowed_origins: tuple[str, ...] = setting((), "Origins allowed to POST and to receive CORS headers.")
    redis_url: str = setting("", "A redis:// URL: keys, buckets, sessions and cache move to Redis.")
    readiness_timeout: float = setting(1.0, "Seconds each /readyz check may take.")
    mcp_direct: bool = setting(False, "MCP also lists each catalog tool as its own tool.")
    mcp_auth_required: bool = setting(
        False, "MCP over HTTP refuses anonymous callers with a 401 (an OAuth client then starts its login)."
    )
    mcp_stream_keepalive: float = setting(
        15.0, "Seconds between keep-alive comments on an open GET /mcp event stream (and session checks)."
    )
    mcp_approval_round: float = setting(
        20.0,
        "Seconds an MCP call awaiting approval is held for the decision in one round, before the client is asked "
        "again (a 2026-07-28 client: `input_required`; a handshake-era client: the elicitation question).",
    )
    mcp_max_streams: int = setting(
        1000, "Open MCP event streams (GET /mcp, and apart subscriptions/listen) per server process."
    )
    mcp_max_streams_per_caller: int = setting(
        10,
        "Open MCP event streams one caller (a user; an anonymous client address) holds per server process "
        "(at most half of mcp_max_streams).",
    )
    catalog_cache: bool = setting(True, "Cache parsed catalogs by content hash in the cache dir.")
    curl_protocols: tuple[str, ...] = setting(
        ("http", "https"), "Protocols curl tools may use (`curl --proto`); a tool's `protocols:` replaces it."
    )
    reload_interval: float = setting(2.0, "Seconds between checks of the catalog files' hash for a reload (0: off).")
    log_level: str = setting("info", "Logging level: debug, info, warning, error.")
    log_format: str = setting("text", "Log lines as `text` or `json` (one JSON object per line).")
    forwarded_allow_ips: tuple[str, ...] = setting(
        (), "Proxy addresses (IPs or CIDRs, `*` for any) whose X-Forwarded-For/-Proto are trusted; none by default."
    )
    metrics_token: str = setting("", "When set, /metrics requires `Authorization: Bearer <token>`.")
    metrics_allow_ips: tuple[str, ...] = setting(
        (), "When set, /metrics answers only these client addresses (IPs or CIDRs)."
    )
    search_semantic: bool = setting(
        True, "Rank searches by meaning too when toolrun[semantic] (or an embeddings URL) is there; false: lexical."
    )
    search_model: str = setting("", "A directory with model.onnx and tokenizer.json to embed with (empty: MiniLM).")
    search_embeddings_url: str = setting(
        "", "An OpenAI-compatible embeddings endpoint (e.g. http://tei:8080/v1/embeddings) instead of a local model."
    )
    search_embeddings_model: str = setting("", "The `model` sent to search_embeddings_url.")
    search_embeddings_key: str = setting("", "A bearer token sent to search_embeddings_url.")
    approval_timeout: float = setting(
        3600.0, "Seconds a call needing approval waits for its decision before it expires (a tool may set its own)."
    )
    notify_url: tuple[str, ...] = setting(
        (), "Webhooks (Slack, Teams or your own) told when a call asks for approval, is decided, withdrawn or expires."
    )
    notify_secret: str = setting("", "Key of the HMAC-SHA256 signature on each notification (empty: unsigned).")
    public_url: str = setting(
        "", "The address people open toolrun at, for links in notifications (empty: http://<host>:<port>)."
    )
    job_retention: float = setting(86400.0, "Seconds a finished job (its result) is kept, then dropped.")
    job_max_live_per_caller: int = setting(
        100, "Jobs one caller may hold awaiting approval or running at once (429 beyond; docs/jobs.md)."
    )
    job_max_streams_per_caller: int = setting(
        10,
        "Open waits on jobs one caller holds per server process: GET /jobs/{id}/events streams and held MCP calls "
        "together (429 beyond).",
    )
    audit_log: str = setting("", "Audit trail of tool calls (JSON lines): a file path, - for stderr, empty for none.")
    oauth_issuer: str = setting(
        "", "OAuth: the issuer whose signed JWTs are accepted as bearer tokens beside API keys (empty: off)."
    )
    oauth_audience: str = setting("", "OAuth: the `aud` a token must carry (required with oauth_issuer).")
    oauth_jwks_url: str = setting(
        "", "OAuth: the issuer's signing keys (empty: the jwks_uri of its /.well-known/openid-configuration)."
    )
    oauth_username_claim: str = setting("sub", "OAuth: the claim that names the user.")
    oauth_groups_claim: str = setting("groups", "OAuth: the claim that lists the user's groups (empty: none).")
    oauth_scope_prefix: str = setting(
        "toolrun:", "OAuth: a scope `<prefix><group>` also grants that group (empty: scopes grant nothing)."
    )
    oauth_algorithms: tuple[str, ...] = setting(
        ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"),
        "OAuth: signature algorithms accepted (asymmetric only: never none or HS256).",
    )
    oauth_jwks_min_interval: float = setting(
        60.0, "OAuth: seconds between two fetches of the signing keys prompted by an unknown kid."
    )
    oauth_resource: str = setting(
        "", "OAuth: this server's public URL in its protected-resource metadata (empty: from the request)."
    )
    oauth_users: tuple[str, ...] = setting(
        (),
        "OAuth: `subject=user` pairs: a token with that subject is that user of the key store, the same person "
        "as its API keys (docs/oauth.md).",
    )
    oauth_ui_client_id: str = setting(
        "", "OAuth: the public client id of the browser UI at the issuer (empty: no 'Sign in with' button)."
    )
    oauth_ui_scopes: tuple[str, ...] = setting(("openid",), "OAuth: the scopes the browser UI asks for at sign-in.")
    sandbox_default: str = setting(
        "", "Sandbox of exec tools that declare none: empty or off (none), on (the default profile), or a profile name."
    )

    # Not settings: where config, data and cache live (see `paths`); where each value came from (the command
    # line, an SVC_* variable, the config file's path, the default); the config file read (or looked for).
    dirs: Mapping[str, Path] = field(default_factory=dict, compare=False)
    origins: Mapping[str, str] = field(default_factory=dict, compare=False)
    config_file: Path | None = field(default=None, compare=False)

    @classmethod
    def load(
        cls,
        flags: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
        config_file: Path | None = None,
    ) -> Settings:
        """Flags > environment > config file > defaults, each value checked (UsageError naming the setting)."""
        return _load(cls, flags, environ, config_file)


_KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool, "tuple[str, ...]": list}


def _table() -> tuple[Setting, ...]:
    rows = []
    for f in fields(Settings):
        if "help" not in f.metadata:
            continue
        kind = _KINDS[str(f.type)]
        rows.append(Setting(f.metadata["name"] or f.name, kind, f.default, f.metadata["help"], f.name))
    return tuple(rows)


SETTINGS: tuple[Setting, ...] = _table()
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
    "mcp_stream_keepalive": (_finite(0, 3600, low_open=True), "seconds > 0 (at most 3600)"),
    "mcp_approval_round": (_finite(0, 3600, low_open=True), "seconds > 0 (at most 3600)"),
    "mcp_max_streams": (_finite(0, 1e6), "an integer from 0 (no streams) to 1000000"),
    "mcp_max_streams_per_caller": (_finite(1, 1e6), "an integer from 1 to 1000000"),
    "log_level": (lambda v: v.strip().lower() in ("debug", "info", "warning", "error"), "debug, info, warning, error"),
    "log_format": (lambda v: v.strip().lower() in ("text", "json"), "text or json"),
    "approval_timeout": (_finite(0, 365 * _DAY, low_open=True), "seconds > 0"),
    "job_retention": (_finite(0, 365 * _DAY), "seconds >= 0"),
    "job_max_live_per_caller": (_finite(1, 1e6), "an integer from 1 to 1000000"),
    "job_max_streams_per_caller": (_finite(1, 1e6), "an integer from 1 to 1000000"),
    "oauth_jwks_min_interval": (_finite(0, _DAY), "seconds from 0 to 86400"),
    "curl_protocols": (
        lambda v: bool(v) and all(re.fullmatch(r"[a-z][a-z0-9+.-]*", p) for p in v),
        "protocol names such as http,https (lower case, at least one)",
    ),
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
    _check_oauth(values, origins)
    _check_embeddings_url(values["search_embeddings_url"], origins["search_embeddings_url"])
    for name in ("forwarded_allow_ips", "metrics_allow_ips"):
        for item in values[name]:
            if item == "*" and name == "forwarded_allow_ips":
                continue
            import ipaddress  # here, not at the top: most runs set no address list (and TAB completion loads this)

            try:
                ipaddress.ip_network(item, strict=False)
            except ValueError:
                raise UsageError(
                    f"setting {name} from {origins[name]}: expected IP addresses or CIDR networks"
                    f"{' (or *)' if name == 'forwarded_allow_ips' else ''}, got {item!r}"
                ) from None


# -- the OAuth settings' own rules (access/oauth.py applies them to tokens) -----------------------------------

# Asymmetric signatures only: `none` and the HMACs (HS256...) are never accepted, whatever the setting says.
SAFE_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"}
)


def check_url(name: str, url: str, origin: str = "") -> None:
    """An issuer or key URL must be https (http only for a loopback host, for tests and local providers)."""
    parts = urlsplit(url)
    where = f" from {origin}" if origin else ""
    if parts.scheme == "https" and parts.hostname:
        return
    if parts.scheme == "http" and parts.hostname in ("localhost", "127.0.0.1", "::1"):
        return
    raise UsageError(f"setting {name}{where}: expected an https:// URL (http:// only for localhost), got {url!r}")


def check_algorithms(names: tuple[str, ...], origin: str = "") -> None:
    bad = [n for n in names if n not in SAFE_ALGORITHMS]
    if bad or not names:
        raise UsageError(
            f"setting oauth_algorithms{f' from {origin}' if origin else ''}: expected some of "
            f"{', '.join(sorted(SAFE_ALGORITHMS))} (asymmetric signatures only), got {', '.join(bad) or 'none'}"
        )


def parse_users(entries: tuple[str, ...] | list[str], origin: str = "") -> tuple[tuple[str, str], ...]:
    """`oauth_users` entries `subject=user` as pairs; a malformed entry, a user name that breaks the user name
    rules or a subject named twice is refused."""
    from .keyrules import USERNAME_RE  # here, not at the top: every command reads settings, few check oauth_users

    where = f" from {origin}" if origin else ""
    pairs: list[tuple[str, str]] = []
    for entry in entries:
        subject, sep, user = entry.rpartition("=")
        if not sep or not subject or not USERNAME_RE.match(user):
            raise UsageError(
                f"setting oauth_users{where}: expected entries `subject=user` (a user name of letters, digits and "
                f"_ . @ -, at most 64), got {entry!r}"
            )
        if any(subject == known for known, _ in pairs):
            raise UsageError(f"setting oauth_users{where}: the subject {subject!r} is mapped twice")
        pairs.append((subject, user))
    return tuple(pairs)


def _check_oauth(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """OAuth settings that would accept tokens meant for others, or fetch keys in the clear, are refused."""
    _check_oauth_ui(values, origins)
    if not values["oauth_issuer"]:
        return
    check_url("oauth_issuer", values["oauth_issuer"], origins["oauth_issuer"])
    if values["oauth_jwks_url"]:
        check_url("oauth_jwks_url", values["oauth_jwks_url"], origins["oauth_jwks_url"])
    if not values["oauth_audience"].strip():
        raise UsageError(
            "setting oauth_audience: required with oauth_issuer (the `aud` this server's tokens carry, such as its "
            "URL or client id); without it a token the issuer made for any other service would be accepted"
        )
    if not values["oauth_username_claim"].strip():
        raise UsageError(f"setting oauth_username_claim from {origins['oauth_username_claim']}: must not be empty")
    check_algorithms(tuple(values["oauth_algorithms"]), origins["oauth_algorithms"])
    parse_users(tuple(values["oauth_users"]), origins["oauth_users"])


def _check_oauth_ui(values: Mapping[str, Any], origins: Mapping[str, str]) -> None:
    """The UI's sign-in with the provider: a client id and scopes without spaces, and an issuer to sign in at."""
    client_id = values["oauth_ui_client_id"]
    if not client_id:
        return
    if not values["oauth_issuer"]:
        raise UsageError(
            f"setting oauth_ui_client_id from {origins['oauth_ui_client_id']}: needs oauth_issuer "
            "(the provider the UI signs in with)"
        )
    issuer = urlsplit(values["oauth_issuer"])
    if not re.fullmatch(r"[A-Za-z0-9.\-]+(:[0-9]+)?|\[[0-9A-Fa-f:.]+\](:[0-9]+)?", issuer.netloc):
        raise UsageError(
            f"setting oauth_ui_client_id from {origins['oauth_ui_client_id']}: the issuer's host "
            f"{issuer.netloc!r} cannot go in the UI's Content-Security-Policy (a host name or address, and a port)"
        )
    if not client_id.isprintable() or any(c.isspace() for c in client_id):
        raise UsageError(
            f"setting oauth_ui_client_id from {origins['oauth_ui_client_id']}: got {client_id!r}, "
            "expected a client id without spaces"
        )
    for scope in values["oauth_ui_scopes"]:
        if not scope or not scope.isprintable() or any(c.isspace() or c in '"\\' for c in scope):
            raise UsageError(
                f"setting oauth_ui_scopes from {origins['oauth_ui_scopes']}: {scope!r} is not a scope "
                "(no spaces, quotes or backslashes)"
            )


def _check_embeddings_url(url: str, origin: str) -> None:
    if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
        raise UsageError(
            f"setting search_embeddings_url from {origin}: expected an http:// or https:// URL, got {url!r}"
        )


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


def _load(
    cls: type[Settings],
    flags: Mapping[str, Any] | None,
    environ: Mapping[str, str] | None,
    config_file: Path | None,
) -> Settings:
    environ = os.environ if environ is None else environ
    dirs = paths(environ)
    path = config_file or Path(environ.get("SVC_CONFIG") or dirs["config"] / "config.toml")
    file_values: dict[str, Any] = {}
    if path.is_file():
        import tomllib  # only with a config file: importing it costs a TAB completion a few milliseconds

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
    kwargs: dict[str, Any] = {s.attr: tuple(values[s.name]) if s.type is list else values[s.name] for s in SETTINGS}
    return cls(**kwargs, dirs=dirs, origins=origins, config_file=path)
