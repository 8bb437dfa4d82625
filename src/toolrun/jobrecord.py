"""A job's record as plain functions: what an approval binds (`digest`), who may see and decide
(`visible`, `is_approver`, `is_requester`), the result kept, the output so far, and the view shown
to a door (`public_view`). The state machine that changes records is jobs.py."""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from . import formatting
from .errors import OutputInvalid, SandboxUnavailable, ToolFailed, ToolrunError
from .models import CallResult, Identity, ToolSpec

log = logging.getLogger("toolrun.jobs")

AWAITING = "awaiting_approval"
RUNNING = "running"
FINAL = ("succeeded", "failed", "timed_out", "cancelled", "denied", "expired")
STATES = (AWAITING, RUNNING, *FINAL)
OUTPUT_PART = 4096  # bytes of the head and of the tail of a running job's output shown


def new_job_id() -> str:
    """16 random URL-safe characters (96 bits) that never start with `-`, so `toolrun jobs show ID` never reads
    an id as an option."""
    while (job_id := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return job_id


def digest(tool: ToolSpec, values: Mapping[str, Any]) -> str:
    """What an approval binds: the tool's definition (what runs and how) and the validated parameters."""
    definition = {
        "key": tool.key,
        "kind": tool.kind,
        "source": tool.source,
        "params": [p.entry() for p in tool.params],
        "stdin": tool.stdin,
        "timeout": tool.timeout,
        "cwd": tool.cwd,
        "env": tool.env,
        "env_passthrough": tool.env_passthrough,
        "limits": repr(tool.limits),
        "user": tool.user,
        "approvers": tool.approvers,
    }
    text = json.dumps({"tool": definition, "params": values}, sort_keys=True, default=str, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def identity_fields(identity: Identity) -> dict[str, Any]:
    return {
        "username": identity.username,
        "email": identity.email,
        "groups": sorted(identity.groups),
        "anonymous": identity.anonymous,
        "client": identity.client,
        "key_prefix": identity.key_prefix,
    }


def requester_identity(job: Mapping[str, Any]) -> Identity:
    r = job["requester"]
    return Identity(
        username=r["username"],
        email=r["email"],
        groups=frozenset(r["groups"]),
        anonymous=r["anonymous"],
        client=r["client"],
        key_prefix=r["key_prefix"],
    )


def is_requester(identity: Identity, job: Mapping[str, Any]) -> bool:
    """Whether `identity` asked for this job (jobs are only made for callers with an identity)."""
    r = job["requester"]
    if r["anonymous"] or identity.anonymous:
        return False
    return bool(identity.username == r["username"])


def is_approver(identity: Identity, job: Mapping[str, Any]) -> bool:
    if identity.anonymous:
        return False
    return identity.is_admin or not identity.groups.isdisjoint(job["approvers"])


def visible(identity: Identity, job: Mapping[str, Any]) -> bool:
    return is_requester(identity, job) or is_approver(identity, job)


def outcome_of(result: CallResult) -> str:
    ex = result.exec
    if ex is None or (ex.returncode == 0 and not ex.timed_out):
        return "succeeded"
    return "timed_out" if ex.timed_out else "failed"


def result_record(result: CallResult) -> dict[str, Any]:
    """The answer the synchronous POST /tools/{key} would have given, in both of its forms."""
    return {
        "status": 200,
        "text": formatting.answer_text(result),
        "json": formatting.call_payload(result),
        "exit_code": result.exec.returncode if result.exec is not None else None,
    }


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


def public_view(job: Mapping[str, Any], identity: Identity) -> dict[str, Any]:
    """A job as its viewers see it: never the raw arguments (secrets), never the runner's internals."""
    view: dict[str, Any] = {
        "job": job["id"],
        "status": job["state"],
        "tool": job["tool"],
        "requester": job["requester"]["username"] or None,
        "approvers": job["approvers"],
        "args": job["shown_args"],
        "digest": job["digest"],
        "created": job["created"],
        "updated": job["updated"],
        "expires_at": job["expires_at"],
        "decided_by": job["decided_by"],
        "reason": job["reason"],
        "error": job["error"],
        "can_decide": job["state"] == AWAITING and is_approver(identity, job) and not is_requester(identity, job),
    }
    if is_approver(identity, job) and job.get("plan") is not None:
        view["plan"] = job["plan"]
    if job.get("output"):  # so far while it runs; what it printed once it ended (its result holds the rest)
        view["output"] = job["output"]
    result = job.get("result")
    if result is not None:
        as_json = job.get("as_json")
        view["result"] = {
            "status": result["status"],
            "content_type": "application/json" if as_json else "text/plain; charset=utf-8",
            "body": json.dumps(result["json"], ensure_ascii=False) if as_json else result["text"],
            "exit_code": result["exit_code"],
        }
    return view
