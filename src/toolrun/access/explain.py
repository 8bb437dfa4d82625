"""Why a user may or may not see and call a tool, in one answer (`toolrun access explain`,
`GET /whoami?explain=TOOL`, `toolrun keys test`).

`explain` gathers the facts once (the user and their keys from the key store, the tool from the
catalog, the user's rate-limit bucket from the limiter) and decides with the same rule the
registry applies (`Identity.can_access`); the doors only format its answer (`explain_text`).

The rule, as the answer states it:

- a tool tagged `public` is visible and callable by anyone, with or without a key;
- a user in group `admin` sees every tool;
- otherwise a user sees a tool when one of their groups equals one of the tool's group tags;
- a user reaches the server only with an active key (not revoked, not expired): without one they
  are anonymous there, and see public tools only;
- a visible tool is callable right now unless the user's rate-limit bucket for it is empty.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..models import Identity, ToolSpec
from .apikeys import KeyRecord, User, iso

if TYPE_CHECKING:
    from ..settings import Settings


def _key_entry(record: KeyRecord, at: float) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "prefix": record.prefix,
        "state": record.state(at),
        "created_at": iso(record.created_at),
        "expires_at": iso(record.expires_at),
    }
    if record.revoked_at is not None:
        entry["revoked_at"] = iso(record.revoked_at)
    if record.expires_at is not None and entry["state"] == "active":
        entry["expires_in"] = round(record.expires_at - at)
    return entry


RATE_SETTINGS = ("rate_limit.enabled", "rate_limit.calls", "rate_limit.window")


def _sources(settings: Settings | None, names: Sequence[str]) -> dict[str, str]:
    """Where each of `names` came from: the command line, an SVC_* variable, the config file, the default."""
    origins = getattr(settings, "origins", None) or {}
    return {name: origins[name] for name in names if name in origins}


def settings_source(settings: Settings) -> dict[str, Any]:
    """The configuration an answer was computed from: the config file (and whether it exists); the
    environment's SVC_* variables are named per value, in `from`."""
    path = settings.config_file
    return {"config_file": str(path) if path else None, "config_file_found": bool(path and path.is_file())}


async def _rate(limiter: Any, settings: Settings | None, bucket: str, key: str) -> dict[str, Any]:
    """The caller's bucket for this tool: counted calls, what is left and when it resets."""
    sources = _sources(settings, RATE_SETTINGS)
    if settings is not None and not settings.rate_limit_enabled:
        return {"enabled": False, "from": sources}
    calls = settings.rate_limit_calls if settings is not None else int(getattr(limiter, "calls", 0))
    window = settings.rate_limit_window if settings is not None else float(getattr(limiter, "window", 0))
    info: dict[str, Any] = {"enabled": True, "bucket": f"{bucket} {key}", "calls": calls, "window": window}
    if sources:
        info["from"] = sources
    peek = getattr(limiter, "peek", None)
    if peek is None:
        info["note"] = "the buckets live in the memory of the running server: ask it (--url URL)"
        return info
    used, resets_in = await peek(bucket, key)
    info.update(used=min(used, calls), remaining=max(0, calls - used), resets_in=round(resets_in, 1))
    return info


async def explain(
    *,
    tool_key: str,
    tool: ToolSpec | None,
    username: str,
    store: Any,
    limiter: Any = None,
    settings: Settings | None = None,
    key: KeyRecord | None = None,
    at: float | None = None,
) -> dict[str, Any]:
    """Why `username` may (not) see and call `tool_key`; `tool` is the catalog's tool or None.

    `store` is a key store (its async API); `limiter` one with `peek` (or None: the buckets are in
    another process); `key`, when given, is the key being asked about (its state is in the answer).
    """
    at = time.time() if at is None else at
    anonymous = username in ("", "-", "anonymous")
    user: User | None = None
    records: Sequence[KeyRecord] = []
    if not anonymous:
        user = next((u for u in await store.alist_users() if u.username == username), None)
        records = [r for r in await store.alist_keys() if r.username == username]
    keys = [_key_entry(r, at) for r in records]
    active = [k for k in keys if k["state"] == "active"]
    groups = sorted(user.groups) if user is not None else []
    reasons: list[str] = []
    answer: dict[str, Any] = {
        "user": {
            "username": username if not anonymous else "",
            "known": user is not None,
            "groups": groups,
            "admin": "admin" in groups,
        },
        "tool": {"key": tool_key, "exists": tool is not None},
        "keys": keys,
    }
    if key is not None:
        answer["key"] = _key_entry(key, at)
    if anonymous:
        reasons.append("anonymous caller (no key): public tools only")
    elif user is None:
        reasons.append(f"no user {username!r} in the key store: such a caller is anonymous, public tools only")
    elif key is not None and answer["key"]["state"] != "active":
        reasons.append(
            f"key {key.prefix} is {answer['key']['state']}: a call with it is refused (401), "
            "and without a key only public tools are visible"
        )
    elif not active:
        states = ", ".join(f"{k['prefix']} {k['state']}" for k in keys) or "none"
        reasons.append(f"{username} has no active key ({states}): on the server they are anonymous, public tools only")
    has_key = user is not None and (bool(active) if key is None else answer["key"]["state"] == "active")
    identity = Identity(username, user.email, frozenset(groups), anonymous=False) if has_key and user else Identity()
    if tool is None:
        return _no_such_tool(answer, reasons, tool_key)
    matched = _match(answer, tool, groups)
    visible = identity.can_access(tool)
    if tool.public:
        reasons.append(f"{tool.key} is public: anyone may see and call it, with or without a key")
    elif has_key and identity.is_admin:
        reasons.append(f"{username} is in group admin: admins see every tool")
    elif has_key and matched:
        pairs = ", ".join(f"group {g!r} matches tag {g!r}" for g in matched)
        reasons.append(f"{username}'s {pairs} of {tool.key}")
    elif user is not None and matched:
        reasons.append(f"{username}'s groups match ({', '.join(matched)}), but without an active key that is not used")
    elif user is not None:
        tags = ", ".join(tool.groups) or "none"
        reasons.append(
            f"none of {username}'s groups ({', '.join(groups) or 'none'}) is a tag of {tool.key} ({tags}), "
            "and it is not public"
        )
    else:
        reasons.append(f"{tool.key} is not public")
    callable_now = visible
    if visible:
        bucket = identity.bucket if not identity.anonymous else "anon:<client address>"
        rate = await _rate(limiter, settings, bucket, tool.key)
        answer["rate_limit"] = rate
        if rate.get("enabled") and "remaining" in rate and rate["remaining"] <= 0:
            callable_now = False
            reasons.append(
                f"rate limit reached: {rate['used']} of {rate['calls']} calls; resets in {rate['resets_in']}s"
            )
    callable_now = _sandbox(answer, tool, reasons) and callable_now
    _jobs(answer, tool, identity, reasons)
    answer.update(visible=visible, callable=callable_now, reasons=reasons)
    return answer


def _jobs(answer: dict[str, Any], tool: ToolSpec, identity: Identity, reasons: list[str]) -> None:
    """Say whether a call waits for a person (and whether this caller may be that person) or runs as a job."""
    if not identity.can_access(tool):
        return
    if tool.approval:
        approvers = list(tool.approvers) or ["admin"]
        may = not identity.anonymous and (identity.is_admin or not identity.groups.isdisjoint(approvers))
        answer["approval"] = {"required": True, "approvers": approvers, "may_approve": may}
        who = identity.username or "an anonymous caller"
        verdict = f"{who} may approve others' calls (never their own)" if may else f"{who} may not approve it"
        reasons.append(f"each call needs approval by a member of {', '.join(approvers)} before it runs; {verdict}")
    if tool.run_async:
        answer["async"] = True
        reasons.append("a call runs as a job: it answers at once with the job's id")


def _sandbox(answer: dict[str, Any], tool: ToolSpec, reasons: list[str]) -> bool:
    """Add the tool's sandbox to the answer; False when this host cannot enforce it (its calls fail)."""
    if tool.sandbox is None:
        return True
    from ..exec.sandbox import describe

    answer["sandbox"] = shown = describe(tool.sandbox, tool.user)
    if not shown["enforced"]:
        reasons.append(f"its sandbox cannot be enforced on this host: {shown['reason']}")
    return bool(shown["enforced"])


async def explain_token(
    *,
    tool_key: str,
    tool: ToolSpec | None,
    caller: Identity | None,
    token: dict[str, Any],
    limiter: Any = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """`explain` for a bearer token (OAuth): `caller` is the identity it gives, None when it is refused;
    `token` what the verifier says of it (issuer, state, reason). The rule is the key's."""
    identity = caller or Identity()
    groups = sorted(identity.groups)
    answer: dict[str, Any] = {
        "user": {
            "username": identity.username,
            "known": caller is not None,
            "groups": groups,
            "admin": "admin" in groups,
        },
        "tool": {"key": tool_key, "exists": tool is not None},
        "keys": [],
        "token": token,
    }
    if caller is None:
        reasons = [f"the bearer token is refused ({token.get('reason', '')}): a call with it gets 401"]
    else:
        reasons = [
            f"{identity.username} holds a valid bearer token from {token['issuer']}: "
            f"groups come from its claims ({', '.join(groups) or 'none'}), not from the key store"
        ]
    if tool is None:
        return _no_such_tool(answer, reasons, tool_key)
    matched = _match(answer, tool, groups)
    visible = identity.can_access(tool)
    if tool.public:
        reasons.append(f"{tool.key} is public: anyone may see and call it, with or without a key")
    elif visible and identity.is_admin:
        reasons.append(f"{identity.username} is in group admin: admins see every tool")
    elif visible:
        pairs = ", ".join(f"group {g!r} matches tag {g!r}" for g in matched)
        reasons.append(f"{identity.username}'s {pairs} of {tool.key}")
    else:
        reasons.append(f"none of the token's groups is a tag of {tool.key} ({', '.join(tool.groups) or 'none'})")
    callable_now = visible
    if visible:
        bucket = identity.bucket if not identity.anonymous else "anon:<client address>"
        answer["rate_limit"] = rate = await _rate(limiter, settings, bucket, tool.key)
        if rate.get("enabled") and "remaining" in rate and rate["remaining"] <= 0:
            callable_now = False
            reasons.append(f"rate limit reached: {rate['used']} of {rate['calls']} calls")
    answer.update(visible=visible, callable=callable_now, reasons=reasons)
    return answer


def explain_text(answer: dict[str, Any]) -> str:
    """The answer for a terminal: the verdict first, then why, then the facts."""
    user = answer["user"]
    tool = answer["tool"]
    who = user["username"] or "anonymous"
    if answer["callable"]:
        verdict = "visible and callable"
    elif answer["visible"]:
        verdict = "visible, but not callable right now"
    else:
        verdict = "not visible (and not callable)"
    lines = [f"{tool['key']} for {who}: {verdict}"]
    lines += [f"  because {reason}" for reason in answer["reasons"]]
    if user["known"]:
        lines.append(f"user: {who}, groups: {', '.join(user['groups']) or '(none)'}")
    if tool["exists"]:
        tags = ", ".join(tool["groups"]) or "(none)"
        lines.append(f"tool: {tool['key']}, tags: {tags}, public: {'yes' if tool['public'] else 'no'}")
    if "sandbox" in answer:
        from ..exec.sandbox import describe_text

        lines.append(f"sandbox: {describe_text(answer['sandbox'])}")
    shown = [answer["key"]] if "key" in answer else answer["keys"]
    for k in shown:
        extra = f", expires {k['expires_at']}" if k["expires_at"] else ", never expires"
        if "revoked_at" in k:
            extra += f", revoked {k['revoked_at']}"
        lines.append(f"key {k['prefix']}: {k['state']}{extra}")
    token = answer.get("token")
    if token is not None:
        why = f" ({token['reason']})" if token.get("reason") else ""
        lines.append(f"bearer token: {token['state']}{why}, issuer {token['issuer']}")
    elif user["known"] and not shown:
        lines.append("keys: none")
    lines += _rate_lines(answer.get("rate_limit"))
    lines += _source_lines(answer)
    return "\n".join(lines) + "\n"


def _rate_lines(rate: dict[str, Any] | None) -> list[str]:
    if rate is None:
        return []
    if not rate["enabled"]:
        line = "rate limit: off"
    elif "remaining" in rate:
        line = (
            f"rate limit: {rate['used']} of {rate['calls']} calls used in this {rate['window']:g}s window, "
            f"{rate['remaining']} left, resets in {rate['resets_in']:g}s"
        )
    else:
        line = f"rate limit: {rate['calls']} calls per {rate['window']:g}s; {rate['note']}"
    sources = rate.get("from") or {}
    shown = sources if rate["enabled"] else {k: v for k, v in sources.items() if k == "rate_limit.enabled"}
    if shown:
        line += " (" + ", ".join(f"{name} from {origin}" for name, origin in shown.items()) + ")"
    return [line]


def _source_lines(answer: dict[str, Any]) -> list[str]:
    """Where the configuration came from: this machine's config file and environment, or the server asked."""
    if "server" in answer:
        return [f"answered by the server at {answer['server']} (its own configuration and live buckets)"]
    source = answer.get("settings")
    if not source:
        return []
    found = "" if source["config_file_found"] else " (not found)"
    return [
        f"settings read from: the config file {source['config_file']}{found} and the SVC_* environment of this "
        "shell; a server started with other settings or flags answers for itself: --url URL"
    ]


def key_report(
    record: KeyRecord, user: User, tools: Sequence[ToolSpec] | None, at: float | None = None
) -> dict[str, Any]:
    """`toolrun keys test KEY`: whose key it is, its state, and the tools it may call."""
    at = time.time() if at is None else at
    entry = _key_entry(record, at)
    report: dict[str, Any] = {
        "username": user.username,
        "email": user.email,
        "groups": sorted(user.groups),
        "key": entry,
        "valid": entry["state"] == "active",
    }
    if tools is not None:
        identity = user.identity() if report["valid"] else Identity()
        report["tools"] = [t.key for t in tools if identity.can_access(t)]
    return report


def key_report_text(report: dict[str, Any]) -> str:
    k = report["key"]
    lines = [
        f"key {k['prefix']} belongs to {report['username']}"
        + (f" <{report['email']}>" if report["email"] else "")
        + f", groups: {', '.join(report['groups']) or '(none)'}",
        f"state: {k['state']}"
        + (f", expires {k['expires_at']}" if k["expires_at"] else ", never expires")
        + (f", revoked {k['revoked_at']}" if "revoked_at" in k else ""),
    ]
    if not report["valid"]:
        lines.append("a call with this key is refused (401); without a key only public tools are callable")
    if "tools" in report:
        tools = report["tools"]
        what = "may call" if report["valid"] else "public tools anyone may call"
        lines.append(f"{what} ({len(tools)}): {', '.join(tools) if tools else '(none)'}")
    return "\n".join(lines) + "\n"


def _no_such_tool(answer: dict[str, Any], reasons: list[str], tool_key: str) -> dict[str, Any]:
    reasons.append(f"no tool {tool_key!r} in the catalog (the server answers 404, as for a hidden tool)")
    answer.update(visible=False, callable=False, matched=[], reasons=reasons)
    return answer


def _match(answer: dict[str, Any], tool: ToolSpec, groups: Iterable[str]) -> list[str]:
    """The caller's groups that are tags of `tool`, recorded in the answer with the tool's own groups."""
    matched = sorted(set(groups) & set(tool.groups))
    answer["tool"].update(public=tool.public, groups=list(tool.groups))
    answer["matched"] = [{"group": g, "tag": g} for g in matched]
    return matched
