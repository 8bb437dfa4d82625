"""The access log line written straight to the handler is the line logging would write."""

from __future__ import annotations

import io
import json
import logging
import re

import pytest

from toolrun.server import accesslog as logs
from toolrun.telemetry.logs import formatter


@pytest.fixture()
def access() -> logging.Logger:
    logger = logging.getLogger("toolrun.access")
    saved = (logger.handlers[:], logger.propagate, logger.level)
    yield logger
    logger.handlers[:], logger.propagate = saved[0], saved[1]
    logger.setLevel(saved[2])


def _lines(logger: logging.Logger, fmt: str, direct: bool) -> list[str]:
    stream = io.StringIO()
    handler = logs.AccessHandler(stream)
    handler.setFormatter(formatter(fmt))
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = not direct  # propagation sends the line through logging's records instead
    assert (logs._direct(logger) is not None) is direct
    logs.access_line("127.0.0.1", "POST", "/tools/x\n2026-01-01 forged", "?a=1", 200, 1.5)
    logs.access_line("::1", "GET", "/healthz", "", 404, 0.25)
    return stream.getvalue().splitlines()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_the_direct_line_is_what_logging_writes(access: logging.Logger, fmt: str) -> None:
    direct, routed = _lines(access, fmt, True), _lines(access, fmt, False)
    assert len(direct) == len(routed) == 2
    if fmt == "json":
        parsed = [json.loads(line) for line in direct + routed]
        for item in parsed:
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", item.pop("ts"))
        assert parsed[:2] == parsed[2:]
        assert parsed[0]["path"] == "/tools/x\n2026-01-01 forged" and parsed[0]["status"] == 200
        assert parsed[1] == {
            "level": "info",
            "logger": "toolrun.access",
            "message": '::1 "GET /healthz" 404 0.2ms',
            "client": "::1",
            "method": "GET",
            "path": "/healthz",
            "query": "",
            "status": 404,
            "ms": 0.25,
        }
    else:
        stamp = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
        assert all(stamp.match(line) for line in direct + routed)
        assert [stamp.sub("", line) for line in direct] == [stamp.sub("", line) for line in routed]
        expected = 'INFO toolrun.access: 127.0.0.1 "POST /tools/x\\n2026-01-01 forged?a=1" 200 1.5ms'
        assert stamp.sub("", direct[0]) == expected


def test_a_filter_or_another_handler_takes_the_logging_way(access: logging.Logger) -> None:
    handler = logs.AccessHandler(io.StringIO())
    handler.setFormatter(formatter("text"))
    access.handlers[:] = [handler]
    access.propagate = False
    assert logs._direct(access) is not None
    handler.addFilter(lambda record: False)
    assert logs._direct(access) is None
    handler.filters.clear()
    access.handlers.append(logging.StreamHandler(io.StringIO()))
    assert logs._direct(access) is None
