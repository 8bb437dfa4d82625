"""Hot reload of the catalog on a real `toolrun serve` (issue 11.3): the hash poll, SIGHUP and
`POST /admin/reload`; a broken catalog keeps the old one serving, logs `file:line:col`, counts the
failure and turns /readyz to 503; calls in flight finish on their catalog; MCP clients of the
handshake era are sent `notifications/tools/list_changed`.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from support.catalogs import write_catalog
from support.keys import create_key
from support.mcp import RELOADING, mcp_stdio, text_of
from support.servers import ToolrunServer, wait_until

V1 = """
version: 1
group: ops
tools:
  - name: one
    public: true
    exec: printf one
  - name: slow
    public: true
    exec: sleep 1; printf v1
"""
V2 = (
    V1.replace("sleep 1; printf v1", "printf v2")
    + """
  - name: two
    public: true
    exec: printf two
"""
)
BROKEN = (
    V2
    + """
  - name: three
    public: true
    exec: printf {{ nope }}
"""
)
NOPE_LINE = BROKEN.splitlines().index("    exec: printf {{ nope }}") + 1


def reloads(url: str) -> dict[str, float]:
    text = httpx.get(url + "/metrics").text
    found = {}
    for line in text.splitlines():
        if line.startswith("svc_catalog_reloads_total{"):
            outcome = line.split('outcome="', 1)[1].split('"', 1)[0]
            found[outcome] = float(line.rsplit(" ", 1)[1])
    return found


def status(url: str, key: str) -> int:
    return httpx.post(f"{url}/tools/{key}", json={}).status_code


@pytest.fixture
def polled(tmp_path: Path) -> Iterator[tuple[ToolrunServer, Path]]:
    catalog = write_catalog(tmp_path, V1)
    with ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0.2", "SVC_WORKERS": "1"}).start() as server:
        yield server, catalog


def replace_text(path: Path, text: str) -> None:
    """Write `path` as an editor that saves atomically does: a new file renamed over the old one."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_text(text, encoding="utf-8")
    fresh.replace(path)


def test_an_edited_catalog_is_picked_up_by_the_poll_and_a_broken_one_keeps_the_old(
    polled: tuple[ToolrunServer, Path],
) -> None:
    server, catalog = polled
    assert status(server.url, "ops.two") == 404
    assert reloads(server.url) == {"ok": 0.0, "error": 0.0}

    replace_text(catalog, V2)
    wait_until(lambda: status(server.url, "ops.two") == 200, 10, "the new tool")
    assert httpx.post(server.url + "/tools/ops.slow", json={}).text == "v2"
    assert reloads(server.url)["ok"] == 1.0
    assert httpx.get(server.url + "/readyz").status_code == 200

    replace_text(catalog, BROKEN)
    wait_until(lambda: reloads(server.url)["error"] == 1.0, 10, "the failed reload")
    assert status(server.url, "ops.two") == 200  # the previous catalog still serves
    assert status(server.url, "ops.three") == 404
    ready = httpx.get(server.url + "/readyz")
    assert (ready.status_code, ready.json()) == (503, {"status": "degraded"})
    log = server.log()
    assert f"{catalog}:{NOPE_LINE}:" in log and "nope" in log and "still serving the previous catalog" in log
    time.sleep(0.6)
    assert reloads(server.url)["error"] == 1.0  # the same broken files are not retried on every poll

    replace_text(catalog, V1)
    wait_until(lambda: status(server.url, "ops.two") == 404, 10, "the tool removed")
    assert httpx.get(server.url + "/readyz").status_code == 200
    assert reloads(server.url) == {"ok": 2.0, "error": 1.0}


def test_sighup_reloads_without_stopping_and_admin_reload_answers_with_the_outcome(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, V1)
    server = ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0", "SVC_WORKERS": "1"})
    admin = create_key(server.env, "root", "admin")
    user = create_key(server.env, "alice", "ops")
    with server.start():
        catalog.write_text(V2)
        time.sleep(0.5)
        assert status(server.url, "ops.two") == 404  # no poll: nothing happens by itself

        server.send(signal.SIGHUP)
        wait_until(lambda: status(server.url, "ops.two") == 200, 10, "the reload on SIGHUP")
        assert server.alive()

        url = server.url + "/admin/reload"
        assert httpx.post(url).status_code == 401
        assert httpx.post(url, headers={"X-API-Key": user}).status_code == 401
        catalog.write_text(BROKEN)
        failed = httpx.post(url, headers={"X-API-Key": admin})
        assert failed.status_code == 422
        body = failed.json()
        assert body["status"] == "error" and body["tools"] == 3
        assert any(p.startswith(f"{catalog}:{NOPE_LINE}:") and "nope" in p for p in body["problems"])

        catalog.write_text(V1)
        done = httpx.post(url, headers={"X-API-Key": admin})
        assert done.status_code == 200 and done.json()["status"] == "ok" and done.json()["tools"] == 2
        assert status(server.url, "ops.two") == 404
        assert reloads(server.url) == {"ok": 2.0, "error": 1.0}


def test_a_call_in_flight_finishes_on_the_catalog_it_started_with(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, V1)
    server = ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0", "SVC_WORKERS": "1"})
    admin = create_key(server.env, "root", "admin")
    with server.start():
        answers: list[httpx.Response] = []
        slow = threading.Thread(target=lambda: answers.append(httpx.post(server.url + "/tools/ops.slow", json={})))
        slow.start()
        time.sleep(0.3)
        catalog.write_text(V2)
        assert httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin}).json()["status"] == "ok"
        assert httpx.post(server.url + "/tools/ops.slow", json={}).text == "v2"  # new calls: the new catalog
        slow.join()
        assert (answers[0].status_code, answers[0].text) == (200, "v1")


def test_an_mcp_client_of_the_handshake_era_is_told_the_tool_list_changed(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, V1)
    seen: list[Any] = []

    async def on_message(message: Any) -> None:
        seen.append(message)

    async def main() -> list[str]:
        with (tmp_path / "stderr.txt").open("w") as errlog:
            home = tmp_path / "home"
            stdio = mcp_stdio(
                home, env=RELOADING, errlog=errlog, mode="legacy", catalog=catalog, message_handler=on_message
            )
            async with stdio as c:
                before = [t.name for t in (await c.list_tools()).tools]
                assert "ops__two" not in before
                catalog.write_text(V2)
                with anyio.fail_after(10):
                    while not any("ToolListChanged" in type(m).__name__ for m in seen):
                        await anyio.sleep(0.05)
                after = [t.name for t in (await c.list_tools()).tools]
                result = await c.call_tool("ops__two", {})
                assert text_of(result) == "two"
                return after

    assert "ops__two" in anyio.run(main)


def test_with_two_workers_sighup_and_admin_reload_reach_every_worker(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, V1)
    server = ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0", "SVC_WORKERS": "2"})
    admin = create_key(server.env, "root", "admin")

    def everywhere(key: str, expected: int) -> bool:
        # A new connection per call: the kernel spreads them over both workers.
        return all(status(server.url, key) == expected for _ in range(20))

    with server.start():
        catalog.write_text(V2)
        server.send(signal.SIGHUP)  # to the supervisor: it passes the signal to every worker
        wait_until(lambda: everywhere("ops.two", 200), 15, "every worker serving the new tool")
        assert server.alive()

        catalog.write_text(V1)
        answer = httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin})
        assert answer.status_code == 200 and answer.json()["tools"] == 2
        wait_until(lambda: everywhere("ops.two", 404), 15, "every worker without the tool")
        wait_until(lambda: reloads(server.url) == {"ok": 2.0, "error": 0.0}, 10, "two reloads counted")
        time.sleep(0.5)
        assert reloads(server.url) == {"ok": 2.0, "error": 0.0}  # once per reload of the server, not per worker


def test_with_two_workers_each_reload_of_the_server_counts_once_and_readyz_reports_a_failed_one(
    tmp_path: Path,
) -> None:
    """`svc_catalog_reloads_total` counts reloads of the server (both workers reload; a scrape, whichever
    worker answers it, shows one increment per reload), and every worker's /readyz reports a failed one.

    The catalog is replaced whole (rename), so no poll reads it half-written: a half-written file is a
    reload of its own (a failed one, most often), which would count too."""
    catalog = write_catalog(tmp_path, V1)
    server = ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0.2", "SVC_WORKERS": "2"})
    admin = create_key(server.env, "root", "admin")

    def everywhere(check: Any) -> bool:
        return all(check() for _ in range(8))  # a new connection each: both workers answer

    def counted(expected: dict[str, float], what: str) -> None:
        wait_until(lambda: reloads(server.url) == expected, 10, what)
        time.sleep(0.6)  # three polls more: the other worker's reload must not be counted too
        assert everywhere(lambda: reloads(server.url) == expected)

    def ready() -> int:
        return httpx.get(server.url + "/readyz").status_code

    with server.start():
        assert everywhere(lambda: reloads(server.url) == {"ok": 0.0, "error": 0.0})
        replace_text(catalog, V2)  # the poll, in each worker
        wait_until(lambda: everywhere(lambda: status(server.url, "ops.two") == 200), 15, "both workers reloaded")
        counted({"ok": 1.0, "error": 0.0}, "the poll's reload")

        replace_text(catalog, BROKEN)
        counted({"ok": 1.0, "error": 1.0}, "the failed reload")
        wait_until(lambda: everywhere(lambda: ready() == 503), 10, "every worker reporting the failed reload")
        assert everywhere(lambda: status(server.url, "ops.two") == 200)  # the previous catalog serves

        failed = httpx.post(server.url + "/admin/reload", headers={"X-API-Key": admin})
        assert failed.status_code == 422
        counted({"ok": 1.0, "error": 2.0}, "the failed admin reload")
        assert everywhere(lambda: ready() == 503)

        replace_text(catalog, V1)
        wait_until(lambda: everywhere(lambda: ready() == 200), 15, "every worker ready again")
        counted({"ok": 2.0, "error": 2.0}, "the fixed catalog")

        server.send(signal.SIGHUP)  # the same files: still a reload of every worker
        counted({"ok": 3.0, "error": 2.0}, "the SIGHUP")
        assert everywhere(lambda: status(server.url, "ops.two") == 404)


def test_a_worker_started_after_a_reload_serves_the_reloaded_catalog(tmp_path: Path) -> None:
    """Workers are forked from the supervisor, which keeps the catalog it loaded at start. A worker that
    replaces a dead one (or that was still starting when SIGHUP came) catches up with the files at once."""
    import os
    import subprocess

    catalog = write_catalog(tmp_path, V1)
    server = ToolrunServer(tmp_path, catalog, {"SVC_RELOAD_INTERVAL": "0", "SVC_WORKERS": "2"})

    def workers() -> set[int]:
        out = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout
        return {int(p) for p in out.split()}

    def everywhere(key: str, expected: int) -> bool:
        return all(status(server.url, key) == expected for _ in range(20))

    with server.start():
        wait_until(lambda: len(workers()) == 2 and everywhere("ops.one", 200), 15, "both workers up")
        catalog.write_text(V2)
        server.send(signal.SIGHUP)
        wait_until(lambda: everywhere("ops.two", 200), 15, "every worker serving the new tool")
        before = workers()
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        wait_until(lambda: len(workers()) == 2 and victim not in workers(), 15, "a replacement worker")
        # No SIGHUP, no poll: the replacement must not serve the supervisor's first catalog.
        wait_until(lambda: everywhere("ops.two", 200), 15, "the replacement serving the reloaded catalog")
