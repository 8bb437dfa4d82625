"""Hostile input at the HTTP layer: only clean 4xx answers that name what was wrong, never a 5xx,
and never an API key in a log.

Property tests (hypothesis) run in-process through the guarded ASGI app that `toolrun serve`
builds, one tool per param type; what only a real HTTP parser sees (raw request lines, broken
framing) and the server's own log go through a real `toolrun serve` process.
(Schemathesis over /openapi.json lives in test_openapi_fuzz.py.)
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from support.catalogs import write_catalog
from support.keys import create_key
from support.servers import Processes, ToolrunServer, toolrun_cli
from toolrun.server.run import build_app
from toolrun.settings import Settings

JSON = {"content-type": "application/json"}
BASE_URL = "http://127.0.0.1"
MAX_BODY = 64 * 1024

CATALOG = """\
version: 1
group: h
tools:
  - name: t_str
    public: true
    exec: printf '%s' {{ v | quote }}
    params: [{name: v, type: str}]
  - name: t_int
    public: true
    exec: printf '%s' {{ v }}
    params: [{name: v, type: int}]
  - name: t_float
    public: true
    exec: printf '%s' {{ v }}
    params: [{name: v, type: float}]
  - name: t_bool
    public: true
    exec: printf '%s' {{ v | quote }}
    params: [{name: v, type: bool}]
  - name: t_list
    public: true
    exec: printf '%s\\n' {{ v | quote }}
    params: [{name: v, type: list}]
  - name: t_dict
    public: true
    exec: printf '%s' {{ v | quote }}
    params: [{name: v, type: dict}]
  - name: mixed
    public: true
    exec: >-
      printf '%s|' {{ s | quote }} {% if n is defined %}{{ n }}{% else %}none{% endif %}
      {% if flag %}yes{% else %}no{% endif %} {{ items | quote }} {{ opts | quote }}
    params:
      - {name: s, type: str, required: false, default: d}
      - {name: n, type: int, required: false}
      - {name: flag, type: bool, required: false, default: false}
      - {name: items, type: list, required: false, default: []}
      - {name: opts, type: dict, required: false, default: {}}
  - name: constrained
    public: true
    exec: printf '%s %s' {{ color | quote }} {{ count }}
    params:
      - {name: color, type: str, enum: [red, green]}
      - {name: count, type: int, min: 1, max: 10}
  - name: piped
    public: true
    stdin: true
    exec: cat
    params:
      - {name: a, type: str, required: false}
      - {name: b, type: list, required: false}
      - {name: c, type: dict, required: false}
"""

TOOLS = {
    "h.t_str": ["v"],
    "h.t_int": ["v"],
    "h.t_float": ["v"],
    "h.t_bool": ["v"],
    "h.t_list": ["v"],
    "h.t_dict": ["v"],
    "h.mixed": ["s", "n", "flag", "items", "opts"],
    "h.constrained": ["color", "count"],
    "h.piped": ["a", "b", "c"],
}

# JSON values of every kind, text with any code point (lone surrogates and NUL included).
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | ANY_TEXT
JSON_VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4), max_leaves=12
)
CLEAN_TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)
PROPS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    base = tmp_path_factory.mktemp("hostile")
    catalog = write_catalog(base, CATALOG)
    config = Settings.load(flags={"max_body_bytes": MAX_BODY}, environ={"TOOLRUN_HOME": str(base / "home")})
    with TestClient(build_app(config, [str(catalog)]), base_url=BASE_URL) as test_client:
        yield test_client


def post(client: TestClient, key: str, body: bytes | str, headers: dict[str, str] | None = None) -> Any:
    """POST a body; text is sent as UTF-8, lone surrogates as their (invalid) UTF-8 bytes."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    return client.post(f"/tools/{key}", content=raw, headers=headers if headers is not None else JSON)


def assert_clean_4xx(response: Any, *words: str, status: int | None = None, max_len: int = 2000) -> None:
    """A 4xx whose short body names the problem (`words`, case-insensitive)."""
    assert 400 <= response.status_code < 500, (response.status_code, response.text[:500])
    if status is not None:
        assert response.status_code == status, (response.status_code, response.text[:500])
    text = response.text
    assert "Traceback" not in text and len(text) < max_len, text[:500]
    for word in words:
        assert word.lower() in text.lower(), (word, text)


def _dumps(value: Any) -> str:
    return json.dumps(value, allow_nan=True)


# -- properties over params and templates --------------------------------------------------------


def test_any_json_object_against_any_tool_is_200_or_a_named_400(client: TestClient) -> None:
    @PROPS
    @given(
        st.sampled_from(sorted(TOOLS)),
        st.data(),
    )
    def check(tool: str, data: st.DataObject) -> None:
        names = st.sampled_from(TOOLS[tool]) | ANY_TEXT
        body = data.draw(st.dictionaries(names, JSON_VALUES, max_size=5))
        ascii_only = data.draw(st.booleans())
        response = post(client, tool, json.dumps(body, ensure_ascii=ascii_only, allow_nan=True))
        assert response.status_code in (200, 400), (response.status_code, response.text)
        if response.status_code == 400:
            assert response.text.split(": ", 1)[0] in ("ParamError", "UsageError"), response.text
            assert "\n" not in response.text.strip()

    check()


def test_any_json_document_as_the_body_is_200_or_400(client: TestClient) -> None:
    @PROPS
    @given(st.sampled_from(sorted(TOOLS)), JSON_VALUES)
    def check(tool: str, document: Any) -> None:
        response = post(client, tool, _dumps(document))
        assert response.status_code in (200, 400), (response.status_code, response.text)
        if not isinstance(document, dict):  # (NaN or a lone surrogate inside: named as such first)
            assert_clean_4xx(response, status=400)

    check()


def test_any_bytes_as_the_body_are_200_or_a_named_4xx(client: TestClient) -> None:
    @PROPS
    @given(st.sampled_from(sorted(TOOLS)), st.binary(max_size=200))
    def check(tool: str, raw: bytes) -> None:
        response = post(client, tool, raw)
        assert response.status_code in (200, 400), (response.status_code, response.text)

    check()


def test_str_values_round_trip_through_quote_and_printf(client: TestClient) -> None:
    @PROPS
    @given(CLEAN_TEXT)
    def check(value: str) -> None:
        response = post(client, "h.t_str", json.dumps({"v": value}))
        assert (response.status_code, response.text) == (200, value)

    check()


def test_text_with_nul_or_lone_surrogates_is_a_400_naming_the_param(client: TestClient) -> None:
    @PROPS
    @given(CLEAN_TEXT, st.sampled_from(["\x00", "\ud800", "\udfff"]), CLEAN_TEXT)
    def check(head: str, bad: str, tail: str) -> None:
        for tool, value in (("h.t_str", head + bad + tail), ("h.t_list", ["ok", head + bad + tail])):
            response = post(client, tool, json.dumps({"v": value}))
            assert_clean_4xx(response, "parameter 'v'", status=400)

    check()


def test_list_items_each_become_one_quoted_word(client: TestClient) -> None:
    @PROPS
    @given(st.lists(CLEAN_TEXT, min_size=1, max_size=6))
    def check(items: list[str]) -> None:
        response = post(client, "h.t_list", json.dumps({"v": items}))
        assert (response.status_code, response.text) == (200, "".join(f"{item}\n" for item in items))

    check()


def test_dicts_render_as_one_word_of_compact_json(client: TestClient) -> None:
    values = st.recursive(
        st.none() | st.booleans() | st.integers(-(10**12), 10**12) | CLEAN_TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(CLEAN_TEXT, inner, max_size=3),
        max_leaves=8,
    )

    @PROPS
    @given(st.dictionaries(CLEAN_TEXT, values, max_size=4))
    def check(value: dict[str, Any]) -> None:
        response = post(client, "h.t_dict", json.dumps({"v": value}))
        assert response.status_code == 200, response.text
        assert json.loads(response.text) == value

    check()


def test_numbers_render_exactly_and_out_of_range_ones_are_named(client: TestClient) -> None:
    @PROPS
    @given(st.integers(-(10**30), 10**30), st.floats(allow_nan=False, allow_infinity=False))
    def check(number: int, real: float) -> None:
        response = post(client, "h.t_int", json.dumps({"v": number}))
        assert (response.status_code, response.text) == (200, str(number))
        response = post(client, "h.t_float", json.dumps({"v": real}))
        assert response.status_code == 200 and float(response.text) == real

    check()
    for raw in ('{"v": NaN}', '{"v": Infinity}', '{"v": -Infinity}'):
        assert_clean_4xx(post(client, "h.t_float", raw), "not valid JSON", status=400)
    assert_clean_4xx(post(client, "h.t_int", '{"v": 1%s}' % ("0" * 5000)), status=400)
    assert_clean_4xx(post(client, "h.t_int", '{"v": 1.5}'), "parameter 'v'", status=400)
    assert_clean_4xx(post(client, "h.t_float", '{"v": 1e999}'), "parameter 'v'", status=400)


def test_optional_params_and_if_blocks_render_for_any_subset_given(client: TestClient) -> None:
    @PROPS
    @given(
        st.fixed_dictionaries(
            {},
            optional={
                "s": CLEAN_TEXT,
                "n": st.integers(-1000, 1000),
                "flag": st.booleans(),
                "items": st.lists(CLEAN_TEXT, max_size=3),
                "opts": st.dictionaries(CLEAN_TEXT, st.integers(), max_size=2),
            },
        )
    )
    def check(body: dict[str, Any]) -> None:
        response = post(client, "h.mixed", json.dumps(body))
        assert response.status_code == 200, response.text
        items = body.get("items", [])
        expected = [
            body.get("s", "d"),
            str(body["n"]) if "n" in body else "none",
            "yes" if body.get("flag") else "no",
            *items,
            json.dumps(body.get("opts", {}), separators=(",", ":"), ensure_ascii=False),
        ]
        assert response.text == "".join(f"{word}|" for word in expected)

    check()


def test_stdin_mode_passes_the_validated_params_as_json(client: TestClient) -> None:
    @PROPS
    @given(st.fixed_dictionaries({}, optional={"a": CLEAN_TEXT, "b": st.lists(CLEAN_TEXT, max_size=3)}))
    def check(body: dict[str, Any]) -> None:
        response = post(client, "h.piped", json.dumps(body))
        assert response.status_code == 200, response.text
        sent = json.loads(response.text)
        assert {k: v for k, v in sent.items() if v is not None} == body

    check()


def test_enum_and_range_constraints_name_the_allowed_values(client: TestClient) -> None:
    assert post(client, "h.constrained", '{"color": "red", "count": 3}').text == "red 3"
    assert_clean_4xx(post(client, "h.constrained", '{"color": "blue", "count": 3}'), "color", "red", status=400)
    assert_clean_4xx(post(client, "h.constrained", '{"color": "red", "count": 11}'), "count", "10", status=400)
    assert_clean_4xx(post(client, "h.constrained", '{"color": "red"}'), "count", status=400)
    assert_clean_4xx(post(client, "h.constrained", '{"color": "red", "count": 3, "x": 1}'), "'x'", status=400)


# -- malformed, huge, nested, encodings ------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{", ["malformed JSON"]),
        (b'{"v": }', ["malformed JSON"]),
        (b'{"v": "a"} {}', ["malformed JSON", "extra data"]),
        (b"{'v': 'a'}", ["malformed JSON"]),
        (b'{"v": "a",}', ["malformed JSON"]),
        (b'{"v": "a", "v": "b"}', ["duplicate key 'v'"]),
        (b"[1, 2]", ["JSON object", "array"]),
        (b'"text"', ["JSON object", "string"]),
        (b"null", ["JSON object", "null"]),
        (b"42", ["JSON object", "number"]),
        (b'{"v": "a\x00b"}', ["malformed JSON"]),  # a raw NUL inside a JSON string
        (b'{"v": "a"}\x00', ["malformed JSON"]),
        (b'{"v": "a\\u0000b"}', ["parameter 'v'", "NUL"]),
        (b'{"v\\u0000": "a"}', ["v\\x00"]),
        (b'{"v": "\xff\xfe"}', ["not UTF-8"]),  # invalid UTF-8
        (b'{"v": "\xc0\xaf"}', ["not UTF-8"]),  # an overlong encoding of '/'
        (b'{"v": "\xed\xa0\x80"}', ["not UTF-8"]),  # an encoded surrogate
        ('{"v": "x"}'.encode("utf-16"), ["not UTF-8"]),
        ('{"v": "x"}'.encode("utf-16-le"), ["malformed JSON"]),  # NULs are valid UTF-8
        ('{"v": "x"}'.encode("utf-32"), ["not UTF-8"]),
        (b"[" * 30_000 + b"]" * 30_000, ["nested too deeply"]),
        (b'{"v": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", ["nested too deeply"]),
        (b'{"v": ' + b'{"a": ' * 8_000 + b"1" + b"}" * 8_001, ["nested too deeply"]),
    ],
    ids=lambda v: repr(v)[:40] if isinstance(v, bytes) else None,
)
def test_malformed_bodies_get_a_400_naming_the_problem(client: TestClient, body: bytes, words: list[str]) -> None:
    tool = "h.t_list" if b"[" * 1000 in body else "h.t_str"
    assert_clean_4xx(post(client, tool, body), *words, status=400)


def test_nesting_json_accepts_but_params_refuse_is_a_400(client: TestClient) -> None:
    deep = json.dumps({"v": json.loads("[" * 500 + "]" * 500)})
    assert_clean_4xx(post(client, "h.t_list", deep), "nested more than 64 levels", status=400)


def test_a_utf8_bom_is_accepted(client: TestClient) -> None:
    assert post(client, "h.t_str", b'\xef\xbb\xbf{"v": "bom"}').text == "bom"


def test_a_body_over_max_body_bytes_is_413_whether_announced_or_streamed(client: TestClient) -> None:
    big = json.dumps({"v": "x" * MAX_BODY}).encode()
    assert_clean_4xx(post(client, "h.t_str", big), f"larger than {MAX_BODY} bytes", status=413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked
        yield b'{"v": "'
        for _ in range(MAX_BODY // 1024 + 2):
            yield b"x" * 1024
        yield b'"}'

    response = client.post("/tools/h.t_str", content=chunks(), headers=JSON)
    assert_clean_4xx(response, "larger than", status=413)
    lying = client.post("/tools/h.t_str", content=b"{}", headers={**JSON, "content-length": str(10**12)})
    assert lying.status_code in (400, 413)


@pytest.mark.parametrize(
    ("ctype", "status"),
    [
        ("text/plain", 415),
        ("application/x-www-form-urlencoded", 415),
        ("multipart/form-data; boundary=x", 415),
        ("application/json; charset=utf-8", 200),
        ("application/merge-patch+json", 200),
        ("APPLICATION/JSON", 200),
    ],
)
def test_content_types(client: TestClient, ctype: str, status: int) -> None:
    response = post(client, "h.t_str", b'{"v": "ct"}', {"content-type": ctype})
    assert response.status_code == status, response.text
    if status == 415:
        assert_clean_4xx(response, "Content-Type must be application/json")


# -- query strings, paths, methods -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("/tools?format=json&format=md", ["'format'", "more than once"]),
        ("/search?q=a&q=b", ["'q'", "more than once"]),
        ("/search?limit=1&limit=2", ["'limit'", "more than once"]),
        ("/search?limit=abc", ["'limit'", "integer"]),
        ("/search?limit=100000", ["'limit'", "between"]),
        ("/search?offset=-1", ["'offset'", "between"]),
        ("/search?q=" + "a" * 600, ["longer than 500"]),
        ("/tools?format=xml", ["format must be"]),
        ("/tools?format=%00", ["format must be"]),
    ],
)
def test_bad_query_strings_get_a_400_naming_the_parameter(client: TestClient, url: str, words: list[str]) -> None:
    response = client.get(url)
    assert_clean_4xx(response, *words, status=400)
    assert "error" in response.json()


def test_a_repeated_api_key_is_401_not_a_guess(client: TestClient) -> None:
    response = client.get("/whoami?api-key=a&api-key=b")
    assert (response.status_code, response.json()) == (401, {"error": "unauthorized"})


@pytest.mark.parametrize(
    "key",
    ["%00", "%00x", "a" * 10_000, "h.t_str%00", "..%2F..%2Fetc%2Fpasswd", "%FF%FE", "%E2%80%AE", "h.t_str%20", "%20"],
)
def test_weird_tool_keys_are_a_clean_404(client: TestClient, key: str) -> None:
    got = client.get(f"/tools/{key}")
    assert (got.status_code, got.json()) == (404, {"error": "not found"})
    called = client.post(f"/tools/{key}", content=b"{}", headers=JSON)
    # (the 404 text quotes the whole key: 10 KB for the longest one here)
    assert_clean_4xx(called, "no tool", status=404, max_len=len(key) + 100)


def test_other_paths_and_methods_are_clean_4xx(client: TestClient) -> None:
    assert client.get("/tools/h.t_str/extra").status_code == 404
    assert client.get("/%00").status_code == 404
    assert client.put("/tools/h.t_str", content=b"{}").status_code == 405
    assert client.delete("/tools/h.t_str").status_code == 405
    assert client.post("/healthz").status_code == 405


# -- a real server: raw HTTP and its log -----------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolrunServer]:
    base = tmp_path_factory.mktemp("hostile-real")
    catalog = write_catalog(base, CATALOG)
    settings = {"SVC_LOG_LEVEL": "debug", "SVC_REQUEST_TIMEOUT": 5}
    with Processes() as procs:
        yield procs.add(ToolrunServer(base / "server", catalog, settings)).start()


def raw_request(
    server: ToolrunServer, data: bytes, timeout: float = 10.0, half_close: bool = True
) -> tuple[int, bytes]:
    """Send raw bytes (then EOF, unless `half_close` is false: uvicorn drops pipelined requests it has
    not started when the client half-closes); the status code (0 when the server just closed the
    connection) and the whole answer, read until the server closes."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server already answered and closed (431 for a huge head, ...)
            pass
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    if not answer.startswith(b"HTTP/1.1 "):
        return 0, answer
    return int(answer[9:12]), answer


HOST = b"Host: 127.0.0.1\r\n"
POST_STR = b"POST /tools/h.t_str HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
BAD = {400}  # uvicorn's "Invalid HTTP request received." (or the Host check)
# name -> (raw request, the statuses allowed; 0 = the server just closes the connection)
RAW_CASES: dict[str, tuple[bytes, set[int]]] = {
    "huge request line": (b"GET /tools/" + b"a" * 200_000 + b" HTTP/1.1\r\n" + HOST + b"\r\n", {431}),
    "huge header": (b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 200_000 + b"\r\n\r\n", {431}),
    "5,000 headers": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: a\r\n" % i for i in range(5000)) + b"\r\n",
        {200},
    ),
    "20,000 headers": (
        b"GET /healthz HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: a\r\n" % i for i in range(20000)) + b"\r\n",
        {431},
    ),
    "no host": (b"GET /tools HTTP/1.1\r\n\r\n", BAD),
    "other host": (b"GET /tools HTTP/1.1\r\nHost: evil.example\r\n\r\n", BAD),
    "two hosts": (b"GET /tools HTTP/1.1\r\n" + HOST + b"Host: evil.example\r\n\r\n", BAD),
    "bad method": (b"G\x00T /tools HTTP/1.1\r\n" + HOST + b"\r\n", BAD),
    "bad version": (b"GET /tools HTTP/9.9\r\n" + HOST + b"\r\n", BAD),
    "NUL in path": (b"GET /tools/\x00 HTTP/1.1\r\n" + HOST + b"\r\n", BAD),
    "NUL in header": (b"GET /tools HTTP/1.1\r\n" + HOST + b"X-API-Key: a\x00b\r\n\r\n", BAD),
    "bad header name": (b"GET /tools HTTP/1.1\r\n" + HOST + b"Bad Header: x\r\n\r\n", BAD),
    "latin-1 key": (b"GET /whoami HTTP/1.1\r\n" + HOST + b"X-API-Key: \xe9\xff\r\n\r\n", {401}),
    "content-length not a number": (POST_STR + b"Content-Length: abc\r\n\r\n{}", BAD),
    "negative content-length": (POST_STR + b"Content-Length: -5\r\n\r\n{}", BAD),
    "two content-lengths": (POST_STR + b"Content-Length: 2\r\nContent-Length: 9\r\n\r\n{}", BAD),
    "bad chunk size": (POST_STR + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", BAD),
    "chunked and length": (
        POST_STR + b"Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        BAD,
    ),
    "short body, then EOF": (POST_STR + b"Content-Length: 100\r\n\r\n{", {0, 400}),
    "garbage": (bytes(range(256)) * 10, BAD),
    "http/0.9": (b"GET /\r\n\r\n", BAD),
    "absolute URI": (b"GET http://evil.example/healthz HTTP/1.1\r\n" + HOST + b"\r\n", {200}),
    # a key that is given must resolve (a NUL key does not): 401 before the bad `format` is looked at
    "encoded NUL in query": (b"GET /tools?format=%00&api-key=%00 HTTP/1.1\r\n" + HOST + b"\r\n", {401}),
    "websocket upgrade": (
        b"GET /mcp HTTP/1.1\r\n" + HOST + b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n",
        {400, 403, 404, 405, 406},
    ),
}


def test_broken_http_gets_a_clean_4xx_never_a_5xx_and_the_server_stays_up(real: ToolrunServer) -> None:
    answers = {}
    for name, (data, allowed) in RAW_CASES.items():
        status, answer = raw_request(real, data)
        answers[name] = status
        assert status in allowed, (name, answer[:300])
        assert b"Traceback" not in answer, (name, answer[:2000])
    assert raw_request(real, b"GET /healthz HTTP/1.1\r\n" + HOST + b"Connection: close\r\n\r\n")[0] == 200
    assert real.alive()
    print("\n" + ", ".join(f"{name}: {status or 'closed'}" for name, status in answers.items()))


def test_the_head_cap_counts_heads_only_not_bodies_on_a_kept_alive_connection(real: ToolrunServer) -> None:
    """A 900 KB body arriving with its head, then a second request on the same connection: both 200;
    and a head of 60 KB (under the 64 KiB cap) is fine."""
    body = json.dumps({"a": "x" * 900_000}).encode()
    request = b"POST /tools/h.piped HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    request += b"Content-Length: %d\r\n\r\n" % len(body) + body
    last = request.replace(b"HTTP/1.1\r\n", b"HTTP/1.1\r\nConnection: close\r\n", 1)
    status, answer = raw_request(real, request + last, half_close=False)
    assert status == 200 and answer.count(b"HTTP/1.1 200 OK") == 2, answer[:300]
    head_of_60k = b"GET /healthz HTTP/1.1\r\n" + HOST + b"X-Pad: " + b"p" * 60_000 + b"\r\nConnection: close\r\n\r\n"
    assert raw_request(real, head_of_60k)[0] == 200


def test_a_value_too_long_for_one_command_line_is_a_400_not_a_500(real: ToolrunServer) -> None:
    body = json.dumps({"v": "x" * 100_000 + "\u00e9" * 20_000}, ensure_ascii=False).encode()
    assert len(body) < 1024 * 1024  # under max_body_bytes: the body is fine, the command is not
    response = httpx.post(real.url + "/tools/h.t_str", content=body, headers=JSON, timeout=30)
    assert_clean_4xx(response, "stdin", status=400)


def test_a_body_nested_200000_deep_is_a_400_from_the_real_server(real: ToolrunServer) -> None:
    body = b"[" * 200_000 + b"]" * 200_000
    response = httpx.post(real.url + "/tools/h.t_list", content=body, headers=JSON, timeout=30)
    assert_clean_4xx(response, "nested too deeply", status=400)


def test_an_api_key_never_appears_in_the_server_log(real: ToolrunServer) -> None:
    """Every way a key can travel, valid, revoked and made-up, plus hostile framings around it;
    then the whole log (access log at info, toolrun at debug) is searched for it."""
    key = create_key(real.env, "kim", "admin")
    revoked = create_key(real.env, "lee")
    assert toolrun_cli("keys", "revoke", revoked.split("_")[1], env=real.env).returncode == 0
    made_up = "trk_abcdefghij_" + "Q" * 43
    secrets = [key, revoked, made_up]

    def forms(k: str) -> dict[str, str]:
        return {
            "raw": k,
            "quoted": quote(k, safe=""),
            "every byte": "".join(f"%{b:02X}" for b in k.encode()),
            "secret": k.split("_", 2)[2],
        }

    with httpx.Client(base_url=real.url, timeout=10) as client:
        for k in secrets:
            for value in forms(k).values():
                for name in ("api-key", "api%2Dkey", "api%2dkey", "%61pi-key", "API-KEY", "api-key%20"):
                    for path in ("/whoami", "/tools", "/search", "/users", "/tools/h.t_str", "/mcp", "/nope"):
                        client.get(f"{path}?{name}={value}&format=json")
                    client.post(f"/tools/h.t_str?{name}={value}", content=b'{"v": "x"}', headers=JSON)
                    client.post(f"/tools/h.t_str?{name}={value}", content=b"{bad", headers=JSON)
                client.get(f"/whoami?api-key={value}&api-key={value}")
            client.get("/whoami", headers={"X-API-Key": k})
            client.get("/whoami", headers={"Authorization": f"Bearer {k}"})
            client.get("/users?keys=true", headers={"X-API-Key": k})
            client.post("/tools/h.t_str", content=b'{"v": 1}', headers={**JSON, "X-API-Key": k})
            client.post("/tools/h.missing", content=b"{}", headers={**JSON, "Authorization": f"Bearer {k}"})
            client.post("/mcp", content=b"{}", headers={**JSON, "X-API-Key": k})
            client.post("/mcp?api-key=" + k, content=b"not json", headers=JSON)
            client.post("/tools/h.t_str", content=b"x" * (2 << 20), headers={**JSON, "X-API-Key": k})
        for k in secrets:  # broken framings that carry a key
            raw_request(real, b"GET /whoami?api-key=" + k.encode() + b" HTTP/1.1\r\n" + HOST + b"X: \x00\r\n\r\n")
            raw_request(
                real, b"GET /whoami HTTP/1.1\r\n" + HOST + b"X-API-Key: " + k.encode() + b"\r\nBad Header\r\n\r\n"
            )
            raw_request(real, b"GET /whoami?api-key=" + k.encode() + b"\r\n\r\n")
    assert real.alive()
    real.stop()
    log = real.log()
    assert "toolrun.access" in log and '"GET /whoami?api-key=[redacted]' in log, log[-3000:]
    for k in secrets:
        for form, text in forms(k).items():
            assert text not in log, f"the {form} form of a key is in the log"


def test_a_key_sent_where_no_key_belongs_is_not_logged_either(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, CATALOG)
    with ToolrunServer(tmp_path / "server", catalog, {"SVC_LOG_LEVEL": "info"}).start() as server:
        key = create_key(server.env, "kim")
        with httpx.Client(base_url=server.url, timeout=10) as client:
            assert client.get(f"/tools/{key}").status_code == 404
            assert client.get(f"/whoami?x=1;api-key={key}").status_code == 401  # `;` separates nothing
        server.stop()
        assert key.split("_", 2)[2] not in server.log()
