"""Red team 8 on sandbox.jail_env (issue 34): outside its shell a tool's names travel as `TOOLRUN_JAILED_<name>`,
and words before its command give them back.

Those words were one argument (`sh -c WORDS+COMMAND`), which the kernel takes up to 128 KiB: a tool with a few
thousand variables (a wide `env_passthrough`, a generated `env:`), which ran before red team 7, failed every call
with "OSError: [Errno 7] Argument list too long" (`/usr/bin/unshare`, `setpriv`, `prlimit`). Past 64 KiB the words
now travel in variables of their own, each under the kernel's limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import jails
from support.jails import Jail, need_root, said

server, base, jail = jails.server, jails.base, jails.jail

PLAIN = {"TOOLRUN_SPEEDUPS": "jail_pool"}  # no jail prepared ahead: the jail is started with the call
MANY = {f"A_VARIABLE_OF_A_GENERATED_CATALOG_NUMBER_{n:05d}": f"value {n} '\"$(x)\n" for n in range(2500)}
ODD = {"X": "plain x", "TOOLRUN_JAILED_X": "the tool's own", "IFS_": "i"}
SHOW = "env | grep -c '^A_VARIABLE_OF'; echo \"$X|$TOOLRUN_JAILED_X|$A_VARIABLE_OF_A_GENERATED_CATALOG_NUMBER_02499\""
EXPECTED = f"2500\nplain x|the tool's own|{MANY['A_VARIABLE_OF_A_GENERATED_CATALOG_NUMBER_02499']}\n"


def _catalog(jail: Jail, tools: dict[str, dict[str, object]]) -> None:
    entries = [
        {"name": name, "public": True, "exec": SHOW, "env": {**MANY, **ODD}, **extra} for name, extra in tools.items()
    ]
    jail.write(json.dumps({"group": "t", "tools": entries}))


@pytest.mark.parametrize("speedups", [{}, PLAIN], ids=["pool", "plain"])
def test_a_sandboxed_tool_with_thousands_of_variables_gets_each(jail: Jail, speedups: dict[str, str]) -> None:
    """On the code before the fix every call but the pool's without limits failed: Argument list too long."""
    _catalog(jail, {"boxed": {"sandbox": {}}, "limited": {"sandbox": {}, "limits": {"cpu": 30}}})
    for key in ("t.boxed", "t.limited"):
        done = jails.toolrun_as(jail.server, jail.home, "call", "-c", str(jail.catalog), key, env=speedups)
        assert done.returncode == 0, said(done)[-600:]
        assert done.stdout == EXPECTED, said(done)[-600:]


def test_a_user_tool_with_thousands_of_variables_gets_each(base: Path) -> None:
    """On the code before the fix: "OSError: [Errno 7] Argument list too long: '/usr/bin/setpriv'"."""
    need_root()
    jail = Jail(base, "root")
    _catalog(jail, {"as_user": {"user": "toolrun-test"}, "limited": {"user": "toolrun-test", "limits": {"cpu": 30}}})
    for key in ("t.as_user", "t.limited"):
        done = jail.call(key)
        assert done.returncode == 0, said(done)[-600:]
        assert done.stdout == EXPECTED, said(done)[-600:]
