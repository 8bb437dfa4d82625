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


def _one_answer(sock: socket.socket, pending: bytes, bodiless: bool = False) -> tuple[bytes, bytes]:
    """One whole answer read from `sock` (its head, then content-length bytes of body unless `bodiless`: the answer
    to a HEAD), and what follows it."""
    data = pending
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    if bodiless:
        length = 0
    while len(rest) < length:
        chunk = sock.recv(65536)
        assert chunk, data
        rest += chunk
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


def _wire(port: int, requests: list[bytes]) -> list[bytes]:
    """Each request's answer, as the bytes on the wire (the date header blanked): requests on one kept-alive
    connection, a pipelined pair, and requests that close their connection."""
    import re

    answers = []
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        pending = b""
        for request in requests:
            sock.sendall(request)
            answer, pending = _one_answer(sock, pending, request.startswith(b"HEAD "))
            answers.append(answer)
        sock.sendall(requests[0] + requests[1])  # pipelined
        for _ in range(2):
            answer, pending = _one_answer(sock, pending)
            answers.append(answer)
    for request in requests[:2]:
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            sock.sendall(request.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1))
            whole = b""
            while chunk := sock.recv(65536):  # the server closes the connection after the answer
                whole += chunk
            answers.append(whole)
    answers = [re.sub(rb"\r\ndate: [^\r]*", b"\r\ndate: -", a) for a in answers]
    # A JSON result carries the call's duration, and its length with it
    timed = [re.sub(rb'"seconds": [0-9.e-]+', b'"seconds": 0', a) for a in answers]
    pairs = zip(timed, answers, strict=True)
    return [re.sub(rb"content-length: \d+", b"content-length: -", t) if t != a else a for t, a in pairs]


def test_direct_answers_are_the_bytes_uvicorn_sends(tmp_path: Any) -> None:
    """The `direct_answer` speedup writes the plain handlers' answers itself: every byte on the wire is what
    uvicorn's send writes with the speedup off (statuses, headers in order, connection: close, bodies), on a
    kept-alive connection, pipelined, and on connections the client closes; an allowed Origin (CORS) and HEAD
    go through send."""
    from support.servers import ToolrunServer

    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "group: t\ntools:\n"
        "  - {name: hello, public: true, exec: printf hello}\n"
        "  - {name: fails, public: true, exec: 'printf oops >&2; exit 3'}\n"
        "  - {name: later, public: true, exec: printf later, async: true}\n"
    )
    host = b"Host: 127.0.0.1\r\nX-Request-Id: r-1\r\n"
    post = b"POST /tools/%s HTTP/1.1\r\n" + host + b"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s"
    requests = [
        post % (b"t.hello", 2, b"", b"{}"),
        b"GET /healthz HTTP/1.1\r\n" + host + b"\r\n",
        post % (b"t.hello", 2, b"Accept: application/json\r\n", b"{}"),
        post % (b"t.fails", 2, b"", b"{}"),
        post % (b"t.nope", 2, b"", b"{}"),
        post % (b"t.hello", 5, b"", b"{oops"),
        post % (b"t.hello", 2, b"Origin: http://ui.example\r\n", b"{}"),
        b"GET /tools/t.hello HTTP/1.1\r\n" + host + b"\r\n",
        b"GET /tools/t.nope HTTP/1.1\r\n" + host + b"\r\n",
        b"HEAD /healthz HTTP/1.1\r\n" + host + b"\r\n",
    ]
    seen = []
    settings = {"SVC_ALLOWED_ORIGINS": "http://ui.example"}
    for speedups in ("on", "direct_answer"):
        with ToolrunServer(tmp_path / speedups, catalog, settings) as server:
            server.env["TOOLRUN_SPEEDUPS"] = speedups
            server.start()
            seen.append(_wire(server.port, requests))
    direct, plain = seen
    assert direct == plain
    assert direct[0].startswith(b"HTTP/1.1 200 OK\r\ndate: -\r\nx-request-id: r-1\r\nx-toolrun-exit-code: 0\r\n")
    assert direct[0].endswith(b"\r\n\r\nhello") and direct[1].endswith(b'{"status":"ok"}')
    assert direct[3].startswith(b"HTTP/1.1 200") and b"x-toolrun-exit-code: 3" in direct[3]
    assert direct[4].startswith(b"HTTP/1.1 404") and direct[5].startswith(b"HTTP/1.1 400")
    assert b"access-control-allow-origin: http://ui.example" in direct[6]
    assert direct[-2].endswith(b"connection: close\r\n\r\nhello") and b"connection: close" in direct[-1]


def test_a_direct_answer_is_one_write_and_completes_the_request_or_leaves_it_to_send() -> None:
    """`protocol.answer` against a cycle as uvicorn builds it: the whole answer in one write, the request complete
    (keep-alive kept, or the connection closed); False, with nothing written, where uvicorn's send must do it."""
    from types import SimpleNamespace

    from toolrun.server.protocol import ANSWER, answer

    class Cycle:
        def __init__(self, keep_alive: bool = True) -> None:
            self.transport = _Transport()
            self.flow = SimpleNamespace(write_paused=False)
            self.response_started = self.response_complete = self.disconnected = self.access_log = False
            self.default_headers = [(b"date", b"today")]
            self.keep_alive = keep_alive
            self.waiting_for_100_continue = False
            self.message_event = asyncio.Event()
            self.done = 0

        def on_response(self) -> None:
            self.done += 1

        async def send(self, message: Any) -> None:
            raise AssertionError("not through send")

    headers = [(b"content-length", b"2"), (b"content-type", b"text/plain")]
    for keep_alive, ending in ((True, b""), (False, b"connection: close\r\n")):
        cycle = Cycle(keep_alive)
        assert answer({ANSWER: cycle, "method": "POST"}, cycle.send, 200, headers, b"hi")
        head = b"HTTP/1.1 200 OK\r\ndate: today\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n"
        assert cycle.transport.writes == [head + ending + b"\r\nhi"]
        assert cycle.response_complete and cycle.message_event.is_set() and cycle.done == 1
        assert cycle.transport.closed is not keep_alive

    async def wrapped(message: Any) -> None:  # a layer around send (CORS)
        raise AssertionError

    cycle = Cycle()
    refused = [
        ({ANSWER: cycle, "method": "POST"}, wrapped, headers),
        ({ANSWER: cycle, "method": "HEAD"}, cycle.send, headers),
        ({"method": "POST"}, cycle.send, headers),  # another server: no cycle in the scope
        ({ANSWER: cycle, "method": "POST"}, cycle.send, [(b"x-bad", b"a\nb"), *headers]),
    ]
    for scope, send, given in refused:
        assert not answer(scope, send, 200, given, b"hi")
    cycle.disconnected = True
    assert not answer({ANSWER: cycle, "method": "POST"}, cycle.send, 200, headers, b"hi")
    assert cycle.transport.writes == [] and not cycle.response_started
