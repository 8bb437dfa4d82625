"""Redis down when `toolrun serve` starts (issue 11.5), with a real redis-server started late.

The server starts anyway: /healthz 200, /readyz 503, a keyed call 503 with Retry-After (as during
an outage mid-traffic); once Redis answers, everything recovers without a restart.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from support.binaries import require_binary
from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import RedisServer, ToolrunServer, free_port, wait_until

CATALOG = """
version: 1
group: ops
tools:
  - name: echo
    public: true
    exec: printf hi
  - name: private
    exec: printf secret-tool
"""
FAKE_KEY = "trk_abcdefghij_" + "x" * 43


def test_serve_starts_without_redis_and_recovers_when_it_comes(tmp_path: Path) -> None:
    binary = require_binary("redis-server")
    port = free_port()
    redis = RedisServer(tmp_path / "redis", binary, port=port)
    catalog = write_catalog(tmp_path, CATALOG)
    settings = {"SVC_REDIS_URL": redis.url, "SVC_RATE_LIMIT_ENABLED": "true", "SVC_RATE_LIMIT_FAIL_OPEN": "false"}
    with ToolrunServer(tmp_path / "srv", catalog, settings).start() as server, redis:
        url = server.url
        assert httpx.get(url + "/healthz").status_code == 200
        ready = httpx.get(url + "/readyz")
        assert (ready.status_code, ready.json()) == (503, {"status": "degraded"})
        keyed = httpx.post(url + "/tools/ops.private", json={}, headers={"X-API-Key": FAKE_KEY})
        assert keyed.status_code == 503 and keyed.headers["retry-after"] == "1"
        assert "Traceback" not in keyed.text
        assert httpx.get(url + "/whoami", headers={"X-API-Key": FAKE_KEY}).status_code == 503
        assert server.alive()

        redis.start()
        key = create_key(server.env, "alice", "ops")
        wait_until(lambda: httpx.get(url + "/readyz").status_code == 200, 15, "/readyz once Redis answers")
        answer = httpx.post(url + "/tools/ops.private", json={}, headers={"X-API-Key": key})
        assert (answer.status_code, answer.text) == (200, "secret-tool")
        assert httpx.post(url + "/tools/ops.echo", json={}).text == "hi"
        assert httpx.post(url + "/tools/ops.private", json={}, headers={"X-API-Key": FAKE_KEY}).status_code == 401
