"""Where job records live (jobs.py): one store per engine, one small protocol.

Each record is a JSON object with a version number; a change is a compare-and-set on that
version, so two workers or replicas acting on one job at once (two approvers, an approval and a
reload) cannot both win: the loser reads the record again and finds it decided.

- `MemoryJobStore`: this process only (tests, and a CLI with nothing to share).
- `SQLiteJobStore`: the state file of the data dir (sqlite_state.py), shared by the workers of a
  server and by the local CLI (`toolrun jobs`); it survives a restart.
- `RedisJobStore`: ``toolrun:job:<id>`` hashes (``v``, ``data``) and the ``toolrun:jobs`` sorted set of
  ids by creation time, for replicas; a finished job's hash expires after the retention.
"""

from __future__ import annotations

import json
import time
from typing import Any, Protocol

from .errors import BackendUnavailable

Versioned = tuple[int, dict[str, Any]]


class JobStore(Protocol):
    async def create(self, record: dict[str, Any]) -> None: ...

    async def get(self, job_id: str) -> Versioned | None: ...

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool: ...

    async def all(self) -> list[Versioned]: ...

    async def delete(self, job_id: str) -> None: ...


class MemoryJobStore:
    def __init__(self) -> None:
        self._data: dict[str, Versioned] = {}

    async def create(self, record: dict[str, Any]) -> None:
        self._data[record["id"]] = (1, json.loads(json.dumps(record)))

    async def get(self, job_id: str) -> Versioned | None:
        entry = self._data.get(job_id)
        return None if entry is None else (entry[0], json.loads(json.dumps(entry[1])))

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        entry = self._data.get(job_id)
        if entry is None or entry[0] != version:
            return False
        self._data[job_id] = (version + 1, json.loads(json.dumps(record)))
        return True

    async def all(self) -> list[Versioned]:
        return [(v, json.loads(json.dumps(r))) for v, r in self._data.values()]

    async def delete(self, job_id: str) -> None:
        self._data.pop(job_id, None)


_SCHEMA = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY, v INTEGER NOT NULL, created REAL NOT NULL, data TEXT NOT NULL)"""


class SQLiteJobStore:
    """Jobs in the shared state file; each operation is one statement (atomic across processes)."""

    def __init__(self, state: Any) -> None:
        self.state = state  # sqlite_state.SQLiteState
        state.conn().execute(_SCHEMA)

    async def create(self, record: dict[str, Any]) -> None:
        self.state.conn().execute(
            "INSERT INTO jobs(id, v, created, data) VALUES (?, 1, ?, ?)",
            (record["id"], record["created"], json.dumps(record)),
        )

    async def get(self, job_id: str) -> Versioned | None:
        row = self.state.conn().execute("SELECT v, data FROM jobs WHERE id=?", (job_id,)).fetchone()
        return None if row is None else (int(row[0]), json.loads(row[1]))

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        cursor = self.state.conn().execute(
            "UPDATE jobs SET v = v + 1, data = ? WHERE id = ? AND v = ?", (json.dumps(record), job_id, version)
        )
        return bool(cursor.rowcount == 1)

    async def all(self) -> list[Versioned]:
        rows = self.state.conn().execute("SELECT v, data FROM jobs ORDER BY created").fetchall()
        return [(int(v), json.loads(data)) for v, data in rows]

    async def delete(self, job_id: str) -> None:
        self.state.conn().execute("DELETE FROM jobs WHERE id=?", (job_id,))


_SWAP = """
if redis.call('HGET', KEYS[1], 'v') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'data', ARGV[3])
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return 1
"""
PREFIX = "toolrun:"


class RedisJobStore:
    """Jobs in Redis, next to the keys (redis_store.RedisKeyStore gives the connections)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._script: Any = None

    @staticmethod
    def _name(job_id: str) -> str:
        return f"{PREFIX}job:{job_id}"

    async def _do(self, op: Any) -> Any:
        import redis

        try:
            return await op(self.store.aio())
        except (redis.RedisError, OSError) as exc:
            raise BackendUnavailable(f"shared state (Redis) unavailable: {type(exc).__name__}") from exc

    async def create(self, record: dict[str, Any]) -> None:
        async def op(r: Any) -> None:
            pipe = r.pipeline(transaction=True)
            pipe.hset(self._name(record["id"]), mapping={"v": "1", "data": json.dumps(record)})
            pipe.zadd(f"{PREFIX}jobs", {record["id"]: record["created"]})
            await pipe.execute()

        await self._do(op)

    async def get(self, job_id: str) -> Versioned | None:
        raw = await self._do(lambda r: r.hgetall(self._name(job_id)))
        if not raw or b"data" not in raw:
            return None
        return int(raw[b"v"]), json.loads(raw[b"data"])

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        async def op(r: Any) -> int:
            if self._script is None:
                self._script = r.register_script(_SWAP)
            expire = 0 if keep is None else max(1, int(keep * 1000))
            args = [str(version), str(version + 1), json.dumps(record), expire]
            return int(await self._script(keys=[self._name(job_id)], args=args))

        return bool(await self._do(op))

    async def all(self) -> list[Versioned]:
        ids = [i.decode() for i in await self._do(lambda r: r.zrange(f"{PREFIX}jobs", 0, -1))]
        out: list[Versioned] = []
        gone: list[str] = []
        for job_id in ids:
            entry = await self.get(job_id)
            if entry is None:
                gone.append(job_id)  # expired after its retention
            else:
                out.append(entry)
        if gone:
            await self._do(lambda r: r.zrem(f"{PREFIX}jobs", *gone))
        return out

    async def delete(self, job_id: str) -> None:
        async def op(r: Any) -> None:
            await r.delete(self._name(job_id))
            await r.zrem(f"{PREFIX}jobs", job_id)

        await self._do(op)


def job_store(settings: Any, access: Any = None) -> JobStore:
    """Redis with `redis_url` (next to the keys), else the state file of the data dir: jobs outlive a restart
    and every worker, and the local `toolrun jobs`, see the same ones."""
    if settings.redis_url:
        store = access.store if access is not None and hasattr(access.store, "aio") else None
        if store is None:
            from .redis_store import RedisKeyStore

            store = RedisKeyStore(settings.redis_url)
        return RedisJobStore(store)
    from .sqlite_state import shared_state_file

    return SQLiteJobStore(shared_state_file(settings))


def now() -> float:
    return time.time()
