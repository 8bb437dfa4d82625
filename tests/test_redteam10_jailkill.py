"""Red team 10 on a sandboxed call's timeout (issue 34: "nothing a sandboxed tool starts outlives its call").

At a timeout the server killed the call's process group (bwrap, and what stayed in its group), then what it found
outside it. A tool's shell is the jail's first process, and it may leave the group (`exec setsid sh -c ...`: it is
no group's leader, so setsid(2) succeeds in place). Its child left in the group died at once with the group's kill;
the shell, spinning on `kill -0 $child`, saw that and ran its next command, before bwrap's own death (the group's
kill too) brought it the parent-death signal: 8 calls in 12 wrote their file after the timeout. Everything the
kill will reach is now stopped before anything is killed.
"""

from __future__ import annotations

from support import jails
from support.jails import Jail, said

server, base, jail = jails.server, jails.base, jails.jail


def test_a_sandboxed_tool_runs_no_command_after_its_timeout(jail: Jail) -> None:
    """On the code before the fix the file was written after the timeout (8 calls in 12 on this machine)."""
    out = jail.writable("out")
    jail.write(
        "group: t\ntools:\n  - name: late\n    public: true\n    timeout: 0.5\n"
        f"    sandbox: {{writable: [{out}]}}\n"
        "    exec: |\n"
        "      sleep 30 & w=$!\n"
        f'      exec setsid sh -c "while kill -0 $w 2>/dev/null; do :; done; echo x > {out}/late"\n'
    )
    for _ in range(3):
        done = jail.call("t.late")
        assert "timeout after 0.5s" in said(done), said(done)
        assert not (out / "late").exists(), "the tool ran a command after its timeout"
