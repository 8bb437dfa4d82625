"""Notifications of approvals (docs/jobs.md): a webhook POST when a request is made, decided, withdrawn or expires.

One JSON body, accepted as it is by Slack's and Microsoft Teams' incoming webhooks (they read `text`; the other
fields are for a receiver of your own)::

    {"text": "alice asks to run ops.restart (name=nginx): needs approval by oncall. Open: https://.../ui/jobs/j_…",
     "event": "requested", "job": {"id": "j_…", "tool": "ops.restart", "state": "awaiting_approval", ...}}

With the `notify_secret` setting each POST is signed: `X-Toolrun-Timestamp: <unix seconds>` and
`X-Toolrun-Signature-256: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" under the secret>`, so a receiver can
check who sent it and refuse a replay. Delivery never holds up a call: each notification is a background task that
tries up to `ATTEMPTS` times (backoff 1, 2, 4, 8 s) while the receiver is unreachable or answers 429 or 5xx, then
logs a warning. A webhook URL carries its own secret (Slack's do): logs show its scheme and host only.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

from ..models import Identity


class Job(Protocol):
    """What a notification reads of a job (jobrecord.Job has it: this module sits below the jobs' layer)."""

    @property
    def id(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def requester(self) -> Identity: ...
    @property
    def approvers(self) -> tuple[str, ...]: ...
    @property
    def shown_args(self) -> Mapping[str, Any]: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def created(self) -> float: ...
    @property
    def expires_at(self) -> float | None: ...


log = logging.getLogger("toolrun.notify")

ATTEMPTS = 5
FIRST_BACKOFF = 1.0  # seconds; doubled after each failed attempt
TIMEOUT = 5.0  # seconds one attempt may take
EVENTS = ("requested", "approved", "denied", "withdrawn", "cancelled", "expired")
SIGNATURE_HEADER = "X-Toolrun-Signature-256"
TIMESTAMP_HEADER = "X-Toolrun-Timestamp"


def masked(url: str) -> str:
    """A webhook URL as logs and tool entries show it: scheme and host, the rest (often a secret) hidden."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}/…" if parts.scheme and parts.hostname else "[webhook]"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def _args_words(args: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in args.items())
    return f" ({shown[:300]}{'…' if len(shown) > 300 else ''})" if shown else ""


def message(event: str, job: Job, decider: str | None, link: str) -> str:
    """The one line a person reads in the channel."""
    who = job.requester.username or "someone"
    tool = job.tool
    approvers = ", ".join(job.approvers or ("admin",))
    reason = f": {job.reason}" if job.reason else ""
    lines = {
        "requested": f"{who} asks to run {tool}{_args_words(job.shown_args)}: needs approval by {approvers}",
        "approved": f"{decider} approved {who}'s call of {tool}{reason}",
        "denied": f"{decider} denied {who}'s call of {tool}{reason}",
        "withdrawn": f"{who} withdrew their request to run {tool}{reason}",
        "cancelled": f"{decider or 'toolrun'} cancelled {who}'s call of {tool}{reason}",
        "expired": f"{who}'s request to run {tool} expired: nobody decided in time",
    }
    line = as_text(lines[event])
    return f"{line}. Open: {link}" if link else f"{line}."


def as_text(words: str) -> str:
    """`words` (a caller's arguments and reasons among them) shown as text, never as the markup Slack and Teams read
    in `text`: `&`, `<` and `>` escaped as Slack asks (no `<!channel>`, no `<url|a name of one's choosing>`), a
    markdown link broken (`[a](url)` in Teams), control and format characters written as escapes (no line of one's
    own, no bidi override turning the line around)."""
    if not (words.isascii() and words.isprintable()):
        words = "".join(_visible(c) for c in words)
    words = words.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return words.replace("](", "] (")


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(c: str) -> str:
    if unicodedata.category(c) not in ("Cc", "Cf"):
        return c
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


class Notifier:
    """Sends the notifications of one process. `urls` are the server's webhooks (the `notify_url` setting);
    a tool's own `notify:` hooks are passed with each event."""

    def __init__(self, urls: Sequence[str] = (), secret: str = "", public_url: str = "") -> None:
        self.urls = tuple(u for u in urls if u)
        self.secret = secret
        self.public_url = public_url.rstrip("/")
        self.pending: set[asyncio.Task[None]] = set()

    @classmethod
    def from_settings(cls, settings: Any) -> Notifier:
        public = settings.public_url or f"http://{settings.host}:{settings.port}"
        return cls(settings.notify_url, settings.notify_secret, public)

    def link(self, job_id: str) -> str:
        return f"{self.public_url}/ui/jobs/{quote(job_id)}" if self.public_url else ""

    def body(self, event: str, job: Job, decider: str | None) -> bytes:
        link = self.link(job.id)
        view = {
            "id": job.id,
            "tool": job.tool,
            "state": job.state,
            "requester": job.requester.username or None,
            "approvers": list(job.approvers),
            "args": dict(job.shown_args),  # secret values are already `[secret]`
            "decided_by": decider,
            "reason": job.reason,
            "created": job.created,
            "expires_at": job.expires_at,
            "url": link or None,
        }
        payload = {"text": message(event, job, decider, link), "event": event, "job": view}
        return json.dumps(payload, ensure_ascii=False, default=str).encode()

    def send(self, event: str, job: Job, decider: str | None, extra: Sequence[str] = ()) -> None:
        """Queue the notification of `event` to every hook; returns at once (a running event loop is needed)."""
        urls = [*self.urls, *(u for u in extra if u not in self.urls)]
        if not urls or event not in EVENTS:
            return
        body = self.body(event, job, decider)
        loop = asyncio.get_running_loop()
        for url in urls:
            task = loop.create_task(self._deliver(url, body))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def drain(self, timeout: float = TIMEOUT) -> None:
        """Wait (at most `timeout` seconds) for the notifications still on their way: a CLI process about to exit,
        a server stopping."""
        if self.pending:
            await asyncio.wait(set(self.pending), timeout=timeout)

    async def _deliver(self, url: str, body: bytes) -> None:
        import httpx

        delay = FIRST_BACKOFF
        problem = ""
        async with httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False) as client:
            for attempt in range(1, ATTEMPTS + 1):
                stamp = str(int(time.time()))
                headers = {"Content-Type": "application/json", "User-Agent": "toolrun-notify"}
                if self.secret:
                    headers[TIMESTAMP_HEADER] = stamp
                    headers[SIGNATURE_HEADER] = sign(self.secret, stamp, body)
                try:
                    answer = await client.post(url, content=body, headers=headers)
                except httpx.HTTPError as exc:
                    problem = type(exc).__name__
                else:
                    if answer.status_code < 300:
                        return
                    problem = f"HTTP {answer.status_code}"
                    if answer.status_code < 500 and answer.status_code != 429:
                        break  # the receiver refuses this body: sending it again would not help
                if attempt < ATTEMPTS:
                    await asyncio.sleep(delay)
                    delay *= 2
        log.warning("notification to %s not delivered (%s)", masked(url), problem)
