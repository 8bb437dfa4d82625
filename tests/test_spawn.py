"""spawn.start: posix_spawn (glibc 2.34+) and subprocess.Popen hand a child the same process state.

Each check runs a real /bin/sh both ways and compares what the child itself reports: descriptors,
signal dispositions and mask, session, environment; and the errors of a program that cannot start.
"""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from support.binaries import require_binary
from support.speedups import override
from toolrun import speedups
from toolrun.exec import executor, spawn

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux process state")

ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# What a child can see of the way it was started (its own pid and parent pid differ by nature).
PROBE = (
    "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; readlink /proc/$$/fd/0; "
    "[ \"$(ps -o sid= -p $$ | tr -d ' ')\" = $$ ] && echo session-leader; "
    "[ \"$(ps -o pgid= -p $$ | tr -d ' ')\" = $$ ] && echo group-leader; "
    "env | grep -v '^TOOLRUN_CALL=' | sort; umask; ulimit -n; "
    # the shell's own signal state, read by the program it becomes (dash blocks every signal while it forks,
    # so a child reading /proc/$$/status could catch that moment)
    "exec grep -E '^(SigBlk|SigIgn|SigCgt|NoNewPrivs|Seccomp)' /proc/self/status"
)


def glibc_234() -> bool:
    name, version = platform.libc_ver()
    return name == "glibc" and tuple(int(p) for p in version.split(".")[:2]) >= (2, 34)


def run_probe(
    monkeypatch: pytest.MonkeyPatch, posix: bool, command: str = PROBE, **kwargs: Any
) -> tuple[int, str, str]:
    if not posix:
        override(monkeypatch, "posix_spawn")
    try:
        result = asyncio.run(executor.run(command, timeout=10, env=ENV, **kwargs))
    finally:
        monkeypatch.undo()
    return result.returncode, result.stdout, result.stderr


@pytest.mark.skipif(not speedups.on("posix_spawn"), reason="TOOLRUN_SPEEDUPS turns posix_spawn off")
def test_posix_spawn_is_used_with_glibc_2_34_or_later() -> None:
    assert spawn.uses_posix_spawn() == glibc_234()


@pytest.mark.skipif(not glibc_234(), reason="posix_spawn with closefrom needs glibc 2.34")
def test_a_posix_spawned_child_sees_exactly_what_a_popen_child_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    leaked_r, leaked_w = os.pipe()
    os.set_inheritable(leaked_w, True)  # an inheritable descriptor of the server: neither child may get it
    try:
        posix = run_probe(monkeypatch, posix=True)
        popen = run_probe(monkeypatch, posix=False)
    finally:
        os.close(leaked_r)
        os.close(leaked_w)
    assert posix == popen
    code, out, err = posix
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == ["0", "1", "2", "3"]  # 3: ls's own directory
    assert "session-leader" in out and "group-leader" in out and "/dev/null" in out
    assert "SigBlk:\t0000000000000000" in out  # the dispositions are compared above: they depend on who started us


COMPARE = """
import asyncio, sys
from toolrun.exec import executor, spawn; from toolrun import speedups
sys.path.insert(0, sys.argv[1])
from test_spawn import ENV, PROBE
from support.speedups import turn_off
import os, threading
stop = threading.Event()
thread = threading.Thread(target=stop.wait)
thread.start()
os.setgid(os.getgid())  # in a threaded process glibc now installs its handler for signal 33 (it was ignored)
stop.set()
thread.join()
posix = asyncio.run(executor.run(PROBE, timeout=10, env=ENV))
turn_off("posix_spawn")  # Popen from here on
popen = asyncio.run(executor.run(PROBE, timeout=10, env=ENV))
print("same" if (posix.stdout, posix.returncode) == (popen.stdout, popen.returncode) else f"{posix}\\n{popen}")
print([line for line in open("/proc/self/status") if line.startswith("SigIgn")][0].split()[1])
"""


@pytest.mark.skipif(not glibc_234(), reason="posix_spawn with closefrom needs glibc 2.34")
def test_a_server_started_by_a_posix_spawn_parent_hands_its_children_the_popen_signal_state(tmp_path: Path) -> None:
    # GNU make starts its commands with posix_spawn, which leaves glibc's signals 32 and 33 ignored in them: a
    # toolrun started that way must pass on exactly what Popen would (ignored stays ignored).
    require_binary("make")
    script = tmp_path / "compare.py"
    script.write_text(COMPARE)
    (tmp_path / "Makefile").write_text(f"all:\n\t@{sys.executable} {script} {Path(__file__).parent}\n")
    done = subprocess.run(["make", "-s", "-C", str(tmp_path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    verdict, ignored = done.stdout.splitlines()
    assert verdict == "same"
    assert int(ignored, 16) >> 31 & 1, "make no longer leaves signal 32 ignored: this test checks nothing"
    assert not int(ignored, 16) >> 32 & 1, "signal 33 is still ignored: this test checks nothing"


@pytest.mark.skipif(not glibc_234(), reason="posix_spawn with closefrom needs glibc 2.34")
def test_sigpipe_is_back_to_its_default_action_in_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python ignores SIGPIPE; a tool's `yes | head -1` must end by SIGPIPE, not loop on EPIPE.
    assert run_probe(monkeypatch, posix=True, command="yes | head -1; echo done") == (0, "y\ndone\n", "")
    assert run_probe(monkeypatch, posix=False, command="yes | head -1; echo done") == (0, "y\ndone\n", "")


@pytest.mark.skipif(not glibc_234(), reason="posix_spawn with closefrom needs glibc 2.34")
def test_stdin_mode_and_exit_codes_are_the_same_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    for posix in (True, False):
        assert run_probe(monkeypatch, posix, command="cat; exit 7", stdin=b'{"a": 1}') == (7, '{"a": 1}', "")
        assert run_probe(monkeypatch, posix, command="kill -TERM $$")[0] == -15


def start_both_ways(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], error: type[Exception]
) -> list[Any]:
    """What `spawn.start(argv, env)` raises with posix_spawn, then with Popen (each must raise `error`)."""
    raised = []
    for posix in (True, False):
        if not posix:
            override(monkeypatch, "posix_spawn")
        read_end, write_end = os.pipe()
        try:
            with pytest.raises(error) as caught:
                spawn.start(argv, env, None, None, write_end, write_end)
        finally:
            os.close(read_end)
            os.close(write_end)
        raised.append(caught.value)
    return raised


@pytest.mark.parametrize(
    ("argv", "env", "error"),
    [
        (["/nonexistent/program"], ENV, FileNotFoundError),
        (["/dev/null"], ENV, PermissionError),
        (["/bin/sh", "-c", "a\0b"], ENV, ValueError),
        (["/bin/sh", "-c", "true"], {"A\0": "1"}, ValueError),
        (["/bin/sh", "-c", "true"], {"A": "1\0"}, ValueError),
        (["/bin/sh", "-c", "true"], {"A=B": "1"}, ValueError),
    ],
)
def test_a_child_that_cannot_start_raises_what_popen_raises(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], env: dict[str, str], error: type[Exception]
) -> None:
    errors = [(type(e), str(e)) for e in start_both_ways(monkeypatch, argv, env, error)]
    assert errors[0] == errors[1]


def test_a_script_without_an_interpreter_line_fails_as_with_popen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "script"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    errors = [(type(e), e.errno, str(e)) for e in start_both_ways(monkeypatch, [str(script)], ENV, OSError)]
    assert errors[0] == errors[1]
    assert errors[0][1] == 8  # ENOEXEC: no shell is tried in its place


def test_a_tool_with_a_working_directory_still_starts_there() -> None:
    result = asyncio.run(executor.run("pwd", timeout=5, env=ENV, cwd="/tmp"))
    assert result.value() == "/tmp\n"


def test_popen_reference_child_agrees_with_the_probe_format() -> None:
    """The probe itself works under a plain Popen (so a difference above is the spawn's, not the probe's)."""
    done = subprocess.run(["/bin/sh", "-c", PROBE], env=ENV, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "/dev/" in done.stdout


@pytest.mark.skipif(not glibc_234(), reason="posix_spawn with closefrom needs glibc 2.34")
@pytest.mark.skipif(not speedups.on("posix_spawn"), reason="TOOLRUN_SPEEDUPS turns posix_spawn off")
def test_reused_file_actions_and_encoded_variables_give_every_child_its_own_descriptors_and_values() -> None:
    """The file actions are cached by descriptor numbers and `NAME=value` bytes by (name, value): children started
    back to back, on recycled and on fresh descriptor numbers, each see only their own value and their own pipe."""

    async def scenario() -> list[str]:
        async def one(i: int) -> str:
            env = {**ENV, "SPAWN_CASE": f"value-{i}", "SHARED": "same"}
            result = await executor.run('printf "%s %s" "$SPAWN_CASE" "$SHARED"', timeout=10, env=env)
            assert result.returncode == 0, result
            return result.stdout

        first = [await one(i) for i in range(5)]  # one after the other: the same pipe numbers each time
        return first + list(await asyncio.gather(*(one(i) for i in range(5, 25))))  # at once: other numbers

    assert asyncio.run(scenario()) == [f"value-{i} same" for i in range(25)]
    assert 0 < len(spawn._ACTIONS) <= spawn._ACTIONS_MAX
    read_end, write_end = os.pipe()
    try:
        with pytest.raises(ValueError, match="illegal environment variable name"):  # checked before any cache hit
            spawn.start(["/bin/true"], {"A=B": "1"}, None, None, write_end, write_end)
        assert ("A=B", "1") not in spawn._ENV_ITEMS
    finally:
        os.close(read_end)
        os.close(write_end)


def test_the_pid_every_per_process_resource_checks_follows_a_fork() -> None:
    """pidcache.pid() (what connections, pools, watchers and spawn threads compare to learn they are in a forked
    worker) is the child's own pid in the child, without a system call per read."""
    from toolrun.exec import pidcache

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        os.write(write_end, f"{pidcache.pid()} {os.getpid()}".encode())
        os._exit(0)
    os.close(write_end)
    seen = os.read(read_end, 100).decode().split()
    os.close(read_end)
    os.waitpid(child, 0)
    assert seen[0] == seen[1] == str(child)
    assert pidcache.pid() == os.getpid()
