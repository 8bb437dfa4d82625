"""Red team 11 on the stdio door's identity (issue 34's kind): a blank TOOLRUN_API_KEY is no key at all.

`toolrun serve --stdio` acts for the user of `$TOOLRUN_API_KEY`, or, without the variable, as the local operator
(every tool). docs/mcp.md's own recipes fill the variable from the client's environment or a prompt
(`${env:TOOLRUN_API_KEY}`, `${input:...}`): when that is empty, the client passes `TOOLRUN_API_KEY=""`, and the
server served the agent as the operator, with every tool, instead of the key's user (the key was stripped, and an
empty key read as none). Now a variable that is set but blank stops the server with a message saying so. The test
failed on the code before its fix (the server answered `initialize` and served).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support.mcp import CATALOG
from support.servers import TOOLRUN, clean_env

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "rt11", "version": "1"}},
}


@pytest.mark.parametrize("blank", ["", "   ", "\t"])
def test_a_blank_toolrun_api_key_stops_the_stdio_server(tmp_path: Path, blank: str) -> None:
    env = {**clean_env(tmp_path / "home"), "TOOLRUN_API_KEY": blank}
    done = subprocess.run(
        [TOOLRUN, "serve", "--stdio", "-c", str(CATALOG)],
        input=json.dumps(INITIALIZE) + "\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert '"result"' not in done.stdout, f"served as the operator with TOOLRUN_API_KEY={blank!r}: {done.stdout[:300]}"
    assert done.returncode != 0
    assert "TOOLRUN_API_KEY is set but empty" in done.stderr, done.stderr
