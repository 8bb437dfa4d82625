"""Red team 10 on the group kill after a call (issue 34: "a process id reused between ... and its kill").

A call's shell is started in a session of its own: its pid is its process group's id. When the shell exits, the
server reaps it at once, waits up to 0.2 s for a process that still holds its output, and then kills the group
(`killpg`), so that what the tool left in it dies. Once the shell is reaped, and the tool's background process left
the group (`setsid cmd &`, holding the output), the group is empty and its id is free: the kernel hands ids out in
order, and a tool that forks until the last id given is just below its shell's (32768 ids on this machine: a few
seconds of forking) makes the next process started on the machine take it. A server starts every call's process as
a session leader: another caller's call started in that moment got the id, and the group kill of the first call
killed it (SIGKILL, as the server: root, for a root server). Here the kernel's `ns_last_pid` stands in for the
forking: the victim is started, as the server starts a call, right after the shell was reaped.

The server now reaps the shell only after the group kill: until then its id stays taken (a zombie holds it), so no
other process can have it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from support import jails
from support.jails import need_root
from support.procs import pids_matching
from support.servers import wait_until
from support.speedups import hold
from toolrun.exec import executor, procguard

base = jails.base


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "thread"])
def test_the_group_kill_after_a_call_never_reaches_a_process_that_took_the_shells_id(
    base: Path, pidfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the code before the fix the victim, a session leader started right after the tool's shell exited with the
    shell's id, was killed by that call's group kill; with a pidfd telling the exit, and with a thread waiting for it
    (the `pidfd` speedup off)."""
    need_root()  # ns_last_pid is written by root only
    hold(monkeypatch, "pidfd", pidfd)
    mark = base / "pgid"
    holder = f"setsid sleep 2.{os.getpid() % 1000:03d} </dev/null 2>/dev/null &"

    async def go() -> tuple[int, int, bool]:
        call = asyncio.ensure_future(
            executor.run(f"{holder} echo $$ > {mark}", timeout=10, env={"PATH": "/usr/bin:/bin"})
        )
        while not mark.exists() or not mark.read_text().strip():
            await asyncio.sleep(0.005)
        shell = int(mark.read_text())
        for _ in range(25):  # the shell exits at once; the server learns it from its pidfd (and reaped it, before)
            if not os.path.exists(f"/proc/{shell}"):
                break
            await asyncio.sleep(0.004)
        victim = None
        for _ in range(5):  # another process on this machine may take the id first: try again
            if os.path.exists(f"/proc/{shell}"):
                break  # still taken (a zombie): nothing can get it
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(shell - 1))
            victim = subprocess.Popen(["sleep", "30"], start_new_session=True)
            if victim.pid == shell:
                break
            victim.kill()
            victim.wait()
            victim = None
        await call
        if victim is None:
            return shell, 0, True
        try:
            return shell, victim.pid, victim.poll() is None
        finally:
            victim.kill()
            victim.wait()

    try:
        shell, victim, alive = asyncio.run(go())
    finally:
        for pid in pids_matching(holder.split(" <")[0].removeprefix("setsid "), "sleep"):
            os.kill(pid, signal.SIGKILL)
    assert alive, f"the call's group kill killed process {victim}, started after its shell {shell} was gone"


def test_a_timeout_kill_spares_a_process_given_the_id_of_one_it_found(monkeypatch: pytest.MonkeyPatch) -> None:
    """procguard.kill_call reads /proc, then signals what it found (docs/security.md wrote this down as not
    contained). Here the process it found, one of the call's that left its group, exits right after the scan and
    a new process (not the tool's) is given its id; on the code before the fix the kill that followed killed it."""
    need_root()
    token = procguard.call_token()
    shell = subprocess.Popen(["sleep", "30"], start_new_session=True)
    straggler = subprocess.Popen(
        ["sleep", "31"], env={procguard.CALL_ENV: token, "PATH": "/usr/bin:/bin"}, start_new_session=True
    )
    victims: list[subprocess.Popen[bytes]] = []
    scan = procguard._scan

    def racing(root: int | None, needle: bytes, exact: bool, since: int = 0) -> object:
        found = scan(root, needle, exact, since)
        if straggler.pid in found and not victims:
            straggler.kill()  # it exits after the scan saw it...
            straggler.wait()
            for _ in range(5):  # ...and its id goes to a new process (another may take it first: again)
                with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                    f.write(str(straggler.pid - 1))
                victim = subprocess.Popen(["sleep", "32"], start_new_session=True)
                if victim.pid == straggler.pid:
                    victims.append(victim)
                    break
                victim.kill()
                victim.wait()
        return found

    monkeypatch.setattr(procguard, "_scan", racing)
    # A process's start time counts clock ticks (10 ms): the new process is told apart from one started in an earlier
    # tick. (Giving an id to a new process within the tick its last owner started takes a tool all the ids there are,
    # 32768 here, in 10 ms: far beyond what a machine forks.)
    time.sleep(0.05)
    try:
        procguard.kill_call(shell.pid, token)
        assert shell.wait(5) == -signal.SIGKILL  # the call's own processes still die
        assert victims, "no process could be given the straggler's id (a busy machine): run it again"
        assert victims[0].poll() is None, "the timeout's kill reached a process started after its scan"
    finally:
        for proc in (shell, straggler, *victims):
            proc.kill()
            proc.wait()


def test_a_timeout_kill_lets_no_process_it_found_run_its_next_command(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill_call killed the processes it found one by one, in a set's order: a tool's shell that had left the call's
    group (`setsid sh -c '...'`) and waited for one child (`wait $w`) ran its next command when that child was killed
    before it. A tool decides that order itself (a set of pids is ordered by pid modulo its table's size: a shell
    whose id is just below a multiple of 2048, with 600 children, comes last, its first child first; forking
    `true` until the next id is right got it there, and the file was written after the timeout 6 times in 6). Here
    the scan's answer is put in that order directly. On the code before the fix the file was written."""
    token = procguard.call_token()
    mark, leak = base / "w", base / "leak"
    script = f"sleep 60 & w=$!; for i in $(seq 400); do sleep 60 & done; echo $w > {mark}; wait $w; echo x > {leak}"
    env = {procguard.CALL_ENV: token, "PATH": "/usr/bin:/bin"}
    shell = subprocess.Popen(["sleep", "30"], start_new_session=True)  # the call's own shell, its group
    escaped = subprocess.Popen(["sh", "-c", script], env=env, start_new_session=True)
    scan = procguard._scan

    def adverse(root: int | None, needle: bytes, exact: bool, since: int = 0) -> dict[int, bytes]:
        found = scan(root, needle, exact, since)
        waited = int(mark.read_text())
        order = [waited, *(p for p in found if p not in (waited, escaped.pid)), escaped.pid]
        return {p: found[p] for p in order if p in found}

    monkeypatch.setattr(procguard, "_scan", adverse)
    try:
        wait_until(lambda: mark.exists() and mark.read_text().strip() != "", 10, "the escaped shell's children")
        procguard.kill_call(shell.pid, token)
        escaped.wait(5)
        time.sleep(0.3)
        assert not leak.exists(), "a process the timeout found ran its next command"
        assert escaped.returncode == -signal.SIGKILL
    finally:
        for proc in (shell, escaped):
            proc.kill()
            proc.wait()
