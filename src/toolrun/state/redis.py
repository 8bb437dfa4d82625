"""The Redis engine: every kind of shared state for several `toolrun serve` replicas.

Selected by the `redis_url` setting. Layout (every key under ``toolrun:``; a deployment keeps its data
across upgrades, so these names and formats never change):

- ``toolrun:user:<name>`` hash (email, groups JSON, created_at); ``toolrun:users`` set of names
- ``toolrun:key:<prefix>`` hash (username, hash, created_at, expires_at, revoked_at);
  ``toolrun:keys`` sorted set of prefixes by creation time
- ``toolrun:rl:<bucket>:<tool>:<window>`` counters, INCR + PEXPIRE in one Lua script (atomic
  across replicas; windows aligned to the clock, so every replica agrees on them)
- ``toolrun:session:<sha256(user, session)>`` JSON of the session's values, 24 h TTL
- ``toolrun:mcp:<Mcp-Session-Id>`` the MCP session's owner (a handshake-era client's session), 24 h idle TTL
- ``toolrun:job:<id>`` hashes (``v``, ``data``, ``state``) and the ``toolrun:jobs`` sorted set of ids by creation
  time; a finished job's hash expires after the retention. Beside them, sorted sets of ids that count, page and
  sweep without reading every record: ``toolrun:jobs:state:<state>`` (by creation time),
  ``toolrun:jobs:live:<state>:<requester>`` (a requester's jobs awaiting approval and running),
  ``toolrun:jobs:by:<requester>`` and ``toolrun:jobs:approver:<group>`` (the jobs a caller may list, by creation),
  ``toolrun:jobs:expiry`` (awaiting approval, by deadline), ``toolrun:jobs:beat`` (running, by heartbeat) and
  ``toolrun:jobs:finished`` (by end time); ``toolrun:jobs:indexed`` says they were built for older records

Every store of one server shares one `RedisClients` (its connections). The server uses the asyncio
client with short socket timeouts, so a Redis that is down turns into a prompt `BackendUnavailable`
(503), never a hang; the CLI (`toolrun keys`) uses the sync client.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import time
from collections.abc import Mapping
from typing import Any

import redis
import redis.asyncio as aioredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry as SyncRetry

from ..errors import BackendUnavailable
from ..exec import pidcache
from ..keyrules import KeyRecord, NewKey, User, groups_for_new_key, hash_key, now, split_key, validate_user_fields
from .jobindex import before as is_before
from .jobindex import columns, sees
from .kinds import LIVE, Cursor, Versioned, Viewer

PREFIX = "toolrun:"
SESSION_TTL = 24 * 3600
TIMEOUT = 0.5
# Set a key's revocation time unless it stops working by then already (a revocation only ever comes sooner).
_REVOKE = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local cur = redis.call('HGET', KEYS[1], 'revoked_at')
if cur and cur ~= '' and tonumber(cur) <= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'revoked_at', ARGV[1])
return 1
"""
_INCR = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count
"""


def _unavailable(exc: Exception) -> BackendUnavailable:
    return BackendUnavailable(f"shared state (Redis) unavailable: {type(exc).__name__}")


def _f(value: Any) -> float | None:
    if value in (None, b"", ""):
        return None
    return float(value)


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")


class RedisClients:
    """The connections to one Redis (sync for the CLI, asyncio for the server), shared by the stores of a server."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._sync: redis.Redis | None = None
        self._async: aioredis.Redis | None = None
        self._pid = pidcache.pid()

    def sync(self) -> redis.Redis:
        if self._sync is None:
            self._sync = redis.Redis.from_url(
                self.url,
                socket_timeout=2.0,
                socket_connect_timeout=2.0,
                retry=SyncRetry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                retry_on_error=[redis.ConnectionError],
            )
        return self._sync

    def aio(self) -> aioredis.Redis:
        if self._async is None or self._pid != pidcache.pid():  # a forked worker opens its own connections
            # One quick retry on a connection error: after a Redis restart the pool's first
            # connection is stale, and that should not fail a request. Never on a timeout: a Redis
            # that hangs would double the wait, and a Redis that is only slow may still run the
            # first INCR, so a retried one would count a call twice.
            self._pid = pidcache.pid()
            self._async = aioredis.Redis.from_url(
                self.url,
                socket_timeout=TIMEOUT,
                socket_connect_timeout=TIMEOUT,
                retry=AsyncRetry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                retry_on_error=[redis.ConnectionError],
            )
        return self._async

    def ping(self) -> None:
        try:
            self.sync().ping()
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc

    async def aping(self) -> None:
        try:
            await self.aio().ping()
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc


ADD_KEY_TRIES = 20  # add_key's and set_groups' transactions, when other admins keep changing the user


class RedisKeyStore(RedisClients):
    """Users and keys (kinds.KeyStore); the store is also the connections the server's other stores share."""

    # sync API (CLI)
    def add_key(self, new: NewKey) -> None:
        groups, username = list(new.groups), new.record.username
        user_key = f"{PREFIX}user:{username}"
        try:
            # The user's groups are read, merged and written back in one transaction: another admin's change to the
            # user in between (its groups set, the user deleted) makes it start again from what that admin left, so
            # a new key never brings back a group that was taken away meanwhile.
            for _ in range(ADD_KEY_TRIES):
                with self.sync().pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(user_key)  # type: ignore[no-untyped-call]
                        existing = pipe.hgetall(user_key)
                        if existing:
                            current = json.loads(_s(existing.get(b"groups")) or "[]")
                            merged = groups_for_new_key(username, current, groups, new.set_groups)
                        else:
                            merged = sorted(set(groups))
                        pipe.multi()
                        self._write_key(pipe, new, existing, merged)
                        pipe.execute()
                        return
                    except redis.WatchError:
                        continue
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        raise BackendUnavailable(
            f"Redis: user {username!r} kept changing while a key was added ({ADD_KEY_TRIES} tries)"
        )

    @staticmethod
    def _write_key(pipe: Any, new: NewKey, existing: Mapping[Any, Any], merged: list[str]) -> None:
        """Queue in `pipe` (a transaction) the writes of `new` and its user (`existing`, with groups `merged`)."""
        record, email = new.record, new.email
        prefix, username, created, expires = record.prefix, record.username, record.created_at, record.expires_at
        user_key = f"{PREFIX}user:{username}"
        pipe.hset(
            user_key,
            mapping={
                "email": email or _s(existing.get(b"email")),
                "groups": json.dumps(merged),
                "created_at": _s(existing.get(b"created_at")) or repr(created),
            },
        )
        pipe.sadd(f"{PREFIX}users", username)
        pipe.hset(
            f"{PREFIX}key:{prefix}",
            mapping={
                "username": username,
                "hash": new.hash,
                "created_at": repr(created),
                "expires_at": "" if expires is None else repr(expires),
                "revoked_at": "",
            },
        )
        pipe.zadd(f"{PREFIX}keys", {prefix: created})

    def resolve(self, key: str) -> User | None:
        prefix = split_key(key)
        if prefix is None:
            return None
        try:
            record = self.sync().hgetall(f"{PREFIX}key:{prefix}")
            user = self.sync().hgetall(f"{PREFIX}user:{_s(record.get(b'username'))}") if record else {}
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        return self._check(key, record, user)

    def inspect(self, key: str) -> tuple[KeyRecord, User] | None:
        """The record and owner of `key` whatever its state (revoked and expired too); None if unknown."""
        prefix = split_key(key)
        if prefix is None:
            return None
        try:
            record = self.sync().hgetall(f"{PREFIX}key:{prefix}")
            user = self.sync().hgetall(f"{PREFIX}user:{_s(record.get(b'username'))}") if record else {}
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        if not record or not user or not hmac.compare_digest(_s(record.get(b"hash")), hash_key(key)):
            return None
        return self._record(prefix, record), self._user(_s(record.get(b"username")), user)

    def revoke(self, prefix: str, at: float | None = None) -> bool:
        """Revoke now, or at `at`; False when the key is unknown or stops working by then already. One script:
        a revocation now and a rotation's later one racing (read, then write) brought a revoked key back."""
        try:
            moment = now()
            when = moment if at is None else max(at, moment)
            return bool(self.sync().eval(_REVOKE, 1, f"{PREFIX}key:{prefix}", repr(when)))
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc

    def get_user(self, username: str) -> User | None:
        try:
            data = self.sync().hgetall(f"{PREFIX}user:{username}")
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        return self._user(username, data) if data else None

    def set_groups(self, username: str, groups: list[str]) -> bool:
        validate_user_fields(username, groups)
        name = f"{PREFIX}user:{username}"
        try:
            # One transaction: a user deleted between the check and the write would come back as a user with groups
            # and nothing else (whose groups the next `keys create` of that name keeps).
            for _ in range(ADD_KEY_TRIES):
                with self.sync().pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(name)  # type: ignore[no-untyped-call]
                        if not pipe.exists(name):
                            return False
                        pipe.multi()
                        pipe.hset(name, "groups", json.dumps(sorted(set(groups))))
                        pipe.execute()
                        return True
                    except redis.WatchError:
                        continue
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        raise BackendUnavailable(f"Redis: user {username!r} kept changing while its groups were set")

    def delete_user(self, username: str) -> int | None:
        """Revoke every key of `username` and delete the user, in one transaction (started again when the user or
        the keys changed meanwhile): a key another admin added in between was left active, and served the next user
        made under that name. How many keys were revoked; None when there is no such user."""
        name, keys = f"{PREFIX}user:{username}", f"{PREFIX}keys"
        try:
            for _ in range(ADD_KEY_TRIES):
                with self.sync().pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(name, keys)  # type: ignore[no-untyped-call]
                        if not pipe.exists(name):
                            return None
                        prefixes = [_s(p) for p in pipe.zrange(keys, 0, -1)]
                        records = [self._record(p, pipe.hgetall(f"{PREFIX}key:{p}")) for p in prefixes]
                        mine = [r for r in records if r.username == username and r.state() != "revoked"]
                        pipe.multi()
                        moment = repr(now())
                        for record in mine:
                            pipe.hset(f"{PREFIX}key:{record.prefix}", "revoked_at", moment)
                        pipe.delete(name)
                        pipe.srem(f"{PREFIX}users", username)
                        pipe.execute()
                        return len(mine)
                    except redis.WatchError:
                        continue
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc
        raise BackendUnavailable(f"Redis: user {username!r} kept changing while it was deleted")

    def list_users(self) -> list[User]:
        r = self.sync()
        try:
            names = sorted(_s(n) for n in r.smembers(f"{PREFIX}users"))
            return [self._user(name, r.hgetall(f"{PREFIX}user:{name}")) for name in names]
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc

    def list_keys(self) -> list[KeyRecord]:
        r = self.sync()
        try:
            prefixes = [_s(p) for p in r.zrange(f"{PREFIX}keys", 0, -1)]
            return [self._record(p, r.hgetall(f"{PREFIX}key:{p}")) for p in prefixes]
        except redis.RedisError as exc:
            raise _unavailable(exc) from exc

    # async API (server)
    async def aresolve(self, key: str) -> User | None:
        prefix = split_key(key)
        if prefix is None:
            return None
        r = self.aio()
        try:
            record = await r.hgetall(f"{PREFIX}key:{prefix}")
            user = await r.hgetall(f"{PREFIX}user:{_s(record.get(b'username'))}") if record else {}
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return self._check(key, record, user)

    async def alist_users(self) -> list[User]:
        r = self.aio()
        try:
            names = sorted(_s(n) for n in await r.smembers(f"{PREFIX}users"))
            return [self._user(name, await r.hgetall(f"{PREFIX}user:{name}")) for name in names]
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def alist_keys(self) -> list[KeyRecord]:
        r = self.aio()
        try:
            prefixes = [_s(p) for p in await r.zrange(f"{PREFIX}keys", 0, -1)]
            return [self._record(p, await r.hgetall(f"{PREFIX}key:{p}")) for p in prefixes]
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    # records
    def _check(self, key: str, record: Mapping[Any, Any], user: Mapping[Any, Any]) -> User | None:
        if not record or not user:
            hmac.compare_digest(hash_key(key), hash_key(key))
            return None
        if not hmac.compare_digest(_s(record.get(b"hash")), hash_key(key)):
            return None
        expires, revoked = _f(record.get(b"expires_at")), _f(record.get(b"revoked_at"))
        at = now()
        if (revoked is not None and revoked <= at) or (expires is not None and expires <= at):
            return None
        return self._user(_s(record.get(b"username")), user)

    @staticmethod
    def _user(name: str, data: Mapping[Any, Any]) -> User:
        return User(
            name,
            _s(data.get(b"email")),
            tuple(json.loads(_s(data.get(b"groups")) or "[]")),
            _f(data.get(b"created_at")) or 0.0,
        )

    @staticmethod
    def _record(prefix: str, data: Mapping[Any, Any]) -> KeyRecord:
        return KeyRecord(
            prefix,
            _s(data.get(b"username")),
            _f(data.get(b"created_at")) or 0.0,
            _f(data.get(b"expires_at")),
            _f(data.get(b"revoked_at")),
        )


class RedisLimiter:
    """Fixed windows (kinds.Limiter) aligned to the clock; one atomic INCR+PEXPIRE per call."""

    def __init__(self, store: RedisClients, calls: int, window: float, fail_open: bool = False) -> None:
        self.store = store
        self.calls = calls
        self.window = window
        self.fail_open = fail_open
        self._script: Any = None

    async def hit(self, bucket: str, key: str) -> float | None:
        at = time.time()
        index = int(at // self.window)
        name = f"{PREFIX}rl:{bucket}:{key}:{index}"
        try:
            if self._script is None:
                self._script = self.store.aio().register_script(_INCR)
            count = int(await self._script(keys=[name], args=[int(self.window * 1000) + 1000]))
        except (redis.RedisError, OSError) as exc:
            if self.fail_open:
                return None
            raise _unavailable(exc) from exc
        if count <= self.calls:
            return None
        return float(max(1, math.ceil((index + 1) * self.window - at)))

    async def peek(self, bucket: str, key: str) -> tuple[int, float]:
        """(calls counted in the current window, seconds until it resets), counting nothing."""
        at = time.time()
        index = int(at // self.window)
        try:
            raw = await self.store.aio().get(f"{PREFIX}rl:{bucket}:{key}:{index}")
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return int(raw or 0), (index + 1) * self.window - at


class RedisSessions:
    """Session values of fn tools (kinds.SessionStore), 24 h after their last save."""

    def __init__(self, store: RedisClients) -> None:
        self.store = store

    @staticmethod
    def _name(sid: str) -> str:
        return f"{PREFIX}session:{hashlib.sha256(sid.encode('utf-8', 'surrogatepass')).hexdigest()}"

    async def load(self, sid: str) -> dict[str, Any]:
        try:
            raw = await self.store.aio().get(self._name(sid))
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        if not raw:
            return {}
        value = json.loads(raw)
        return value if isinstance(value, dict) else {}

    async def save(self, sid: str, values: dict[str, Any]) -> None:
        try:
            await self.store.aio().set(self._name(sid), json.dumps(values, default=str), ex=SESSION_TTL)
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def ping(self) -> None:
        await self.store.aping()


class RedisMcpSessions:
    """MCP sessions (kinds.McpSessionStore): every replica knows every `Mcp-Session-Id` and its owner."""

    def __init__(self, store: RedisClients, ttl: int = SESSION_TTL) -> None:
        self.store = store
        self.ttl = ttl

    @staticmethod
    def _name(sid: str) -> str:
        return f"{PREFIX}mcp:{sid}"

    async def open(self, sid: str, owner: str) -> None:
        try:
            await self.store.aio().set(self._name(sid), owner, ex=self.ttl)
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def owner(self, sid: str) -> str | None:
        """The session's owner, or None when it does not exist; using a session restarts its idle clock."""
        try:
            raw = await self.store.aio().getex(self._name(sid), ex=self.ttl)
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc
        return None if raw is None else _s(raw)

    async def close(self, sid: str) -> None:
        try:
            await self.store.aio().delete(self._name(sid))
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc


_PUT = """
local cur = redis.call('HGET', KEYS[1], 'v')
if ARGV[1] == '' then
  if cur then return 0 end
elseif cur ~= ARGV[1] then return 0 end
local p, id, state, created, user = ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[12]
local old = redis.call('HGET', KEYS[1], 'state')
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'data', ARGV[3], 'state', state)
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
if ARGV[1] == '' then redis.call('ZADD', p .. 'jobs', created, id) end
if old ~= state then
  if old then
    redis.call('ZREM', p .. 'jobs:state:' .. old, id)
    redis.call('ZREM', p .. 'jobs:live:' .. old .. ':' .. user, id)
  end
  redis.call('ZADD', p .. 'jobs:state:' .. state, created, id)
  if state == 'awaiting_approval' or state == 'running' then
    redis.call('ZADD', p .. 'jobs:live:' .. state .. ':' .. user, created, id)
  end
  redis.call('ZADD', p .. 'jobs:by:' .. user, created, id)
  for i = 13, #ARGV do redis.call('ZADD', p .. 'jobs:approver:' .. ARGV[i], created, id) end
end
if state == 'awaiting_approval' and ARGV[9] ~= '' then
  redis.call('ZADD', p .. 'jobs:expiry', ARGV[9], id)
else
  redis.call('ZREM', p .. 'jobs:expiry', id)
end
if state == 'running' then
  redis.call('ZADD', p .. 'jobs:beat', ARGV[10] ~= '' and ARGV[10] or 0, id)
else
  redis.call('ZREM', p .. 'jobs:beat', id)
end
if ARGV[11] ~= '' then redis.call('ZADD', p .. 'jobs:finished', ARGV[11], id) end
return 1
"""


def _arg(value: Any) -> str:
    return "" if value is None else repr(float(value))


class RedisJobStore:
    """Jobs (kinds.JobStore) in Redis, next to the keys; every write keeps the sorted sets of the layout (above)
    in step with the record, in one script (atomic for every replica)."""

    BATCH = 200  # ids read at once while paging

    def __init__(self, store: RedisClients) -> None:
        self.store = store
        self._script: Any = None
        self._indexed = False

    @staticmethod
    def _name(job_id: str) -> str:
        return f"{PREFIX}job:{job_id}"

    async def _do(self, op: Any) -> Any:
        try:
            return await op(self.store.aio())
        except (redis.RedisError, OSError) as exc:
            raise _unavailable(exc) from exc

    async def _put(self, record: dict[str, Any], expect: str, new: int, keep: float | None) -> bool:
        c = columns(record)
        # The hash outlives the retention by a minute, so that the sweep's purge still reads whose it was.
        expire = 0 if keep is None else max(1, int(keep * 1000)) + 60_000
        args = [expect, str(new), json.dumps(record), expire, PREFIX, record["id"], c["state"] or "unknown"]
        args += [repr(c["created"]), _arg(c["expires_at"]), _arg(c["heartbeat"]), _arg(c["finished"])]
        args += [c["requester"] or "", *(str(g) for g in c["approvers"])]

        async def op(r: Any) -> int:
            if self._script is None:
                self._script = r.register_script(_PUT)
            return int(await self._script(keys=[self._name(record["id"])], args=args))

        return bool(await self._do(op))

    async def _ready(self) -> None:
        """Build the sorted sets for records written before them (once per deployment, by whoever comes first)."""
        if self._indexed:
            return
        self._indexed = True
        if not await self._do(lambda r: r.set(f"{PREFIX}jobs:indexed", "1", nx=True)):
            return
        ids = [i.decode() for i in await self._do(lambda r: r.zrange(f"{PREFIX}jobs", 0, -1))]
        for job_id in ids:
            entry = await self.get(job_id)
            if entry is not None:
                await self._put(entry[1], str(entry[0]), entry[0], None)

    async def create(self, record: dict[str, Any]) -> None:
        await self._ready()
        await self._put(record, "", 1, None)

    async def get(self, job_id: str) -> Versioned | None:
        raw = await self._do(lambda r: r.hmget(self._name(job_id), "v", "data"))
        if not raw or raw[1] is None:
            return None
        return int(raw[0]), json.loads(raw[1])

    async def _many(self, ids: list[str]) -> list[Versioned | None]:
        async def op(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for job_id in ids:
                pipe.hmget(self._name(job_id), "v", "data")
            return list(await pipe.execute())

        rows = await self._do(op) if ids else []
        return [None if row[1] is None else (int(row[0]), json.loads(row[1])) for row in rows]

    async def swap(self, job_id: str, version: int, record: dict[str, Any], keep: float | None = None) -> bool:
        await self._ready()
        return await self._put(record, str(version), version + 1, keep)

    async def all(self) -> list[Versioned]:
        ids = [i.decode() for i in await self._do(lambda r: r.zrange(f"{PREFIX}jobs", 0, -1))]
        entries = await self._many(ids)
        gone = [job_id for job_id, entry in zip(ids, entries, strict=True) if entry is None]
        if gone:
            await self._forget(gone)  # expired after their retention
        return [entry for entry in entries if entry is not None]

    async def _forget(
        self, ids: list[str], records: list[dict[str, Any]] | None = None, extra: list[str] | None = None
    ) -> None:
        """Drop these ids from every sorted set (their hashes too): the global ones, those `records` name, and
        the `extra` keys."""

        async def op(r: Any) -> None:
            pipe = r.pipeline(transaction=False)
            for key in extra or ():
                pipe.zrem(key, *ids)
            for name in ("jobs", "jobs:expiry", "jobs:beat", "jobs:finished"):
                pipe.zrem(f"{PREFIX}{name}", *ids)
            for state in ("unknown", *LIVE, "succeeded", "failed", "timed_out", "cancelled", "denied", "expired"):
                pipe.zrem(f"{PREFIX}jobs:state:{state}", *ids)
            for record in records or ():
                c = columns(record)
                if c["state"] in LIVE:
                    pipe.zrem(f"{PREFIX}jobs:live:{c['state']}:{c['requester'] or ''}", record["id"])
                pipe.zrem(f"{PREFIX}jobs:by:{c['requester'] or ''}", record["id"])
                for group in c["approvers"]:
                    pipe.zrem(f"{PREFIX}jobs:approver:{group}", record["id"])
            pipe.delete(*(self._name(i) for i in ids))
            await pipe.execute()

        await self._do(op)

    async def delete(self, job_id: str) -> None:
        entry = await self.get(job_id)
        await self._forget([job_id], [entry[1]] if entry is not None else None)

    async def page(
        self, *, state: str | None, viewer: Viewer | None, before: Cursor | None, limit: int
    ) -> list[Versioned]:
        await self._ready()
        if viewer is not None:
            return await self._viewer_page(viewer, state, before, limit)
        key = f"{PREFIX}jobs:state:{state}" if state is not None else f"{PREFIX}jobs"
        top = "+inf" if before is None else repr(before[0])
        out: list[Versioned] = []
        offset, grow = 0, 1
        while len(out) < limit:
            # As many ids as the page still needs (only the records returned are read), more each round while a
            # viewer's filter leaves some out.
            num = min(self.BATCH, (limit - len(out)) * grow)
            grow *= 2
            batch = await self._do(
                lambda r, o=offset, n=num: r.zrevrangebyscore(key, top, "-inf", start=o, num=n, withscores=True)
            )
            if not batch:
                break
            offset += len(batch)
            ids = [(i.decode(), score) for i, score in batch if is_before(before, score, i.decode())]
            entries = await self._many([i for i, _ in ids])
            gone = [i for (i, _), entry in zip(ids, entries, strict=True) if entry is None]
            if gone:
                await self._forget(gone)
                offset -= len(gone)
            for entry in entries:
                if entry is not None and (state is None or entry[1].get("state") == state) and sees(viewer, entry[1]):
                    out.append(entry)
        return out[:limit]

    async def _viewer_page(
        self, viewer: Viewer, state: str | None, before: Cursor | None, limit: int
    ) -> list[Versioned]:
        """A page of the jobs `viewer` asked for or approves: merged from its own sorted sets (`jobs:by:<name>`,
        `jobs:approver:<group>`), never from every job's."""
        keys = [f"{PREFIX}jobs:by:{viewer.person}", *(f"{PREFIX}jobs:approver:{g}" for g in sorted(viewer.groups))]
        out: list[Versioned] = []
        cursor = before
        while len(out) < limit:
            want = limit - len(out) + 1
            ids = await self._newest(keys, cursor, want)
            entries = await self._many([job_id for _, job_id in ids])
            gone = [job_id for (_, job_id), entry in zip(ids, entries, strict=True) if entry is None]
            if gone:
                await self._forget(gone, extra=keys)
            out += [e for e in entries if e is not None and (state is None or e[1].get("state") == state)]
            if len(ids) < want:
                break
            cursor = ids[-1]
        return out[:limit]

    async def _newest(self, keys: list[str], before: Cursor | None, n: int) -> list[tuple[float, str]]:
        """The `n` newest (created, id) in the union of `keys` that come after `before` (newest first): each key's
        own `n` newest are enough (plus those that tie with the cursor's time and are skipped)."""
        top = "+inf" if before is None else repr(before[0])

        async def op(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for key in keys:
                pipe.zcount(key, top, top)
            ties = await pipe.execute() if before is not None else [0] * len(keys)
            pipe = r.pipeline(transaction=False)
            for key, tied in zip(keys, ties, strict=True):
                pipe.zrevrangebyscore(key, top, "-inf", start=0, num=n + int(tied), withscores=True)
            return list(await pipe.execute())

        ranges = await self._do(op)
        merged = {(float(score), raw.decode()) for rows in ranges for raw, score in rows}
        return sorted((c for c in merged if is_before(before, *c)), reverse=True)[:n]

    async def counts(self) -> dict[str, int]:
        await self._ready()
        states = ("unknown", *LIVE, "succeeded", "failed", "timed_out", "cancelled", "denied", "expired")

        async def op(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for state in states:
                pipe.zcard(f"{PREFIX}jobs:state:{state}")
            return list(await pipe.execute())

        return {state: int(n) for state, n in zip(states, await self._do(op), strict=True) if n}

    async def live(self, requester: str) -> dict[str, int]:
        await self._ready()

        async def op(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            for state in LIVE:
                pipe.zcard(f"{PREFIX}jobs:live:{state}:{requester}")
            return list(await pipe.execute())

        return {state: int(n) for state, n in zip(LIVE, await self._do(op), strict=True)}

    async def due(self, moment: float, beat_before: float) -> list[Versioned]:
        await self._ready()

        async def op(r: Any) -> list[Any]:
            pipe = r.pipeline(transaction=False)
            pipe.zrangebyscore(f"{PREFIX}jobs:expiry", "-inf", repr(moment))
            pipe.zrangebyscore(f"{PREFIX}jobs:beat", "-inf", f"({beat_before!r}")
            return list(await pipe.execute())

        expiring, stale = await self._do(op)
        ids = [i.decode() for i in (*expiring, *stale)]
        return [entry for entry in await self._many(ids) if entry is not None]

    async def purge(self, finished_before: float) -> int:
        """Redis frees a dropped record's memory itself; the hash may have expired already (its retention)."""
        name = f"{PREFIX}jobs:finished"
        ids = [i.decode() for i in await self._do(lambda r: r.zrangebyscore(name, "-inf", f"({finished_before!r}"))]
        if ids:
            records = [entry[1] for entry in await self._many(ids) if entry is not None]
            await self._forget(ids, records)
        return len(ids)
