"""Red team 10 on the start probe (issue 34, item 4: "anything else the server starts, too").

At start (and, while the host cannot sandbox, again at a `/readyz` or a tool entry at most every 10 s) a server runs
`/bin/true` in the default jail to learn whether sandboxes work here. That probe (setpriv, a shell, bwrap, `true`)
was started with the server's whole environment: the operator's secrets (`SVC_METRICS_TOKEN`, the Redis URL with its
password, whatever was exported), in processes that are not made non-dumpable, running as the server's user (as
`nobody` under a root server). Any process of that user could read them from `/proc/<pid>/environ` while the probe
ran, which is exactly what the serving processes and the helpers the server starts are protected against. Here the
fake bwrap records the environment it was given, as any process of the probe could be read.
"""

from __future__ import annotations

import os
from pathlib import Path

from support import jails
from support.binaries import require_binary
from support.jails import Jail, said

server, base, jail = jails.server, jails.base, jails.jail

SECRETS = {"SVC_METRICS_TOKEN": "rt10-metrics-secret", "MY_SECRET": "rt10-operator-secret"}


def test_the_start_probe_carries_none_of_the_servers_secrets(jail: Jail) -> None:
    """On the code before the fix the probe's bwrap had both secrets in its environment."""
    real = require_binary("bwrap")
    fake = jail.base / "bin"
    fake.mkdir(mode=0o755)
    seen = jail.base / "seen"
    seen.mkdir(mode=0o777)
    seen.chmod(0o777)
    (fake / "bwrap").write_text(f'#!/bin/sh\nenv > {seen}/env.$$\nexec {real} "$@"\n')
    (fake / "bwrap").chmod(0o755)
    jail.write("group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {}\n")
    done = jails.toolrun_as(
        jail.server,
        jail.home,
        "validate-catalog",
        str(jail.catalog),
        env={"PATH": f"{fake}:{os.environ['PATH']}"} | SECRETS,
    )
    assert done.returncode == 0, said(done)
    dumps = [path.read_text() for path in sorted(seen.iterdir())]
    assert dumps, "the probe did not run bwrap"
    for text in dumps:
        assert "TOOLRUN_CALL=" in text  # the probe still carries the token its watchdog finds it by
        for name, value in SECRETS.items():
            assert value not in text, f"the probe carried {name}"


def test_the_probe_still_tells_a_host_that_cannot_sandbox(base: Path) -> None:
    """With the smaller environment a bwrap that fails is still reported, with its own words."""
    fake = base / "bin"
    fake.mkdir(mode=0o755)
    (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    (fake / "bwrap").chmod(0o755)
    j = Jail(base, "user" if os.geteuid() else "root")
    j.write("group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n    sandbox: {}\n")
    done = jails.toolrun_as(
        j.server, j.home, "validate-catalog", str(j.catalog), env={"PATH": f"{fake}:{os.environ['PATH']}"}
    )
    assert "No permissions to create new namespace" in said(done), said(done)
