"""The HTTP protocol's writes: a response's head and body leave in one send, nothing is lost or reordered."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from toolrun.server.protocol import CoalescingTransport


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False
        self.aborted = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def test_writes_of_one_loop_iteration_go_out_as_one_in_order() -> None:
    async def scenario() -> list[bytes]:
        real = _Transport()
        corked = CoalescingTransport(real, asyncio.get_running_loop())
        corked.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        corked.write(memoryview(b"hi"))
        assert real.writes == []  # held until the end of this iteration
        assert corked.get_write_buffer_size() == 40
        await asyncio.sleep(0)
        corked.write(b"event: 1\n\n")  # a later iteration: its own send
        await asyncio.sleep(0)
        assert corked.get_extra_info("peername") == ("127.0.0.1", 1)  # everything else is the transport's
        return real.writes

    assert asyncio.run(scenario()) == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi", b"event: 1\n\n"]


def test_close_sends_what_is_held_first_and_abort_drops_it() -> None:
    async def scenario() -> tuple[_Transport, _Transport]:
        loop = asyncio.get_running_loop()
        closed, aborted = _Transport(), _Transport()
        one, two = CoalescingTransport(closed, loop), CoalescingTransport(aborted, loop)
        one.write(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n")
        one.close()
        two.write(b"partial")
        two.abort()
        await asyncio.sleep(0)  # the scheduled flushes find nothing left to send
        return closed, aborted

    closed, aborted = asyncio.run(scenario())
    assert closed.writes == [b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n"] and closed.closed
    assert aborted.writes == [] and aborted.aborted


def _answer(sock: socket.socket, ending: bytes) -> bytes:
    """What the server sends until the answer ends with `ending` (or it closes): one send with the
    `coalesce` speedup, the head and the body apart without it."""
    data = sock.recv(65536)
    while data and not data.endswith(ending):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_real_server_answers_requests_on_one_connection_whole_and_in_order(tmp_path: Any) -> None:
    """Requests one after the other on one keep-alive connection to a real `toolrun serve`, then a pipelined pair."""
    from support.servers import ToolrunServer

    catalog = tmp_path / "tools.yaml"
    catalog.write_text("group: t\ntools:\n  - {name: hello, public: true, exec: printf hello}\n")
    with ToolrunServer(tmp_path / "srv", catalog) as server:
        server.start()
        sock = socket.create_connection(("127.0.0.1", server.port))
        sock.settimeout(10)
        for _ in range(2):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            data = _answer(sock, b'{"status":"ok"}')
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and body == b'{"status":"ok"}', data
        sock.sendall(b"POST /tools/t.hello HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
        data = _answer(sock, b"hello")
        assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"\r\n\r\nhello"), data
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 2)
        data = b""
        while data.count(b'{"status":"ok"}') < 2:
            chunk = sock.recv(65536)
            assert chunk, data
            data += chunk
        assert data.count(b"HTTP/1.1 200") == 2
        sock.close()
        for _ in range(20):  # a client that half-closes after its request still gets the whole answer
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as half:
                half.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                half.shutdown(socket.SHUT_WR)
                answer = b""
                while chunk := half.recv(65536):
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b'{"status":"ok"}'), answer


def test_deadlines_still_hold_on_a_connection_that_served_requests(tmp_path: Any) -> None:
    """An idle keep-alive connection is closed after 5 seconds (uvicorn's keep-alive), and a head begun after
    several requests still gets its 408 `request_timeout` seconds after its first byte."""
    import time

    from support.servers import ToolrunServer

    catalog = tmp_path / "tools.yaml"
    catalog.write_text("group: t\ntools:\n  - {name: hello, public: true, exec: printf hello}\n")
    with ToolrunServer(tmp_path / "srv", catalog, {"SVC_REQUEST_TIMEOUT": 2}) as server:
        server.start()
        idle = socket.create_connection(("127.0.0.1", server.port))
        slow = socket.create_connection(("127.0.0.1", server.port))
        for sock in (idle, slow):
            sock.settimeout(15)
            for _ in range(3):
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert _answer(sock, b'{"status":"ok"}').endswith(b'{"status":"ok"}')
        started = time.monotonic()
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0")  # half a head, never finished
        answer = slow.recv(65536)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert 1.5 < time.monotonic() - started < 4.5
        assert idle.recv(65536) == b""  # closed by the server: idle past the keep-alive timeout
        assert 4.5 < time.monotonic() - started < 8
        idle.close()
        slow.close()
