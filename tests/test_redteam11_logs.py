"""Red team 11 on the server's log lines (issue 34's kind, a hostile caller): text a caller chooses must not turn a
log line around.

The text log escaped control characters (a `%0A` in a path starts no forged line), but wrote bidi controls as they
came: `POST /tools/%E2%80%AE...` put a raw U+202E (RIGHT-TO-LEFT OVERRIDE) in the access line, and a terminal or an
editor showed the rest of that line, the status the server appended included, reversed, in an order the caller
chose. The test failed on the code before its fix (the raw U+202E was in the log).
"""

from __future__ import annotations

from pathlib import Path

import httpx

from support.servers import serve_catalog, wait_until

CATALOG = """\
group: t
tools:
  - name: echo
    exec: echo {{ msg | quote }}
    params:
      - {name: msg, type: str}
"""

# Each reorders the text after it (or joins it invisibly): an override, an embedding, an isolate, a mark.
BIDI = ["\u202e", "\u202b", "\u2067", "\u200f", "\u061c", "\u2066", "\u200b"]


def test_bidi_controls_in_a_path_are_escaped_in_the_servers_log(tmp_path: Path) -> None:
    with serve_catalog(tmp_path, CATALOG, {"SVC_WORKERS": 1}) as server:
        server.start()
        for i, char in enumerate(BIDI):
            quoted = "".join(f"%{b:02X}" for b in char.encode())
            answer = httpx.post(f"{server.url}/tools/t.{quoted}002 lol{i}", json={}, timeout=10)
            assert answer.status_code == 404
        wait_until(lambda: "lol6" in server.log(), 5, "the access lines")
        log = server.log()
    lines = [line for line in log.splitlines() if "lol" in line]
    assert len(lines) == len(BIDI), log
    for char, line in zip(BIDI, lines, strict=True):
        assert char not in line, f"raw U+{ord(char):04X} in the log: {line!r}"
        assert f"\\u{ord(char):04x}" in line, line
