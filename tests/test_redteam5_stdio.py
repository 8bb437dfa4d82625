"""The sixth red team on identity over stdio: a desktop agent's `toolrun serve --stdio` started with an API key
(TOOLRUN_API_KEY), driven by the SDK's own stdio client. The test failed on the code before its fix.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from support.keys import mint_key
from support.mcp import mcp_stdio, text_of
from support.servers import clean_env, toolrun_cli


def test_a_key_revoked_while_a_stdio_server_runs_stops_working_there(tmp_path: Path) -> None:
    """Over HTTP every request checks its key; `serve --stdio` checked TOOLRUN_API_KEY once, at start, and acted for
    that key's user for as long as the process lived (a desktop agent's session lasts days): after `toolrun keys
    revoke` ("revoke a key at once, on every server sharing the store") the agent still ran the user's tools. The
    key store is asked again (at most once a second): a revoked key's calls are refused within a second."""
    home = tmp_path / "home"
    key = mint_key(home, "olga", ["ops"])
    prefix = key.split("_")[1]

    async def main() -> tuple[Any, Any, float]:
        async with mcp_stdio(home, env={"TOOLRUN_API_KEY": key}) as client:
            before = await client.call_tool("execute", {"key": "ops.restart", "arguments": {"service": "db"}})
            revoked = toolrun_cli("keys", "revoke", prefix, env=clean_env(home))
            assert revoked.returncode == 0, revoked.stderr
            at = time.monotonic()
            while True:  # polled, not slept: the answer changes within a second of the revocation
                after = await client.call_tool("execute", {"key": "ops.restart", "arguments": {"service": "db"}})
                if after.is_error or time.monotonic() - at > 5:
                    return before, after, time.monotonic() - at
                await anyio.sleep(0.1)

    before, after, took = anyio.run(main)
    assert text_of(before) == "restarted db"
    assert after.is_error, f"a revoked key still ran a tool {took:.1f} s after its revocation: {text_of(after)}"
    assert "TOOLRUN_API_KEY is no longer a valid key" in text_of(after) and took < 3, (text_of(after), took)
