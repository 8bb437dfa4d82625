"""Red team 11 on "a call does not outlive its client" (issue 34's kind, a hostile caller): pipelined requests.

A client that sent a second request behind a running call on the same connection (HTTP/1.1 pipelining), then hung
up, left its call running to its end: uvicorn stops reading a connection while a pipelined request waits, so the
server never saw the connection close; and the lost connection was reported to the request parsed last, not to
the call that ran. A `sleep` tool ran on with nobody to answer, holding its concurrency slot, and the audit
record said `ok`. Now the server keeps reading (up to a cap) while a pipelined request waits, and a lost connection
cancels the call that runs. The tests failed on the code before its fix (the `sleep` was still there).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from support.catalogs import unique_sleep
from support.procs import gone, pids_matching
from support.servers import serve_catalog, wait_until

SECONDS, MARKER = unique_sleep(20)
CATALOG = f"""\
group: t
tools:
  - name: slow
    public: true
    exec: {MARKER}
  - name: echo
    public: true
    exec: echo {{{{ msg | quote }}}}
    params:
      - {{name: msg, type: str}}
"""


def _post(path: str, body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}"
    return head.encode() + b"\r\n\r\n" + body


@pytest.mark.parametrize("when", ["with_the_call", "while_it_runs"])
def test_a_client_that_pipelines_a_request_and_hangs_up_ends_its_call(tmp_path: Path, when: str) -> None:
    audit = tmp_path / "audit.jsonl"
    with serve_catalog(tmp_path, CATALOG, {"SVC_WORKERS": 1, "SVC_AUDIT_LOG": audit}) as server:
        server.start()
        echo = _post("/tools/t.echo", b'{"msg": "next"}')
        with socket.create_connection(("127.0.0.1", server.port)) as client:
            first = _post("/tools/t.slow", b"{}")
            client.sendall(first + echo if when == "with_the_call" else first)
            pids = wait_until(lambda: pids_matching(MARKER), 10, "the slow call's sleep")
            if when == "while_it_runs":
                client.sendall(echo * 3)
        assert gone(pids, 5) == [], "the call ran on after its client hung up"

        def record() -> dict[str, object] | None:
            lines = [json.loads(line) for line in audit.read_text().splitlines()] if audit.exists() else []
            return next((r for r in lines if r.get("tool") == "t.slow"), None)

        assert wait_until(record, 5, "the audit record")["outcome"] == "cancelled"
        # The server still serves.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as again:
            again.sendall(echo)
            answer = b""
            while b"next" not in answer and (chunk := again.recv(4096)):  # the head and body may come apart
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200") and b"next" in answer, answer


def test_pipelined_requests_sent_while_a_call_runs_are_all_answered_in_order(tmp_path: Path) -> None:
    """What the fix reads while a pipelined request waits is parsed once it starts: nothing lost, nothing reordered."""
    _, short = unique_sleep(1.5)
    catalog = CATALOG.replace(MARKER, short)
    with serve_catalog(tmp_path, catalog, {"SVC_WORKERS": 1}) as server:
        server.start()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(_post("/tools/t.slow", b"{}") + _post("/tools/t.echo", b'{"msg": "one"}'))
            wait_until(lambda: pids_matching(short), 5, "the slow call's sleep")
            client.sendall(b"".join(_post("/tools/t.echo", f'{{"msg": "{w}"}}'.encode()) for w in ("two", "three")))
            answer = b""
            while answer.count(b"HTTP/1.1 200") < 4 or not answer.rstrip().endswith(b"three"):
                chunk = client.recv(65536)
                assert chunk, answer
                answer += chunk
    assert answer.count(b"HTTP/1.1 200") == 4, answer
    bodies = [answer.index(word) for word in (b"one", b"two", b"three")]
    assert bodies == sorted(bodies), answer


def test_more_than_a_mebibyte_behind_a_waiting_pipelined_request_closes_the_connection(tmp_path: Path) -> None:
    """What is read while a pipelined request waits is kept, up to 1 MiB: more closes the connection, and the call
    that runs is cancelled as for a client that hung up (no unbounded buffer for a client that never stops)."""
    with serve_catalog(tmp_path, CATALOG, {"SVC_WORKERS": 1}) as server:
        server.start()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(_post("/tools/t.slow", b"{}") + _post("/tools/t.echo", b'{"msg": "next"}'))
            pids = wait_until(lambda: pids_matching(MARKER), 10, "the slow call's sleep")
            try:
                client.sendall(b"x" * (1024 * 1024 + 65536))
            except OSError:  # the server closed the connection while we still wrote
                pass
            assert gone(pids, 5) == [], "the call ran on"
