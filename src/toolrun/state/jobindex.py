"""What every job engine keeps beside a job's record to count, page and sweep without reading every record:
its state, requester, tool, approvers, creation time and deadlines (`columns`), and the two filters of a page
(`sees`, `before`), said once for the engines that filter in Python (memory, Redis)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .kinds import Cursor, Viewer


def columns(record: Mapping[str, Any]) -> dict[str, Any]:
    """The indexed fields of a record (a record may lack any: an old one, or a test's)."""
    requester = record.get("requester") or {}
    deadlines = [t for t in (record.get("expires_at"), record.get("hold_until")) if isinstance(t, int | float)]
    return {
        "state": record.get("state"),
        # the person (jobrecord.is_requester compares persons): "user:alice", "token:...", "operator:..."
        "requester": (requester.get("person") or None) if isinstance(requester, Mapping) else None,
        "tool": record.get("tool"),
        "approvers": list(record.get("approvers") or ()),
        "created": float(record.get("created") or 0.0),
        # the first of the approval deadline and the waiting requester's hold: when the sweep must look at it
        "expires_at": min(deadlines) if deadlines else None,
        "heartbeat": record.get("heartbeat"),
        "finished": record.get("finished"),
    }


def sees(viewer: Viewer | None, record: Mapping[str, Any]) -> bool:
    """Whether a page for `viewer` keeps this record: its requester (the same person), or one of the viewer's groups
    approves it (jobs.py then applies the full rule, jobrecord.visible, to what the store gave)."""
    if viewer is None:
        return True
    cols = columns(record)
    return (bool(viewer.person) and cols["requester"] == viewer.person) or not viewer.groups.isdisjoint(
        cols["approvers"]
    )


def before(cursor: Cursor | None, created: float, job_id: str) -> bool:
    """Whether a job created at `created` with id `job_id` comes after `cursor` in newest-first order."""
    return cursor is None or (created, job_id) < cursor
