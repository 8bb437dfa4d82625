"""A job's record: the frozen `Job` the jobs code reads by attribute (read from and written to the store's JSON
record at one edge, `Job.from_record` / `Job.to_record`), and plain functions: what an approval binds (`digest`),
who may see and decide (`visible`, `is_approver`, `is_requester`), the result kept, the output so far, and the
view shown to a door (`public_view`, `Job.view`). The state machine that changes records is jobs.py."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Mapping
from typing import Any

from . import formatting
from .errors import OutputInvalid, SandboxUnavailable, ToolFailed, ToolrunError, UsageError
from .models import CallResult, Identity, ToolSpec

log = logging.getLogger("toolrun.jobs")

AWAITING = "awaiting_approval"
RUNNING = "running"
FINAL = ("succeeded", "failed", "timed_out", "cancelled", "denied", "expired")
STATES = (AWAITING, RUNNING, *FINAL)
WITHDRAWN = "withdrawn: the requester stopped waiting"  # the reason of a request whose waiting caller left
OUTPUT_PART = 4096  # bytes of the head and of the tail of a running job's output shown
OUTPUT_MAX = 128 * 1024  # bytes a job's result keeps of stdout, of stderr, and of an fn tool's result each


def check_text(value: Any, name: str) -> None:
    """Refuse text no UTF-8 can carry (a lone surrogate, as `{"reason": "\\ud800"}` or a command-line argument
    that is not UTF-8 gives) before it is stored: a record holding it would break every view that shows it."""
    if isinstance(value, str):
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise UsageError(
                    f"`{name}` holds text that is not valid Unicode (a lone surrogate at character {exc.start}): "
                    "send UTF-8 text"
                ) from None
    elif isinstance(value, Mapping):
        for key, item in value.items():
            check_text(key, name)
            check_text(item, name)
    elif isinstance(value, (list, tuple)):
        for item in value:
            check_text(item, name)


def check_reason(reason: str) -> None:
    """A reason is one person's words to another: valid Unicode, and no control character but tab and newline (an
    escape sequence in a reason would reach the requester's terminal as `toolrun call` prints the decision)."""
    if len(reason) > 1000:
        raise UsageError("`reason` must be a string of at most 1000 characters")
    check_text(reason, "reason")
    bad = next((c for c in reason if (c < " " and c not in "\t\n") or "\x7f" <= c <= "\x9f"), None)
    if bad is not None:
        raise UsageError(f"`reason` holds the control character {bad!r}: write plain text")


def shown_text(value: Any) -> Any:
    """`value` with any lone surrogate replaced by U+FFFD: a record stored before text was checked (or planted)
    still renders, as JSON and on a terminal."""
    if isinstance(value, str):
        if value.isascii():
            return value
        try:
            value.encode("utf-8")
            return value
        except UnicodeEncodeError:
            return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    if isinstance(value, Mapping):
        return {shown_text(k): shown_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shown_text(v) for v in value]
    return value


_FIELDS: tuple[tuple[str, type | tuple[type, ...]], ...] = (
    ("id", str),
    ("tool", str),
    ("state", str),
    ("requester", dict),
    ("approvers", list),
    ("shown_args", dict),
    ("digest", str),
    ("created", (int, float)),
    ("updated", (int, float)),
)


def well_formed(job: Any) -> bool:
    """Whether a stored record has what every view and rule reads (a damaged or foreign one is left out of lists
    and answered as not found, never a 500 that hides every other job)."""
    if not isinstance(job, dict) or any(not isinstance(job.get(k), t) for k, t in _FIELDS):
        return False
    requester = job["requester"]
    return job["state"] in STATES and isinstance(requester.get("username"), str) and "anonymous" in requester


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    """A job's record, read by attribute. The state engines keep it as a JSON object (`to_record`; `from_record`
    reads one back, None for a damaged or foreign one); a change is a new Job (`dataclasses.replace`). The fields
    after `hold_until` are in a record only once set (`to_record` leaves them out while they are None/False)."""

    id: str
    tool: str
    state: str
    requester: Identity = dataclasses.field(default_factory=Identity)
    approvers: tuple[str, ...] = ()
    args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    secrets: tuple[str, ...] = ()  # the names in `args` that are secret: scrubbed when the job ends
    shown_args: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    digest: str = ""
    salt: str | None = None
    catalog: str = ""
    plan: Mapping[str, Any] | None = None
    created: float = 0.0
    updated: float = 0.0
    expires_at: float | None = None
    door: str = ""
    request_id: str | None = None
    trace: str = ""
    as_json: bool = False
    decided_by: str | None = None
    decided_at: float | None = None
    reason: str | None = None
    error: str | None = None
    result: Mapping[str, Any] | None = None
    output: Mapping[str, Any] | None = None
    runner: str | None = None
    heartbeat: float | None = None
    cancel: bool = False
    finished: float | None = None
    hold_until: float | None = None
    runner_space: str | None = None
    started: float | None = None
    withdrawn: bool = False
    cancelled_by: str | None = None
    cancel_reason: str | None = None

    @classmethod
    def from_record(cls, record: object) -> Job | None:
        """The job a stored record holds, or None when it lacks what every view and rule reads (`well_formed`)."""
        if not well_formed(record):
            return None
        assert isinstance(record, dict)
        r = record.get
        return cls(
            id=record["id"],
            tool=record["tool"],
            state=record["state"],
            requester=_requester(record["requester"]),
            approvers=tuple(record["approvers"]),
            args=r("args") or {},
            secrets=tuple(r("secrets") or ()),
            shown_args=record["shown_args"],
            digest=record["digest"],
            salt=r("salt"),
            catalog=r("catalog") or "",
            plan=r("plan"),
            created=record["created"],
            updated=record["updated"],
            expires_at=r("expires_at"),
            door=r("door") or "",
            request_id=r("request_id"),
            trace=r("trace") or "",
            as_json=bool(r("as_json")),
            decided_by=r("decided_by"),
            decided_at=r("decided_at"),
            reason=r("reason"),
            error=r("error"),
            result=r("result"),
            output=r("output"),
            runner=r("runner"),
            heartbeat=r("heartbeat"),
            cancel=bool(r("cancel")),
            finished=r("finished"),
            hold_until=r("hold_until"),
            runner_space=r("runner_space"),
            started=r("started"),
            withdrawn=bool(r("withdrawn")),
            cancelled_by=r("cancelled_by"),
            cancel_reason=r("cancel_reason"),
        )

    def to_record(self) -> dict[str, Any]:
        """The JSON object the engines store: the same fields, in the same order, as a record has always had."""
        record: dict[str, Any] = {
            "id": self.id,
            "tool": self.tool,
            "state": self.state,
            "requester": identity_fields(self.requester),
            "approvers": list(self.approvers),
            "args": dict(self.args),
            "secrets": list(self.secrets),
            "shown_args": dict(self.shown_args),
            "digest": self.digest,
            "salt": self.salt,
            "catalog": self.catalog,
            "plan": self.plan,
            "created": self.created,
            "updated": self.updated,
            "expires_at": self.expires_at,
            "door": self.door,
            "request_id": self.request_id,
            "trace": self.trace,
            "as_json": self.as_json,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "reason": self.reason,
            "error": self.error,
            "result": self.result,
            "output": self.output,
            "runner": self.runner,
            "heartbeat": self.heartbeat,
            "cancel": self.cancel,
            "finished": self.finished,
            "hold_until": self.hold_until,
        }
        if self.runner_space is not None:
            record["runner_space"] = self.runner_space
        if self.started is not None:
            record["started"] = self.started
        if self.withdrawn:
            record["withdrawn"] = True
        if self.cancelled_by is not None:
            record.update(cancelled_by=self.cancelled_by, cancel_reason=self.cancel_reason)
        return record

    def view(self, identity: Identity) -> dict[str, Any]:
        """The job as `identity` sees it at a door (`public_view`)."""
        return public_view(self, identity)


def _requester(r: Mapping[str, Any]) -> Identity:
    return Identity(
        username=r["username"],
        email=r.get("email") or "",
        groups=frozenset(r.get("groups") or ()),
        anonymous=r["anonymous"],
        client=r.get("client") or "",
        key_prefix=r.get("key_prefix") or "",
        source=r.get("source") or "",
        person=r.get("person") or "",
        since=float(r.get("since") or 0.0),
    )


def new_job_id() -> str:
    """16 random URL-safe characters (96 bits) that never start with `-`, so `toolrun jobs show ID` never reads
    an id as an option."""
    while (job_id := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return job_id


# What an approval does not bind: the words that describe a tool (how it is shown and found) and where it is
# written. Every other field of these records is digested, so a field added to ToolSpec (or to what it holds) is
# bound by default; tests/test_jobs_integrity.py fails on a field that is neither here nor shown to change the digest.
WORDING: dict[str, frozenset[str]] = {
    "ToolSpec": frozenset(
        {"description", "example", "examples", "annotations", "keywords", "file", "line", "col", "mcp_name"}
    ),
    "Param": frozenset({"description", "example"}),
}


_SCALARS = (str, int, float, bool, type(None))
_KEPT: dict[type, tuple[str, ...]] = {}  # a dataclass -> its fields that are digested


def _kept(cls: type) -> tuple[str, ...]:
    names = _KEPT.get(cls)
    if names is None:
        skip = WORDING.get(cls.__name__, frozenset())
        names = _KEPT[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.name not in skip)
    return names


def _bound(value: Any) -> Any:
    """`value` as plain JSON data, the wording of dataclasses (WORDING) left out. (About 50 µs for a small tool:
    the field lists are worked out once per class; `dataclasses.is_dataclass` and Mapping checks first were 6x.)"""
    if isinstance(value, _SCALARS):
        return value
    if hasattr(type(value), "__dataclass_fields__"):
        return {name: _bound(getattr(value, name)) for name in _kept(type(value))}
    if isinstance(value, (list, tuple)):
        return [_bound(v) for v in value]
    if isinstance(value, (dict, Mapping)):
        return {str(k): _bound(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((_bound(v) for v in value), key=repr)
    return value


def digest(tool: ToolSpec, values: Mapping[str, Any], salt: str = "") -> str:
    """What an approval binds: the tool as it will run (every field of the loaded tool but its wording: the command,
    curl's protocols, parameters, environment, limits, user, the resolved sandbox, ...), an fn tool's code (its
    module's file as this process imported it) and the validated parameters.

    `salt`: the job's own random key (its record keeps it while the job can still run, never in a view or the
    audit trail). The digest is shown and audited for good, and it covers secret arguments and secret `env:`
    values: unsalted, whoever knows the rest (an approver) would get a short secret back by guessing."""
    bound: dict[str, Any] = {"tool": _bound(tool), "params": values}
    if tool.kind == "fn":  # `module:function` names the code; its module's file as imported here is the code
        from .catalog.fn import fn_code

        bound["code"] = fn_code(tool.source, tool.file)
    text = json.dumps(bound, sort_keys=True, default=str, ensure_ascii=False)
    data = text.encode("utf-8", "surrogatepass")
    if salt:
        return "sha256:" + hmac.new(salt.encode(), data, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(data).hexdigest()


def catalog_file(tool: ToolSpec) -> str:
    """The catalog file a tool was loaded from, as a full path (a job is bound to it: jobs.Jobs._tool_changed)."""
    return os.path.realpath(tool.file) if tool.file else ""


def scrubbed_args(job: Job) -> dict[str, Any]:
    """The raw arguments without the values of secret parameters: what a job keeps once it ended (nothing runs
    from it any more; views show `shown_args`)."""
    secret = set(job.secrets)
    return {name: value for name, value in job.args.items() if name not in secret}


def identity_fields(identity: Identity) -> dict[str, Any]:
    return {
        "username": identity.username,
        "email": identity.email,
        "groups": sorted(identity.groups),
        "anonymous": identity.anonymous,
        "client": identity.client,
        "key_prefix": identity.key_prefix,
        "source": identity.source,
        "person": identity.person,
        "since": identity.since,
    }


def is_requester(identity: Identity, job: Job) -> bool:
    """Whether `identity` is the person who asked for this job: the same person (`Identity.person`: where the
    name comes from and the name), never merely the same string. A token with `sub=alice` is not API-key
    alice (unless `oauth_users` maps it), and API user `root` is not the local operator `root`. A record
    without a person (older than persons) is nobody's: only its approvers and admins see it."""
    r = job.requester
    if r.anonymous or identity.anonymous:
        return False
    person = r.person
    if not person or identity.person != person:
        return False
    # A key-store user deleted and created again under the name is another person: the new one neither sees nor
    # withdraws the old one's jobs. (A token that oauth_users maps to the name carries no creation time.)
    since = r.since
    return not (since and identity.since and since != identity.since)


_NETWORK_REALMS = ("user", "token")  # people who call through the server with a key or a token


def may_be_requester(identity: Identity, job: Job) -> bool:
    """Whether `identity` is, or could be, the requester, for the rule that the requester never decides: the
    same person, or a key user or token subject whose name is the requester's but for case (a person with a
    key `alice` and a token `Alice` must not approve its own call through the other credential)."""
    if is_requester(identity, job):
        return True
    r = job.requester
    if r.anonymous or identity.anonymous:
        return False
    mine, theirs = identity.person.partition(":"), r.person.partition(":")
    if mine[0] not in _NETWORK_REALMS or theirs[0] not in _NETWORK_REALMS:
        return False
    return mine[2].casefold() == theirs[2].casefold()


def can_decide(identity: Identity, job: Job) -> bool:
    """An approver (or admin) who is not, and could not be, the requester."""
    return is_approver(identity, job) and not may_be_requester(identity, job)


def is_approver(identity: Identity, job: Job) -> bool:
    if identity.anonymous:
        return False
    return identity.is_admin or not identity.groups.isdisjoint(job.approvers)


def visible(identity: Identity, job: Job) -> bool:
    return is_requester(identity, job) or is_approver(identity, job)


def outcome_of(result: CallResult) -> str:
    ex = result.exec
    if ex is None or (ex.returncode == 0 and not ex.timed_out):
        return "succeeded"
    return "timed_out" if ex.timed_out else "failed"


def result_record(result: CallResult) -> dict[str, Any]:
    """The answer the synchronous POST /tools/{key} would have given, kept once: the JSON payload only (its text
    and the copies of stdout in it are rebuilt when shown, `result_answer`), each output cut at OUTPUT_MAX bytes."""
    payload = formatting.call_payload(result)
    if payload.get("typed"):
        pass  # a typed output's parsed value is the answer: kept, its text is rebuilt from it
    elif result.exec is not None:
        payload.pop("result", None)  # stdout again, or {returncode, stdout, stderr}
    elif isinstance(payload.get("result"), str) and payload.get("text") == payload["result"]:
        payload.pop("text")
    elif not isinstance(payload.get("result"), str) and _size(payload.get("result")) > OUTPUT_MAX:
        payload["result"] = formatting.result_text(payload["result"])  # too large a structure: cut as text
    dropped = 0
    for field in ("stdout", "stderr", "result", "text"):
        value = payload.get(field)
        if isinstance(value, str):
            payload[field], cut = cut_text(value)
            dropped += cut
    if dropped:
        payload.update(truncated=True, bytes_dropped=payload.get("bytes_dropped", 0) + dropped)
        if "bytes_kept" in payload:
            payload["bytes_kept"] = max(0, payload["bytes_kept"] - dropped)
    return {
        "status": 200,
        "json": payload,
        "exit_code": result.exec.returncode if result.exec is not None else None,
    }


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))


def cut_text(text: str) -> tuple[str, int]:
    """`text` cut at OUTPUT_MAX bytes (UTF-8) with a marker saying how much went, and how many bytes went."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= OUTPUT_MAX:
        return text, 0
    dropped = len(data) - OUTPUT_MAX
    head = data[:OUTPUT_MAX].decode("utf-8", "ignore")
    return (
        f"{head}\n[toolrun: {dropped} more bytes cut: a job keeps at most {OUTPUT_MAX} bytes of each output]\n",
        dropped,
    )


def result_answer(record: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """(the plain-text answer, the JSON payload) of a kept result, as the synchronous call would have given."""
    payload = dict(record["json"])
    if "text" in record:  # an error, or a record kept before results were kept once
        return str(record["text"]), payload
    if payload.get("typed"):
        return json.dumps(payload.get("result"), ensure_ascii=False), payload
    if "returncode" in payload:
        ok = payload["returncode"] == 0 and not payload.get("timed_out")
        value: Any = payload["stdout"] if ok else (payload["returncode"], payload["stdout"], payload["stderr"])
        ordered: dict[str, Any] = {}
        for key, item in payload.items():  # `result` where call_payload puts it: after `seconds`
            ordered[key] = item
            if key == "seconds":
                ordered["result"] = formatting.result_json(value)
        return formatting.result_text(value), ordered
    if "text" not in payload:
        payload["text"] = formatting.result_text(payload.get("result"))
    return str(payload["text"]), payload


def error_record(exc: ToolrunError) -> dict[str, Any]:
    kind = type(exc.original).__name__ if isinstance(exc, ToolFailed) else type(exc).__name__
    message = str(exc.original) if isinstance(exc, ToolFailed) else str(exc)
    text = caller_summary(exc)
    if isinstance(exc, SandboxUnavailable):
        message = text.split(": ", 1)[1]
    body: dict[str, Any] = {"error": message, "type": kind}
    if isinstance(exc, OutputInvalid):  # the text the tool printed stays available, as in the direct answer
        body["output"] = exc.output
        text = f"{text}\n\n{exc.output}"
    return {"status": exc.http_status, "text": text, "json": body, "exit_code": None}


def caller_summary(exc: ToolrunError) -> str:
    """An error's `Type: message` as a job's reader gets it: a SandboxUnavailable's short form (the reason, with
    toolrun's paths, goes to the server's log), else the summary."""
    if isinstance(exc, SandboxUnavailable):
        log.warning("%s", exc.summary)
        return exc.public
    return exc.summary


def sink_text(sink: Any) -> tuple[str, str, int]:
    """(head, tail, bytes seen) of one of the executor's output sinks, while the process still runs."""
    head = b"".join(sink.parts)
    tail = bytes(sink.tail)
    total = sink.size + len(tail) + sink.dropped
    whole = head + tail if not sink.dropped else b""
    if whole and len(whole) <= 2 * OUTPUT_PART:
        return whole.decode("utf-8", "replace"), "", total
    head_part = head[:OUTPUT_PART]
    tail_part = (head + tail)[-OUTPUT_PART:] if not sink.dropped else tail[-OUTPUT_PART:]
    return head_part.decode("utf-8", "replace"), tail_part.decode("utf-8", "replace"), total


class OutputWatch:
    """Handed to the executor (executor.OUTPUT_WATCH): the sinks of the process a job runs."""

    def __init__(self) -> None:
        self.sinks: tuple[Any, Any] | None = None

    def __call__(self, out: Any, err: Any) -> None:
        self.sinks = (out, err)

    def snapshot(self) -> dict[str, Any] | None:
        if self.sinks is None:
            return None
        out_head, out_tail, out_bytes = sink_text(self.sinks[0])
        err_head, err_tail, err_bytes = sink_text(self.sinks[1])
        return {
            "stdout_head": out_head,
            "stdout_tail": out_tail,
            "stdout_bytes": out_bytes,
            "stderr_head": err_head,
            "stderr_tail": err_tail,
            "stderr_bytes": err_bytes,
        }


class OutputDelta:
    """For an event stream: what a job printed since the stream's last event, per stream (stdout, stderr).

    A job's record keeps the head and the tail of its output (`OUTPUT_PART` bytes each) and how many bytes it
    printed: new bytes are read from the head, then the tail; what fell between them is counted as skipped."""

    def __init__(self) -> None:
        self.seen = {"stdout": 0, "stderr": 0}

    def step(self, output: Mapping[str, Any] | None) -> dict[str, Any] | None:
        if not output:
            return None
        delta: dict[str, Any] = {}
        for name, seen in self.seen.items():
            total = int(output.get(f"{name}_bytes") or 0)
            head = str(output.get(f"{name}_head") or "").encode()
            tail = str(output.get(f"{name}_tail") or "").encode()
            tail_start = total - len(tail) if tail else len(head)
            new = head[seen:] if seen < len(head) else b""
            skipped = max(0, tail_start - max(seen, len(head))) if tail else 0
            new += tail[max(0, seen - tail_start) :] if tail else b""
            delta[name] = new.decode("utf-8", "replace")
            delta[f"{name}_bytes"] = total
            if skipped:
                delta[f"{name}_skipped"] = skipped
            self.seen[name] = max(seen, total)
        return delta


def public_view(job: Job, identity: Identity) -> dict[str, Any]:
    """A job as its viewers see it: never the raw arguments (secrets), never the runner's internals; every text
    one UTF-8 can carry (shown_text)."""
    return dict(shown_text(_view(job, identity)))


def _view(job: Job, identity: Identity) -> dict[str, Any]:
    view: dict[str, Any] = {
        "job": job.id,
        "status": job.state,
        "tool": job.tool,
        "requester": job.requester.username or None,
        "requester_source": job.requester.source or None,
        "approvers": list(job.approvers),
        "args": dict(job.shown_args),
        "digest": job.digest,
        "created": job.created,
        "updated": job.updated,
        "expires_at": job.expires_at,
        "decided_by": job.decided_by,
        "reason": job.reason,
        "error": job.error,
        "can_decide": job.state == AWAITING and can_decide(identity, job),
    }
    if job.cancelled_by:  # a cancel asked while it ran (it may have ended otherwise first)
        view["cancelled_by"] = job.cancelled_by
        view["cancel_reason"] = job.cancel_reason
    if is_approver(identity, job) and job.plan is not None:
        view["plan"] = job.plan
    if job.output:  # so far while it runs; what it printed once it ended (its result holds the rest)
        view["output"] = job.output
    result = job.result
    if result is not None:
        text, payload = result_answer(result)
        view["result"] = {
            "status": result["status"],
            "content_type": "application/json" if job.as_json else "text/plain; charset=utf-8",
            "body": json.dumps(payload, ensure_ascii=False) if job.as_json else text,
            "exit_code": result["exit_code"],
        }
    return view
