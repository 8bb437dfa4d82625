"""executor.run: real /bin/sh processes, their groups, pipes, limits and deadlines (spec 2.6)."""

from __future__ import annotations

import asyncio
import os
import resource
import shlex
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.speedups import hold, override
from toolrun.exec import executor
from toolrun.models import ExecResult, ResourceLimits

MiB = 1024 * 1024
ENV = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8"}
PY = shlex.quote(sys.executable)


def run(command: str, *, timeout: float = 5.0, **kwargs: Any) -> ExecResult:
    return asyncio.run(executor.run(command, timeout=timeout, env=ENV, **kwargs))


def unique_seconds() -> str:
    """A `sleep` duration nothing else on this machine uses: finds our processes by command line."""
    return f"300.{uuid.uuid4().int % 10**12:012d}"


def processes_with(marker: str) -> dict[int, str]:
    found: dict[int, str] = {}
    needle = marker.encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmdline = fh.read()  # empty for a zombie: it holds nothing any more
        except OSError:
            continue
        if needle in cmdline:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def assert_none_survive(*markers: str, within: float = 3.0) -> None:
    """Poll /proc until no process carries a marker (SIGKILLed processes vanish in milliseconds)."""
    deadline = time.monotonic() + within
    alive = {}
    while time.monotonic() < deadline:
        alive = {pid: cmd for m in markers for pid, cmd in processes_with(m).items()}
        if not alive:
            return
        time.sleep(0.01)
    for pid in alive:  # leave the machine clean, then fail
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    raise AssertionError(f"processes outlived their call: {alive}")


@contextmanager
def fd_replaced_by_pipe(fd: int) -> Iterator[int]:
    """Point this process's `fd` at a fresh pipe (a never-ending stdin, or a stdout we can read)."""
    read_end, write_end = os.pipe()
    saved = os.dup(fd)
    os.dup2(read_end if fd == 0 else write_end, fd)  # inheritable, as a server's fds 0-2 are
    try:
        yield read_end
    finally:
        os.dup2(saved, fd)
        os.close(saved)
        os.close(read_end)
        os.close(write_end)


# -- results (spec 2.6.4, 2.6.5) -----------------------------------------------------------------


def test_exit_zero_returns_stdout_as_a_string() -> None:
    result = run("printf 'one\\ntwo'; echo note >&2")

    assert result.value() == "one\ntwo"
    assert (result.returncode, result.stderr, result.timed_out, result.truncated) == (0, "note\n", False, False)


def test_non_zero_exit_returns_returncode_stdout_and_stderr() -> None:
    assert run("echo out; echo err >&2; exit 3").value() == (3, "out\n", "err\n")


def test_a_tool_killed_by_a_signal_returns_a_negative_returncode() -> None:
    assert run("kill -9 $$").value() == (-9, "", "")


def test_timeout_returns_minus_one_empty_stdout_and_the_deadline() -> None:
    started = time.monotonic()
    result = run("echo partial; echo noise >&2; sleep 30", timeout=0.3)

    assert result.value() == (-1, "", "timeout after 0.3s")
    assert result.timed_out
    assert time.monotonic() - started < 2


def test_a_quiet_start_loses_no_output_and_keeps_every_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """`exit_first`: a child's pipes are read when it exits (or watched once it has run QUIET_START). The same
    results as pipes watched from the start: big outputs (past the pipe's 64 KiB, before and after QUIET_START),
    both streams, output capped, a grandchild that writes after the shell exited, a timeout."""
    big = f'{PY} -c \'import sys; sys.stdout.write("x" * 300000); sys.stderr.write("e" * 100000)\''
    commands = [
        (big, 5.0, ResourceLimits(output=1_000_000)),
        (big, 5.0, ResourceLimits(output=1000)),
        (f"sleep {executor.QUIET_START * 3}; head -c 200000 /dev/zero | tr '\\0' a", 5.0, None),
        ("echo early; (sleep 0.05; echo late) & echo out >&2", 5.0, None),
        ("echo partial; sleep 30", 0.3, None),
        ("printf hi", 5.0, None),
    ]

    def results() -> list[tuple[ExecResult, float]]:
        seen = []
        for command, timeout, limits in commands:
            started = time.monotonic()
            seen.append((run(command, timeout=timeout, limits=limits), time.monotonic() - started))
        return seen

    quiet = results()
    override(monkeypatch, "exit_first")
    watched = results()
    assert [r for r, _ in quiet] == [r for r, _ in watched]
    full, capped, late_big, early_late, timed_out, hi = (r for r, _ in quiet)
    assert (len(full.stdout), len(full.stderr), full.truncated) == (300000, 100000, False)
    assert capped.truncated and capped.bytes_kept == 2000
    assert late_big.stdout == "a" * 200000
    assert early_late.stdout == "early\nlate\n" and early_late.stderr == "out\n"
    assert timed_out.value() == (-1, "", "timeout after 0.3s") and quiet[4][1] < 2
    assert hi.stdout == "hi"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.5, "0.5"), (2, "2"), (2.0, "2"), (60.0, "60"), (0.25, "0.25"), (0.1, "0.1"), (3600, "3600"), (1e6, "1000000")],
)
def test_timeout_seconds_are_written_as_the_shortest_number(seconds: float, text: str) -> None:
    assert executor.format_seconds(seconds) == text


def test_output_that_is_not_utf8_is_decoded_with_replacement_characters() -> None:
    assert run("printf '\\377ok'").value() == "\ufffdok"


# -- process groups --------------------------------------------------------------------------------


def test_timeout_kills_the_whole_process_group_including_grandchildren() -> None:
    bg, piped, grand, quiet = (unique_seconds() for _ in range(4))
    command = (
        f"sh -c 'sleep {grand}; true' & sh -c 'sleep {quiet}; true' >/dev/null 2>&1 & sleep {bg} & sleep {piped} | cat"
    )
    started = time.monotonic()
    result = run(command, timeout=0.3)

    assert result.value() == (-1, "", "timeout after 0.3s")
    assert time.monotonic() - started < 2.5
    assert_none_survive(bg, piped, grand, quiet)


def test_timeout_kills_the_group_when_limits_wrap_the_shell_in_prlimit() -> None:
    require_binary("prlimit")
    marker = unique_seconds()
    result = run(f"sleep {marker} & sleep {marker}", timeout=0.3, limits=ResourceLimits(cpu=5, open_files=64))

    assert result.timed_out
    assert_none_survive(marker)


def test_a_finished_tool_returns_promptly_and_its_background_child_holding_stdout_dies() -> None:
    marker = unique_seconds()
    started = time.monotonic()
    result = run(f"sleep {marker} & echo hi", timeout=10)

    assert result.value() == "hi\n"
    assert time.monotonic() - started < 1.5  # the drain grace (0.2 s), not the 10 s deadline
    assert_none_survive(marker)


def test_a_finished_tool_leaves_no_detached_background_child_either() -> None:
    marker = unique_seconds()
    started = time.monotonic()
    result = run(f"sleep {marker} >/dev/null 2>&1 </dev/null & echo hi", timeout=10)

    assert result.value() == "hi\n"
    assert time.monotonic() - started < 1.5
    assert_none_survive(marker)


def test_a_shell_that_exits_before_its_deadline_is_not_a_timeout_though_a_child_holds_the_pipes() -> None:
    marker = unique_seconds()
    result = run(f"sleep {marker} & sleep 0.3; echo hi", timeout=1.0)

    assert result.value() == "hi\n"
    assert_none_survive(marker)


def test_output_a_background_child_writes_soon_after_the_shell_exits_is_kept() -> None:
    assert run("(sleep 0.01; echo late) & echo early").value() == "early\nlate\n"


def open_pipes() -> set[str]:
    pipes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            pipes.add(target)
    return pipes


def test_a_child_that_escapes_the_group_can_neither_hold_the_call_open_nor_leak_its_pipes() -> None:
    require_binary("setsid")
    marker = unique_seconds()
    pipes_before = open_pipes()
    started = time.monotonic()
    try:
        # Out of the group, holding stdout, stderr and an unread stdin payload.
        result = run(f"exec 3<&0; setsid sleep {marker} <&3 & echo hi", stdin=b"x" * MiB, timeout=10)
        elapsed = time.monotonic() - started
        leaked = open_pipes() - pipes_before
    finally:
        for pid in processes_with(marker):  # out of our reach by design: clean up by pid
            os.kill(pid, signal.SIGKILL)

    assert result.value() == "hi\n"
    assert elapsed < executor.DRAIN_GRACE + executor.KILL_WAIT + 1.5
    assert leaked == set()


def test_cancelling_a_call_kills_its_process_group() -> None:
    marker = unique_seconds()

    async def cancelled() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(executor.run(f"sleep {marker}; true", timeout=30, env=ENV), 0.3)

    asyncio.run(cancelled())
    assert_none_survive(marker)


def test_a_timeouts_scan_of_proc_runs_off_the_event_loops_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timeout's kill reads two files of every process of the host (tens of milliseconds on a busy one): the
    loop serves every other call meanwhile, and its escaped children still die."""
    from toolrun.exec import procguard

    require_binary("setsid")
    marker = unique_seconds()
    threads: list[int] = []
    kill_call = procguard.kill_call

    def spy(*args: Any) -> int:
        threads.append(threading.get_ident())
        time.sleep(0.3)  # a slow scan: the loop's timer below must not wait for it
        return kill_call(*args)

    monkeypatch.setattr(procguard, "kill_call", spy)

    async def go() -> tuple[int, float]:
        call = asyncio.ensure_future(executor.run(f"setsid sleep {marker} & sleep {marker}", timeout=0.2, env=ENV))
        await asyncio.sleep(0.25)  # the call timed out: its kill is under way
        started = time.monotonic()
        await asyncio.sleep(0.01)
        late = time.monotonic() - started
        result = await call
        assert result.timed_out, result
        return threading.get_ident(), late

    loop_thread, late = asyncio.run(go())
    assert threads and loop_thread not in threads, threads
    assert late < 0.2, late  # the spy sleeps 0.3 s in its thread
    assert_none_survive(marker)


def test_a_call_cancelled_again_while_its_kill_runs_still_kills_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolrun.exec import procguard

    require_binary("setsid")
    marker = unique_seconds()
    kill_call = procguard.kill_call

    def slow(*args: Any) -> int:
        time.sleep(0.3)
        return kill_call(*args)

    monkeypatch.setattr(procguard, "kill_call", slow)

    async def go() -> None:
        call = asyncio.ensure_future(executor.run(f"setsid sleep {marker} & sleep {marker}", timeout=30, env=ENV))
        await asyncio.sleep(0.2)
        call.cancel()  # the kill starts
        await asyncio.sleep(0.1)
        call.cancel()  # and the call is cancelled again while it runs
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(go())
    assert_none_survive(marker)


def test_without_pidfd_a_worker_thread_waits_for_the_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels before 5.3 (and other Unixes) have no pidfd: the exit is awaited in a thread, same results."""
    override(monkeypatch, "pidfd")
    marker = unique_seconds()

    assert run("echo out; echo err >&2; exit 3").value() == (3, "out\n", "err\n")
    assert run(f"sleep {marker}", timeout=0.3).value() == (-1, "", "timeout after 0.3s")
    assert_none_survive(marker)


@pytest.fixture(autouse=True)
def _earlier_zombies() -> None:
    """Zombies of this worker left by another module's tests are not this module's to answer for."""
    _EARLIER_ZOMBIES.update(_zombies_now())


_EARLIER_ZOMBIES: set[str] = set()


LEAK_CHECK = """
import asyncio, os, sys
from toolrun.exec import executor
env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}

async def many():
    return await asyncio.gather(
        *(executor.run("echo hi", timeout=5, env=env, stdin=b"{}") for _ in range(20)),
        executor.run("sleep 5", timeout=0.2, env=env),
    )

async def twice():
    await many()  # what a process and its loop make once, at their first calls (the spawn watcher's epoll and pipe)
    before = set(os.listdir("/proc/self/fd"))
    results = await many()
    return results, sorted(set(os.listdir("/proc/self/fd")) - before)

results, left = asyncio.run(twice())
assert [r.stdout for r in results[:20]] == ["hi\\n"] * 20 and results[20].timed_out, results
print("descriptors left:", [os.readlink(f"/proc/self/fd/{fd}") for fd in left if os.path.exists(f"/proc/self/fd/{fd}")])
zombies = []
for entry in os.listdir("/proc"):
    try:
        with open(f"/proc/{entry}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        continue
    if fields[0] == "Z" and fields[1] == str(os.getpid()):
        zombies.append(entry)
print("zombies:", zombies)
"""


def test_a_finished_call_leaves_no_zombie_and_no_open_descriptor() -> None:
    # In a process of its own: the threads other tests on this worker left (a jail prepared ahead, a refill) open
    # descriptors of their own meanwhile.
    done = subprocess.run([sys.executable, "-c", LEAK_CHECK], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "descriptors left: []\nzombies: []\n", done.stdout


def test_a_child_that_closes_its_pipes_and_runs_on_is_waited_for() -> None:
    """The call ends when the shell exits, not when its pipes close: one that closes them early is waited for."""
    for pause in ("0.01", "0.3"):
        started = time.monotonic()
        result = run(f"echo early; exec >&- 2>&-; sleep {pause}; exit 3")
        assert result.value() == (3, "early\n", "")
        assert time.monotonic() - started >= float(pause)
    assert zombie_children() == []


def zombie_children() -> list[str]:
    """This process's children left unreaped, as `pid:name` (the name says which test left it), but those that were
    already there when this module's first test began (another test on this xdist worker left them)."""
    return [z for z in _zombies_now() if z not in _EARLIER_ZOMBIES]


def _zombies_now() -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = dict(line.split(":\t", 1) for line in (entry / "status").read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if status.get("PPid", "").strip() == str(os.getpid()) and status.get("State", "").startswith("Z"):
            found.append(f"{entry.name}:{status.get('Name', '').strip()}")
    return found


def test_concurrent_calls_each_get_their_own_output() -> None:
    async def many() -> list[ExecResult]:
        return await asyncio.gather(*(executor.run(f"sleep 0.2; echo {i}", timeout=5, env=ENV) for i in range(20)))

    started = time.monotonic()
    results = asyncio.run(many())

    assert [r.value() for r in results] == [f"{i}\n" for i in range(20)]
    assert time.monotonic() - started < 3


def test_calls_work_from_event_loops_in_other_threads() -> None:
    outputs: list[Any] = []

    def worker(n: int) -> None:
        outputs.append(asyncio.run(executor.run(f"echo {n}", timeout=5, env=ENV)).value())

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)

    assert sorted(outputs) == ["0\n", "1\n", "2\n"]
    assert run("echo main").value() == "main\n"


# -- output caps ---------------------------------------------------------------------------------


def test_a_stdout_flood_is_capped_marked_fast_and_costs_no_memory() -> None:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    started = time.monotonic()
    try:
        result = run("yes | head -c 50000000", timeout=30, limits=ResourceLimits(output=MiB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.monotonic() - started
    rss_growth = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) * 1024

    value = result.value()
    assert isinstance(value, str)
    half = MiB // 2
    marker = (
        f"\n[toolrun: stdout truncated: kept the first {half} and the last {half} bytes, "
        f"dropped {50_000_000 - MiB} in between]\n"
    )
    assert value == "y\n" * (half // 2) + marker + "y\n" * (half // 2)
    assert (result.truncated, result.bytes_kept, result.bytes_dropped) == (True, MiB, 50_000_000 - MiB)
    assert elapsed < 10
    assert peak < 16 * MiB  # Python allocations during the call: about the cap, never the flood
    assert rss_growth < 60 * MiB


def test_a_stderr_flood_is_capped_and_marked_too() -> None:
    result = run("yes err | head -c 20000000 >&2; echo done", limits=ResourceLimits(output=64 * 1024))

    assert result.value() == "done\n"
    assert result.stderr.startswith("err\nerr\n")
    marker = (
        "\n[toolrun: stderr truncated: kept the first 32768 and the last 32768 bytes, "
        f"dropped {20_000_000 - 65536} in between]\n"
    )
    assert marker in result.stderr
    assert len(result.stderr) < 65536 + 120
    assert (result.truncated, result.bytes_kept, result.bytes_dropped) == (True, 65536 + 5, 20_000_000 - 65536)


def test_a_capped_output_keeps_its_tail_where_the_error_is() -> None:
    result = run(
        "seq 1 200000; echo 'FATAL: disk full' >&2; seq 1 200000 >&2; echo 'FATAL: the real error' >&2; exit 3",
        limits=ResourceLimits(output=4096),
    )

    code, out, err = result.value()
    assert code == 3
    assert out.startswith("1\n2\n3\n") and out.endswith("199999\n200000\n")
    assert err.endswith("200000\nFATAL: the real error\n")
    assert "[toolrun: stderr truncated: kept the first 2048 and the last 2048 bytes, dropped " in err
    assert result.truncated and result.bytes_kept == 4 * 2048


@pytest.mark.parametrize(
    ("cap", "expected"),
    [
        (4, "01\n[toolrun: stdout truncated: kept the first 2 and the last 2 bytes, dropped 6 in between]\n89"),
        (10, "0123456789"),
        (11, "0123456789"),
    ],
)
def test_the_cap_keeps_exactly_its_number_of_bytes(cap: int, expected: str) -> None:
    result = run("printf 0123456789", limits=ResourceLimits(output=cap))

    assert result.value() == expected
    assert result.truncated is (cap < 10)
    assert (result.bytes_kept, result.bytes_dropped) == (min(cap, 10), max(0, 10 - cap))


def test_a_flood_that_never_ends_is_stopped_by_the_deadline() -> None:
    started = time.monotonic()
    result = run("yes", timeout=0.3, limits=ResourceLimits(output=64 * 1024))

    assert result.value() == (-1, "", "timeout after 0.3s")
    assert time.monotonic() - started < 2.5


# -- stdin ---------------------------------------------------------------------------------------


def test_stdin_mode_delivers_the_payload_on_stdin() -> None:
    payload = '{"msg": "a b", "n": 3, "tags": ["é", "$x"]}'

    assert run("cat", stdin=payload.encode()).value() == payload


def test_a_child_that_never_reads_a_large_stdin_payload_does_not_deadlock() -> None:
    started = time.monotonic()
    result = run("sleep 0.1; echo done", stdin=b"x" * (8 * MiB), timeout=10)

    assert result.value() == "done\n"
    assert time.monotonic() - started < 3


def test_a_child_that_exits_without_reading_stdin_does_not_deadlock() -> None:
    assert run("exit 0", stdin=b"x" * (8 * MiB), timeout=10).value() == ""


def test_a_child_that_reads_part_of_stdin_gets_the_start_of_it() -> None:
    assert run("head -c 5", stdin=b"abcdefgh" * MiB, timeout=10).value() == "abcde"


def test_a_child_that_reads_all_of_a_large_payload_gets_every_byte() -> None:
    assert run("wc -c", stdin=b"x" * (8 * MiB), timeout=10).stdout.strip() == str(8 * MiB)


# -- what the child inherits ---------------------------------------------------------------------


def test_without_stdin_mode_the_child_reads_end_of_file_not_the_servers_stdin() -> None:
    with fd_replaced_by_pipe(0):  # a stdin that never ends: inheriting it would hang `cat`
        result = run("cat; echo end", timeout=3)

    assert result.value() == "end\n"


def test_writes_to_dev_fd_1_and_2_go_to_the_result_never_to_the_servers_stdout_or_stderr() -> None:
    with fd_replaced_by_pipe(1) as server_stdout, fd_replaced_by_pipe(2) as server_stderr:
        result = run("echo to-fd1 > /dev/fd/1; echo to-fd2 > /dev/fd/2")
        leaked = b""
        for fd in (server_stdout, server_stderr):
            os.set_blocking(fd, False)
            try:
                leaked += os.read(fd, 65536)
            except BlockingIOError:
                pass

    assert (result.stdout, result.stderr) == ("to-fd1\n", "to-fd2\n")
    assert b"to-fd" not in leaked


def test_the_child_inherits_no_other_descriptor() -> None:
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        result = run(f"if [ -e /dev/fd/{write_end} ]; then echo leaked; else echo closed; fi")
    finally:
        os.close(read_end)
        os.close(write_end)

    assert result.value() == "closed\n"


def test_the_child_gets_exactly_the_environment_given_plus_its_call_token() -> None:
    result = asyncio.run(executor.run("env", timeout=5, env={"PATH": ENV["PATH"], "ONLY_THIS": "1"}))

    names = {line.split("=", 1)[0] for line in str(result.value()).splitlines()}
    # TOOLRUN_CALL marks the call's processes, so those that leave the group are found at a timeout
    assert names - {"PWD"} == {"PATH", "ONLY_THIS", "TOOLRUN_CALL"}


# -- resource limits (prlimit) -------------------------------------------------------------------


def test_cpu_limit_kills_a_busy_loop() -> None:
    require_binary("prlimit")
    started = time.monotonic()
    result = run("while :; do :; done", timeout=30, limits=ResourceLimits(cpu=1))

    assert not result.timed_out
    assert result.returncode < 0 or result.returncode >= 128  # SIGXCPU/SIGKILL
    assert time.monotonic() - started < 20


def test_memory_limit_makes_a_large_allocation_fail() -> None:
    require_binary("prlimit")
    result = run(f"{PY} -c 'x = bytearray(500 * 1024 * 1024)'", timeout=20, limits=ResourceLimits(memory=200 * MiB))

    assert result.returncode != 0
    assert "MemoryError" in result.stderr


def test_memory_limit_leaves_room_for_a_small_allocation() -> None:
    require_binary("prlimit")
    result = run(
        f"{PY} -c 'print(len(bytearray(20 * 1024 * 1024)))'", timeout=20, limits=ResourceLimits(memory=200 * MiB)
    )

    assert result.value() == f"{20 * MiB}\n"


OPEN_64 = "import os; print(len([os.open('/dev/null', os.O_RDONLY) for _ in range(64)]))"


def test_open_files_limit_makes_opening_many_descriptors_fail() -> None:
    require_binary("prlimit")
    result = run(f"{PY} -c {shlex.quote(OPEN_64)}", timeout=20, limits=ResourceLimits(open_files=16))

    assert result.returncode != 0
    assert "Too many open files" in result.stderr


def test_open_files_limit_leaves_room_below_it() -> None:
    require_binary("prlimit")
    result = run(f"{PY} -c {shlex.quote(OPEN_64)}", timeout=20, limits=ResourceLimits(open_files=256))

    assert result.value() == "64\n"


def test_file_size_limit_stops_a_large_write(tmp_path: Path) -> None:
    require_binary("prlimit")
    result = run("head -c 10000000 /dev/zero > big", cwd=str(tmp_path), limits=ResourceLimits(file_size=MiB))

    assert result.returncode != 0  # SIGXFSZ: 128 + 25
    assert (tmp_path / "big").stat().st_size <= MiB


def test_file_size_limit_allows_a_small_write(tmp_path: Path) -> None:
    require_binary("prlimit")
    result = run("head -c 100000 /dev/zero > small && echo ok", cwd=str(tmp_path), limits=ResourceLimits(file_size=MiB))

    assert result.value() == "ok\n"
    assert (tmp_path / "small").stat().st_size == 100000


# -- failures to start ---------------------------------------------------------------------------


def test_a_missing_working_directory_raises_oserror_and_leaves_no_descriptor_open(tmp_path: Path) -> None:
    before = set(os.listdir("/proc/self/fd"))
    for stdin in (None, b"{}"):
        with pytest.raises(OSError):
            run("true", cwd=str(tmp_path / "missing"), stdin=stdin)
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_a_nul_byte_in_the_command_raises_valueerror() -> None:
    with pytest.raises(ValueError, match="null byte"):
        run("echo a\0b")


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root (CI runs as root)")
def test_a_fork_heavy_tool_run_as_an_unprivileged_user_is_stopped_by_its_process_limit(tmp_path: Path) -> None:
    marker = f"sleep 30.{uuid.uuid4().int % 10**6}"
    command = f"for i in $(seq 200); do {marker} & done; wait; echo all-forked"
    result = asyncio.run(
        executor.run(
            command,
            timeout=10,
            env={"PATH": "/usr/bin:/bin"},
            limits=ResourceLimits(processes=20),
            user="nobody",
        )
    )
    assert result.returncode != 0 or "all-forked" not in result.stdout
    assert "fork" in result.stderr.lower()
    assert_none_survive(marker)


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root (CI runs as root)")
def test_a_tool_with_a_user_runs_with_that_users_identity() -> None:
    result = asyncio.run(executor.run("id -un", timeout=5, env={"PATH": "/usr/bin:/bin"}, user="nobody"))
    assert result.value() == "nobody\n"


def test_running_as_another_user_without_root_is_a_clear_permission_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 12345)
    with pytest.raises(PermissionError, match="needs toolrun to run as root"):
        asyncio.run(executor.run("true", timeout=5, env={}, user="nobody"))


# -- spawning from threads in a burst ----------------------------------------------------------------


def test_a_burst_spawned_from_threads_gets_the_same_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    hold(monkeypatch, "threaded_spawn", 1)  # every call spawns from the thread pool

    async def many() -> list[ExecResult]:
        return await asyncio.gather(
            *(executor.run(f"echo {i}; echo err{i} >&2; exit {i % 3}", timeout=5, env=ENV) for i in range(30)),
            executor.run("cat", timeout=5, env=ENV, stdin=b"payload"),
            executor.run("pwd", timeout=5, env=ENV, cwd="/tmp"),  # Popen, from a thread too
        )

    results = asyncio.run(many())
    assert [r.value() for r in results[:30]] == [
        f"{i}\n" if i % 3 == 0 else (i % 3, f"{i}\n", f"err{i}\n") for i in range(30)
    ]
    assert results[30].value() == "payload" and results[31].value() == "/tmp\n"
    assert zombie_children() == []


def test_calls_cancelled_while_their_children_start_from_threads_leave_nothing_behind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hold(monkeypatch, "threaded_spawn", 1)
    marker = unique_seconds()
    before = set(os.listdir("/proc/self/fd"))

    async def cancelled() -> None:
        calls = [asyncio.ensure_future(executor.run(f"sleep {marker}", timeout=30, env=ENV)) for _ in range(40)]
        await asyncio.sleep(0)  # every call is now starting its child in a thread, or waiting to
        for call in calls:
            call.cancel()
        done = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(d, asyncio.CancelledError) for d in done)

    asyncio.run(cancelled())
    assert_none_survive(marker)
    assert zombie_children() == []
    assert set(os.listdir("/proc/self/fd")) - before == set()


def test_the_buffers_of_every_request_stay_below_the_servers_mmap_threshold() -> None:
    """`toolrun serve` pins glibc's mmap threshold (heap.big_blocks_mapped): a buffer above it is an mmap, an mremap
    and page faults each time. asyncio reads every socket into a fresh 256 KiB buffer and a tool's pipes are read in
    `_READ_SIZE`; both must come from the heap (at 128 KiB they cost an exec call about 100 us of kernel time)."""
    import asyncio.selector_events

    from toolrun.exec import heap

    assert asyncio.selector_events._SelectorSocketTransport.max_size < heap.BIG_BLOCK
    assert heap.BIG_BLOCK > executor._READ_SIZE
    assert executor._READ_SIZE >= 64 * 1024  # a whole default pipe buffer in one read
