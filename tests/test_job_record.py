"""The typed job (jobrecord.Job) and the record the state engines keep: every record the jobs write reads back as
a Job that writes the same record again, field for field and in the same order; a damaged record is no Job."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from support.catalogs import write_catalog
from toolrun import catalog as catalogs
from toolrun.jobrecord import Job, public_view
from toolrun.jobs import Jobs, memory_jobs
from toolrun.models import Identity
from toolrun.service import ToolService

CATALOG = """\
group: ops
tools:
  - name: wipe
    exec: echo wiped {{ target | quote }}
    params:
      - {name: target, type: str}
      - {name: token, type: str, secret: true, required: false}
    approval: required
    approvers: [oncall]
  - name: slow
    exec: sleep 5
    async: true
"""
ALICE = Identity(username="alice", groups=frozenset({"ops"}), anonymous=False, source="key", person="user:alice")
BOB = Identity(username="bob", groups=frozenset({"oncall"}), anonymous=False, source="key", person="user:bob")


def test_every_record_the_jobs_write_reads_back_as_the_same_record(tmp_path: Path) -> None:
    service = ToolService(catalogs.load([write_catalog(tmp_path, CATALOG)]))
    store = memory_jobs()
    jobs = Jobs(service, store)
    written: list[str] = []
    create, swap = store.create, store.swap

    async def kept_create(record: dict[str, Any]) -> None:
        written.append(json.dumps(record))
        await create(record)

    async def kept_swap(job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        written.append(json.dumps(record))
        return await swap(job_id, version, record, keep)

    store.create, store.swap = kept_create, kept_swap  # type: ignore[method-assign]

    async def scenario() -> None:
        job = await jobs.submit(ALICE, "ops.wipe", {"target": "db1", "token": "s3cret"}, hold=30)
        await jobs.approve(BOB, job.id, "ticket 7")  # approved, run, succeeded
        assert (await jobs.wait(ALICE, job.id, 10)).state == "succeeded"
        slow = await jobs.submit(ALICE, "ops.slow", {})
        await jobs.cancel(ALICE, slow.id, "enough")  # a cancel asked while it runs
        assert (await jobs.wait(ALICE, slow.id, 10)).state == "cancelled"
        waiting = await jobs.submit(ALICE, "ops.wipe", {"target": "db2"})
        assert (await jobs.withdraw(ALICE, waiting.id)).state == "cancelled"

    asyncio.run(scenario())
    fields = {name for text in written for name in json.loads(text)}
    assert {"runner_space", "started", "cancelled_by", "cancel_reason", "withdrawn"} <= fields  # every kind seen
    for text in written:
        job = Job.from_record(json.loads(text))
        assert job is not None
        assert json.dumps(job.to_record()) == text  # the same bytes: names, order and values
    ended = Job.from_record(json.loads(written[2]))
    assert ended is not None and ended.args == {"target": "db1"} and ended.salt is None  # the secret left


def test_a_damaged_record_is_no_job_and_an_old_one_still_reads() -> None:
    assert Job.from_record({"id": "x", "state": "running"}) is None
    assert Job.from_record(["not", "a", "record"]) is None
    old = {  # a record from before persons, catalogs and traces were kept
        "id": "j1",
        "tool": "ops.wipe",
        "state": "awaiting_approval",
        "requester": {"username": "alice", "anonymous": False},
        "approvers": ["oncall"],
        "shown_args": {"target": "db1"},
        "digest": "sha256:00",
        "created": 1.0,
        "updated": 1.0,
        "expires_at": None,
        "decided_by": None,
        "reason": None,
        "error": None,
    }
    job = Job.from_record(old)
    assert job is not None and job.requester.username == "alice" and job.catalog == ""
    view = public_view(job, BOB)
    assert (view["status"], view["requester"], view["can_decide"]) == ("awaiting_approval", "alice", True)


def test_a_page_goes_on_past_damaged_records(tmp_path: Path) -> None:
    """The store's batch is read as raw records: a batch of damaged ones still moves the list on to the good ones."""
    service = ToolService(catalogs.load([write_catalog(tmp_path, CATALOG)]))
    store = memory_jobs()
    jobs = Jobs(service, store)
    admin = Identity(username="root", groups=frozenset({"admin"}), anonymous=False, source="key", person="user:root")

    async def scenario() -> list[str]:
        mine = [await jobs.submit(ALICE, "ops.wipe", {"target": f"db{n}"}) for n in range(2)]
        for n in range(3):  # newer than both, so the first batch of a page of 2 holds only these
            await store.create({"id": f"damaged{n}", "state": "running", "created": mine[-1].created + 100 + n})
        page, cursor = await jobs.list(admin, limit=2)
        assert cursor is None
        return [job.id for job in page]

    ids = asyncio.run(scenario())
    assert len(ids) == 2 and not any(i.startswith("damaged") for i in ids)
