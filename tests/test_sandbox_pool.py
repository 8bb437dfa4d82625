"""Jails prepared ahead (exec/sandboxpool.py, the `jail_pool` speedup) and the availability probe (issue 34): with a
real bwrap, a jail serves one call and shows it nothing of another's, a changed profile never runs in a jail prepared
for the old one, a waiter runs nothing but a whole message, and neither a jail nor a probe outlives its server
(a real `toolrun serve`, killed, then /proc searched).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from support import jails
from support.binaries import require_binary
from support.catalogs import write_catalog
from support.jails import jail_writable
from support.procs import pids_matching
from support.servers import ToolrunServer, wait_until
from support.speedups import hold
from support.sysusers import unprivileged
from toolrun.exec import executor, sandbox, sandboxpool, spawn
from toolrun.models import ResourceLimits, Sandbox

# The sandbox fixtures (support/jails.py): `server` ("root", "user"), `base` (a folder every user may enter).
server, base = jails.server, jails.base


@pytest.fixture
def pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The pool on in this process (whatever TOOLRUN_SPEEDUPS says), emptied after the test."""
    require_binary("bwrap")
    hold(monkeypatch, "jail_pool", True)
    yield
    sandboxpool.close_all()


def _run(command: str, box: Sandbox, **kwargs: object) -> tuple[int, str, str]:
    async def go() -> tuple[int, str, str]:
        done = await executor.run(command, timeout=10, env={"PATH": "/usr/bin:/bin"}, sandbox=box, **kwargs)  # type: ignore[arg-type]
        return done.returncode, done.stdout, done.stderr

    return asyncio.run(go())


def _twice_then_ready(command: str, box: Sandbox) -> None:
    """Two calls of `box` (the second makes the pool prepare its jails), then wait until they are ready."""
    for _ in range(2):
        assert _run(command, box)[0] == 0

    def ready() -> bool:
        return sum(sandboxpool.prepared().values()) >= sandboxpool.PER_PROFILE

    asyncio.run(_fill_wait(ready))


async def _fill_wait(ready: object) -> None:
    # The refill runs in the pool's starter threads, after the call that asked for it.
    deadline = time.monotonic() + 10
    while not ready() and time.monotonic() < deadline:  # type: ignore[operator]
        await asyncio.sleep(0.02)


def test_two_concurrent_calls_see_neither_the_others_processes_nor_its_tmp(pool: None) -> None:
    box = Sandbox(profile="default", network="none")
    _twice_then_ready("true", box)
    command = (
        "echo mine > /tmp/$TAG; sleep 0.6 & sleep 0.3; ls /tmp | tr '\\n' ' '; echo; ls /proc | grep -c '^[0-9]'; wait"
    )

    async def both() -> list[tuple[int, str, str]]:
        calls = [
            executor.run(command, timeout=10, env={"PATH": "/usr/bin:/bin", "TAG": tag}, sandbox=box)
            for tag in ("first", "second")
        ]
        return [(d.returncode, d.stdout, d.stderr) for d in await asyncio.gather(*calls)]

    (code1, out1, err1), (code2, out2, err2) = asyncio.run(both())
    assert (code1, code2) == (0, 0), (err1, err2)
    assert out1.split("\n")[0].split() == ["first"] and out2.split("\n")[0].split() == ["second"], (out1, out2)
    # its shell, its sleep, and ls and grep: never the other call's (which runs its own four at the same moment)
    assert int(out1.split("\n")[1]) <= 4 and int(out2.split("\n")[1]) <= 4, (out1, out2)
    # each jail serves one call: the next call's /tmp is empty again
    assert _run("ls -A /tmp | wc -l", box)[1].strip() == "0"


def test_a_changed_profile_never_runs_in_a_jail_prepared_for_the_old_one(pool: None, base: Path) -> None:
    """The jails wait for one folder; it is replaced by another of the same name, then a catalog file appears in
    the next one: each call sees what a fresh sandbox would, and the old jails are not used."""
    data = base / "data"
    data.mkdir()
    (data / "which").write_text("old\n")
    os.chmod(data, 0o755)
    box = Sandbox(profile="default", network="none", readable=(str(data),))
    _twice_then_ready(f"cat {data}/which", box)
    before = set(sandboxpool.prepared())
    os.rename(data, base / "moved")
    data.mkdir()
    (data / "which").write_text("new\n")
    os.chmod(data, 0o755)
    assert _run(f"cat {data}/which", box)[1] == "new\n"  # not the old folder a prepared jail holds
    assert not before & set(sandboxpool.prepared())  # the old profile's jails were dropped, not used
    _run(f"cat {data}/which", box)  # and now jails for the new folder are prepared
    asyncio.run(_fill_wait(lambda: sum(sandboxpool.prepared().values()) >= sandboxpool.PER_PROFILE))
    catalog = data / "tools.yaml"
    catalog.write_text("group: secret\n")
    catalog.chmod(0o644)
    sandbox.hide([str(catalog)])  # what loading it does: no sandbox may read it
    try:
        code, out, _ = _run(f"cat {catalog}", box)
        assert "secret" not in out and code != 0
    finally:
        sandbox.HIDDEN_FILES.difference_update({str(catalog)})


def _spy_starts(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0, cwd: str = "") -> list[tuple[int, int]]:
    """(the thread, the jail's pid) of every jail started from now on (each start `delay` seconds late); with `cwd`,
    only of jails that run in it (a refill an earlier test left in a starter thread starts jails of its own)."""
    started: list[tuple[int, int]] = []
    start = sandboxpool._start

    def spy(*args: object) -> sandboxpool.Jail:
        time.sleep(delay)
        jail = start(*args)  # type: ignore[arg-type]
        if not cwd or cwd in jail.launch.argv:
            started.append((threading.get_ident(), jail.pid))
        return jail

    monkeypatch.setattr(sandboxpool, "_start", spy)
    return started


def test_jails_start_off_the_event_loops_thread(pool: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start holds its thread until the drop program has exec'd (3-8 ms on a loaded machine): neither the jail a
    call starts when none is ready nor the ones prepared after it start on the loop's thread, which serves every
    other request meanwhile."""
    started = _spy_starts(monkeypatch)
    box = Sandbox(profile="default", network="none")

    async def go() -> int:
        for _ in range(3):  # none ready (started for the call), then prepared ahead, then taken
            done = await executor.run("echo hi", timeout=10, env={}, sandbox=box)
            assert done.stdout == "hi\n", done
        await _fill_wait(lambda: sum(sandboxpool.prepared().values()) >= sandboxpool.PER_PROFILE)
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert len(started) >= 1 + sandboxpool.PER_PROFILE, started
    assert loop_thread not in {thread for thread, _ in started}


def test_without_the_pool_a_jail_starts_off_the_event_loops_thread_too(monkeypatch: pytest.MonkeyPatch) -> None:
    require_binary("bwrap")
    hold(monkeypatch, "jail_pool", False)
    threads: list[int] = []
    start = spawn.start_command

    def spy(*args: object) -> object:
        threads.append(threading.get_ident())
        return start(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(spawn, "start_command", spy)

    async def go() -> int:
        done = await executor.run("echo hi", timeout=10, env={}, sandbox=Sandbox(profile="default", network="none"))
        assert done.stdout == "hi\n", done
        return threading.get_ident()

    loop_thread = asyncio.run(go())
    assert threads and loop_thread not in threads, threads


def test_a_call_cancelled_while_its_jail_starts_leaves_no_jail(
    pool: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the call is cancelled while its jail starts; only this call's jail counts (it runs in `tmp_path`)
    started = _spy_starts(monkeypatch, delay=0.3, cwd=str(tmp_path))
    # a set-up no other test asks for: a refill an earlier test left queued never starts a jail for it
    box = Sandbox(profile="cancelled", network="host")
    sandboxpool._starter().submit(time.sleep, 0).result()  # what earlier tests queued has begun: ours starts at once

    async def go() -> None:
        call = asyncio.ensure_future(executor.run("sleep 30", timeout=60, env={}, sandbox=box, cwd=str(tmp_path)))
        await asyncio.sleep(0.1)  # the call waits for its jail, which a starter thread is starting
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(go())
    wait_until(lambda: len(started) == 1, 10, "the jail's start to end")
    pid = started[0][1]

    def gone() -> bool:
        sandboxpool.prepared()  # a pool operation reaps the killed jails
        sandboxpool._reap_dying()
        return not os.path.exists(f"/proc/{pid}")

    wait_until(gone, 10, "the cancelled call's jail killed and reaped")


def _jail(box: Sandbox) -> sandboxpool.Jail:
    return asyncio.run(sandboxpool.take(box, None, None, ()))


def _end(jail: sandboxpool.Jail) -> tuple[int, bytes]:
    """Wait for the jail's exit: (its status, what it said on the check's channel)."""
    _, status = os.waitpid(jail.pid, 0)
    for fd in (jail.out, jail.err):
        os.close(fd)
    jail.launch.close()
    return os.waitstatus_to_exitcode(status), jail.launch.heard


@pytest.mark.parametrize("shape", ["no closing frame", "a syntax error", "no frame at all"])
def test_a_waiter_runs_nothing_of_a_message_that_is_not_whole(pool: None, base: Path, shape: str) -> None:
    out = jail_writable(base / "out")
    box = Sandbox(profile="default", network="none", writable=(str(out),))
    jail = _jail(box)
    frame = "f00dfeed"
    body = f"echo ok >&3; touch {out}/ran"
    sent = {
        "no closing frame": f"{frame}\n{body}\n",
        "a syntax error": f"{frame}\n{body}; 'unclosed\n{frame}\n",
        "no frame at all": "",
    }[shape]
    os.write(jail.stdin, sent.encode())
    os.close(jail.stdin)
    code, heard = _end(jail)
    assert code != 0 and b"ok" not in heard.split(), (code, heard)
    assert not (out / "ran").exists()
    assert jail.launch.failure(code, "") == "the sandbox prepared for the call did not run it"


def test_the_tool_replaces_the_waiter_and_gets_the_calls_words_only(pool: None) -> None:
    box = Sandbox(profile="default", network="none")
    _twice_then_ready("true", box)
    command = "echo $$; ls /proc | grep -c '^[0-9]'; ls /proc/self/fd | tr '\\n' ' '; echo; env | sort; cat"

    async def go() -> tuple[int, str, str]:
        done = await executor.run(
            command, timeout=10, env={"PATH": "/usr/bin:/bin", "ODD": "a 'b'\n$c"}, sandbox=box, stdin=b"given\n"
        )
        return done.returncode, done.stdout, done.stderr

    code, out, err = asyncio.run(go())
    lines = out.split("\n")
    assert code == 0, err
    assert lines[0] == "1"  # the tool's shell is the jail's first process: the waiter exec'd into it
    assert int(lines[1]) <= 3  # it, ls and grep: nothing else lives in the jail
    assert lines[2].split() == ["0", "1", "2", "3"]  # no channel, no check descriptor left (3 is ls's own)
    assert "ODD=a 'b'" in out and "\n$c\n" in out and "PATH=/usr/bin:/bin" in out
    assert not any(line.startswith(("s=", "l=", "end=")) for line in lines)
    assert out.endswith("given\n")  # the call's stdin follows its message, unread by the waiter


# What a shell does with the command itself: its status, a trap, `set -e`, a syntax error, stdin, an exec.
_SHELL_WORDS = [
    "exit 5",
    "false",
    "return 3",
    "set -e; false; echo not reached",
    "trap 'echo bye' EXIT; echo hi",
    "echo hi )",
    "cat; echo read",
    "f() { return 4; }; f",
    "echo $0 $#; shift",
    "echo a; exec /bin/echo b",
    "set -u; echo $nope",
    "cd /nonexistent",
]


@pytest.mark.parametrize("command", _SHELL_WORDS)
def test_a_prepared_jails_shell_runs_the_command_as_a_fresh_jails_does(
    pool: None, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """The waiter becomes the tool's shell (it evaluates the command itself instead of starting a second shell, a
    jail's CPU cost, bench/README.md): the status, the output and the kind of error are a fresh jail's."""
    box = Sandbox(profile="default", network="none")
    _twice_then_ready("true", box)
    taken: list[sandboxpool.Jail] = []
    take = sandboxpool.take

    async def spy(*args: object, **kwargs: object) -> sandboxpool.Jail:
        taken.append(await take(*args, **kwargs))  # type: ignore[arg-type]
        return taken[-1]

    monkeypatch.setattr(sandboxpool, "take", spy)
    asked = time.monotonic()
    pooled = _run(command, box, stdin=b"given\n")
    assert len(taken) == 1 and taken[0].born < asked  # the call ran in a jail prepared before it
    hold(monkeypatch, "jail_pool", False)
    fresh = _run(command, box, stdin=b"given\n")
    assert pooled[:2] == fresh[:2], (pooled, fresh)
    for words in ("Syntax error", "parameter not set", "can't shift", "can't cd", "bye"):
        assert (words in pooled[2] + pooled[1]) == (words in fresh[2] + fresh[1]), (pooled, fresh)


def test_a_prepared_jail_is_killed_whole_at_the_calls_timeout(pool: None) -> None:
    box = Sandbox(profile="default", network="none")
    _twice_then_ready("true", box)
    tag = f"pooltimeout{uuid.uuid4().hex[:10]}"
    daemon = f"setsid sh -c 'sleep 30; : {tag}' </dev/null >/dev/null 2>&1 &"

    async def go() -> tuple[bool, str]:
        command = f"{daemon} sleep 20; : {tag}"
        done = await executor.run(command, timeout=0.5, env={"PATH": "/usr/bin:/bin"}, sandbox=box)
        return done.timed_out, done.stderr

    started = time.monotonic()
    timed_out, stderr = asyncio.run(go())
    assert timed_out and stderr == "timeout after 0.5s" and time.monotonic() - started < 5
    wait_until(lambda: not pids_matching(tag), 5, "every process of the timed-out jail gone")


def test_limits_hold_in_a_prepared_jail(pool: None) -> None:
    box = Sandbox(profile="default", network="none")
    _twice_then_ready("true", box)
    limits = ResourceLimits(processes=3, open_files=17)
    _, out, err = _run("ulimit -n; for i in 1 2 3 4 5 6; do sleep 1 & done 2>&1 | head -1", box, limits=limits)
    assert out.split("\n")[0] == "17", (out, err)
    assert "fork" in (out + err).lower() or "resource" in (out + err).lower(), (out, err)


def test_idle_jails_are_reaped_and_a_profile_called_once_gets_none(pool: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandboxpool, "IDLE", 1.5)
    once = Sandbox(profile="once", network="host")
    box = Sandbox(profile="default", network="none")

    async def go() -> tuple[dict[str, int], dict[str, int], list[int]]:
        await executor.run("true", timeout=5, env={}, sandbox=once)
        await executor.run("true", timeout=5, env={}, sandbox=box)
        await executor.run("true", timeout=5, env={}, sandbox=box)
        await _fill_wait(lambda: sum(sandboxpool.prepared().values()) >= sandboxpool.PER_PROFILE)
        ready = sandboxpool.prepared()
        jails = [j.pid for js in sandboxpool._pool().jails.values() for j in js]
        await asyncio.sleep(2.5)  # the pool's own timer reaps them (no call needed)
        return ready, sandboxpool.prepared(), jails

    ready, later, jails = asyncio.run(go())
    assert list(ready.values()) == [sandboxpool.PER_PROFILE]  # one profile: the one called twice
    assert later == {}
    wait_until(lambda: not [p for p in jails if os.path.exists(f"/proc/{p}")], 5, "the idle jails gone")


# -- servers: nothing outlives them -----------------------------------------------------------------------------


def _serve_as(server: str, workdir: Path, catalog: Path, env: dict[str, str] | None = None) -> ToolrunServer:
    """`toolrun serve` as root, or as a user that is not root (setpriv), launched (not waited for)."""
    srv = ToolrunServer(workdir, catalog)
    srv.env |= env or {}
    argv = [sys.executable, "-m", "toolrun", "serve", "-c", str(catalog), "--host", "127.0.0.1"]
    argv += ["--port", str(srv.port)]
    if server == "user" and os.geteuid() == 0:
        uid, gid = unprivileged()
        for path in (workdir, srv.home):
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, uid, gid)
        argv = [require_binary("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]
    srv.spawn(argv, srv.env)
    return srv


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGTERM], ids=["killed", "stopped"])
def test_a_server_leaves_no_jail_or_waiter_behind(server: str, base: Path, stop: signal.Signals) -> None:
    marker = f"jailmark-{uuid.uuid4().hex[:12]}"
    data = base / marker
    data.mkdir()
    os.chmod(data, 0o755)
    (base / "cat").mkdir()
    catalog = write_catalog(
        base / "cat",
        f"group: t\ntools:\n  - name: boxed\n    public: true\n    exec: echo hi\n"
        f"    sandbox: {{readable: [{data}]}}\n",
    )
    srv = _serve_as(server, base / "srv", catalog)
    try:
        srv.ready()
        with httpx.Client(timeout=10) as client:
            for _ in range(3):
                answer = client.post(f"{srv.url}/tools/t.boxed", json={})
                assert answer.status_code == 200 and answer.text == "hi\n", answer.text
        waiting = wait_until(lambda: pids_matching(marker), 10, "jails prepared ahead")  # bwrap and its waiter
        os.kill(srv.pid, stop)
        srv.wait(10)
        left = []

        def none_left() -> bool:
            left[:] = pids_matching(marker)
            return not left

        try:
            wait_until(none_left, 5, "the jails gone with their server")
        except TimeoutError:
            pytest.fail(f"after the server's {stop.name}, its jails live on: {left} (they were {waiting})")
    finally:
        srv.stop()
        for pid in pids_matching(marker):
            os.kill(pid, signal.SIGKILL)


_SLOW_BWRAP = """\
#!/bin/sh
# A bwrap that never finishes setting the sandbox up ({marker}): the availability probe hangs in it.
while :; do sleep 0.2; done
"""


def test_a_server_killed_mid_probe_leaves_no_probe(server: str, base: Path) -> None:
    """A server probes bwrap at its start (and /readyz, describe): killed while the probe runs, the probe must go
    with it, as every sandboxed process does. The probe here hangs (a bwrap that never returns)."""
    marker = f"probemark-{uuid.uuid4().hex[:12]}"
    fake = base / marker
    fake.mkdir()
    os.chmod(fake, 0o755)
    (fake / "bwrap").write_text(_SLOW_BWRAP.format(marker=marker))
    os.chmod(fake / "bwrap", 0o755)
    (base / "cat").mkdir()
    catalog = write_catalog(base / "cat", "group: t\ntools:\n  - name: boxed\n    exec: echo hi\n    sandbox: true\n")
    srv = _serve_as(server, base / "srv", catalog, {"PATH": f"{fake}:{os.environ['PATH']}"})
    try:
        probing = wait_until(lambda: pids_matching(marker, "/bin/sh"), 30, "the server probing bwrap")
        os.kill(srv.pid, signal.SIGKILL)
        srv.wait(10)
        left: list[int] = []

        def none_left() -> bool:
            left[:] = pids_matching(marker, "/bin/sh")
            return not left

        try:
            wait_until(none_left, 5, "the probe gone with its server")
        except TimeoutError:
            pytest.fail(f"the probe outlived its server: {left} (it was {probing})")
    finally:
        srv.stop()
        for pid in pids_matching(marker):
            os.kill(pid, signal.SIGKILL)


def test_a_probe_that_never_finishes_is_killed_whole_at_its_timeout(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marker = f"probemark-{uuid.uuid4().hex[:12]}"
    fake = base / marker
    fake.mkdir()
    (fake / "bwrap").write_text(_SLOW_BWRAP.format(marker=marker))
    os.chmod(fake / "bwrap", 0o755)
    monkeypatch.setattr(sandbox, "PROBE_TIMEOUT", 1.0)
    started = time.monotonic()
    problem = sandbox._probe(str(fake / "bwrap"))
    assert "did not finish" in problem and time.monotonic() - started < 5
    assert not pids_matching(marker)


def test_a_catalog_folder_seen_before_is_listed_again_once_it_changed(base: Path) -> None:
    """Opening bound paths does not list an unchanged folder of catalog files again (bench/sandbox.py --binds), but a
    catalog file replaced there (a new inode at the same name) is what the next call checks against."""
    from toolrun.errors import SandboxUnavailable
    from toolrun.exec.sandboxpaths import open_binds

    folder = base / "catalogs"
    folder.mkdir()
    files = [str(folder / f"tools{i}.yaml") for i in range(3)]
    for path in files:
        Path(path).write_text("group: g\n")
    os.utime(folder, (time.time() - 5, time.time() - 5))  # changed long enough ago to be remembered
    for _ in range(2):
        with pytest.raises(SandboxUnavailable, match="toolrun's own"):
            open_binds((files[0],), (), None, (), True, files)
        open_binds((), (), str(folder), (), True, files).close()  # the folder, its catalog files covered
    fresh = base / "fresh.yaml"
    fresh.write_text("group: g\n")
    os.replace(fresh, files[1])  # a new inode under a name toolrun loaded
    with pytest.raises(SandboxUnavailable, match="toolrun's own"):
        open_binds((files[1],), (), None, (), True, files)
    binds = open_binds((), (), str(folder), (), True, files)
    try:
        assert str(folder) in binds.views  # shown as a copy of its entries: none of the catalog files
        assert not set(files).intersection(binds.views), binds.views
    finally:
        binds.close()
