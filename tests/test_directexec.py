"""Direct exec: a command the shell would only exec runs without the shell, and nothing a tool can see changes.

The differential tests run every command twice, with the shell skipped where toolrun skips it and with
`/bin/sh -c` always, and compare exit code, stdout, stderr and the environment the program saw.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.speedups import hold, override
from toolrun.exec import directexec, executor
from toolrun.models import ExecResult, ResourceLimits

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux processes")

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/root", "API_TOKEN": "s3cr3t value"}


def run_both(
    command: str, env: dict[str, str] | None = None, scratch: str | None = None, **kwargs: Any
) -> tuple[ExecResult, ExecResult]:
    """The command with direct exec where it applies, then always through the shell (in `scratch`, emptied
    between the two, when given)."""
    timeout = kwargs.pop("timeout", 5)

    async def both(held: pytest.MonkeyPatch) -> tuple[ExecResult, ExecResult]:
        hold(held, "direct_exec", True)  # on even where TOOLRUN_SPEEDUPS turned it off
        direct = await executor.run(command, timeout=timeout, env=env or ENV, **kwargs)
        override(held, "direct_exec")
        if scratch is not None:
            for entry in os.listdir(scratch):
                os.unlink(os.path.join(scratch, entry))
        shell = await executor.run(command, timeout=timeout, env=env or ENV, **kwargs)
        return direct, shell

    with pytest.MonkeyPatch.context() as held:  # put back as it was, whatever happens
        return asyncio.run(both(held))


def seen(result: ExecResult) -> tuple[int, str, str]:
    """What a caller sees, the per-call token aside (it differs between any two calls)."""
    out = "\n".join(line for line in result.stdout.split("\n") if not line.startswith("TOOLRUN_CALL="))
    return result.returncode, out, result.stderr


# -- which commands skip the shell ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("sleep 1", ["sleep", "1"]),
        ("  ls\t-l  ", ["ls", "-l"]),
        ("grep -c 'a b' \"c d\"", ["grep", "-c", "a b", "c d"]),
        ("cat 'it'\"'\"'s'", ["cat", "it's"]),  # what the quote filter makes of a single quote
        ("cut -d: -f1,2 /etc/passwd", ["cut", "-d:", "-f1,2", "/etc/passwd"]),
        ("env X=1", ["env", "X=1"]),
        ("date +%s@x", ["date", "+%s@x"]),
        ("tr '' 'a;b|c>d$e'", ["tr", "", "a;b|c>d$e"]),
    ],
)
def test_one_simple_command_of_plain_words_is_split_as_the_shell_would(command: str, words: list[str]) -> None:
    assert directexec.split(command) == words


@pytest.mark.parametrize(
    "command",
    [
        "printf '%s' hi",  # builtins and reserved words
        "echo hi",
        "test -f x",
        "[ -f x ]",
        "true",
        "cd /tmp",
        "if",
        "X=1 env",  # an assignment
        "/bin/echo hi",  # a path: no PATH search (kept simple: the shell does it)
        "ls; rm x",
        "ls | wc",
        "ls && ls",
        "ls > out",
        "ls < in",
        "ls *",
        "ls ?",
        "ls [ab]",
        "ls ~",
        "ls # comment",
        "ls $HOME",
        "ls `pwd`",
        'ls "$HOME"',
        'ls "a\\b"',
        "ls \\;",
        "ls {a,b}",
        "ls\nls",
        "ls 'a\nb'",
        "ls 'unterminated",
        "ls (x)",
        "ls &",
        "ls\rx",
        "",
        "   ",
        "'' x",
        "ls é",
    ],
)
def test_anything_else_keeps_the_shell(command: str) -> None:
    assert directexec.split(command) is None


def test_a_plain_command_is_planned_for_direct_exec_with_the_shells_environment() -> None:
    env = {**ENV, "TOOLRUN_CALL": "t.1"}
    plan = directexec.plan("sleep 0", env)
    assert plan is not None
    executable, argv, child_env = plan
    assert executable == shutil.which("sleep", path=ENV["PATH"])
    assert argv == ["sleep", "0"]
    assert child_env["PWD"] == os.getcwd() and set(child_env) == {*env, "PWD"}


@pytest.mark.parametrize(
    "env",
    [
        {"LANG": "C"},  # no PATH: the shell's default would be used
        {"PATH": "bin:/usr/bin"},  # a relative entry
        {"PATH": ":/usr/bin"},  # an empty entry: the working directory
        {"PATH": "/usr/bin", "IFS": ","},  # variables the shell rewrites
        {"PATH": "/usr/bin", "PWD": "/"},
        {"PATH": "/usr/bin", "OPTIND": "3"},
        {"PATH": "/usr/bin", "PPID": "1"},
        {"PATH": "/usr/bin", "A-B": "1"},  # a name the shell does not pass on
        {"PATH": "/nonexistent"},  # not found: the shell's "not found", 127
    ],
)
def test_in_doubt_the_shell_runs_the_command(env: dict[str, str]) -> None:
    assert directexec.plan("sleep 0", env) is None
    direct, shell = run_both("sleep 0", env)
    assert seen(direct) == seen(shell)


# -- differential: the same answers both ways ------------------------------------------------------

# (no `|` among the unsafe pieces: two programs writing stderr at once interleave differently on each run)
PROGRAMS = [
    "env",
    "sleep 0",
    "cat",
    "ls -d",
    "wc -c",
    "basename",
    "expr",
    "id -u",
    "head -c 5",
    "tr a-z A-Z",
    "nonexistent-program-x",
    "echo",
    "printf",
    "true",
    "false",
    "test",
    "kill -0",
]
PLAIN = st.text(alphabet="abcxyz019_@%+=:,./-", min_size=1, max_size=8)
SINGLE = st.text(alphabet=st.characters(blacklist_characters="'\n\0", blacklist_categories=("Cs",)), max_size=8)
DOUBLE = st.text(alphabet=st.characters(blacklist_characters='"$`\\\n\0', blacklist_categories=("Cs",)), max_size=8)
UNSAFE = st.sampled_from([";", "&&", ">", "<", "*", "?", "~", "#", "$HOME", "`id`", "(", ")", "{", "}", "!", "\\"])
WORD = st.one_of(
    PLAIN,
    SINGLE.map(lambda s: f"'{s}'"),
    DOUBLE.map(lambda s: f'"{s}"'),
    st.tuples(PLAIN, SINGLE).map(lambda t: f"{t[0]}'{t[1]}'"),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=st.sampled_from(PROGRAMS), args=st.lists(st.one_of(WORD, UNSAFE), max_size=4))
def test_every_command_answers_the_same_with_and_without_the_shell(program: str, args: list[str]) -> None:
    command = " ".join([program, *args])
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:  # a `>` among the pieces writes a file: not into the checkout
        os.chdir(scratch)
        try:
            direct, shell = run_both(command, scratch=scratch, stdin=b"piped input\n")
        finally:
            os.chdir(here)
    assert seen(direct) == seen(shell), command


def test_the_environment_the_program_sees_is_the_shells_byte_for_byte_and_in_order() -> None:
    env = {"ZED": "1", "PATH": ENV["PATH"], "A_SECRET": "x y", "TERM": "dumb", "HOME": "/root", "OLDPWD": "/x"}
    direct, shell = run_both("env", env)
    assert directexec.plan("env", {**env, "TOOLRUN_CALL": "t"}) is not None
    assert seen(direct) == seen(shell)
    assert "PWD=" in direct.stdout


# -- what toolrun does around the program ------------------------------------------------------------


def test_a_timeout_kills_a_directly_started_program_and_reports_as_before() -> None:
    marker = f"300.{uuid.uuid4().int % 10**9:09d}"
    direct, shell = run_both(f"sleep {marker}", timeout=0.3)
    assert direct.value() == shell.value() == (-1, "", "timeout after 0.3s")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                assert marker.encode() not in (entry / "cmdline").read_bytes()
            except OSError:
                pass


def test_stdin_mode_output_caps_and_exit_codes_are_the_same() -> None:
    direct, shell = run_both("cat", stdin=b'{"a": 1}')
    assert seen(direct) == seen(shell) == (0, '{"a": 1}', "")
    direct, shell = run_both("head -c 300000 /dev/zero", limits=ResourceLimits(output=1000))
    assert (direct.stdout, direct.truncated, direct.bytes_dropped) == (
        shell.stdout,
        shell.truncated,
        shell.bytes_dropped,
    )
    assert direct.truncated
    direct, shell = run_both("ls /nonexistent-dir")
    assert seen(direct) == seen(shell) and direct.returncode == 2


def test_limits_user_and_cwd_keep_the_shell_and_behave_as_before(tmp_path: Path) -> None:
    if shutil.which("prlimit"):
        direct, shell = run_both("cat /proc/self/limits", limits=ResourceLimits(open_files=64))
        assert seen(direct) == seen(shell)
        assert "64" in direct.stdout
    direct, shell = run_both("pwd", cwd=str(tmp_path))
    assert seen(direct) == seen(shell) == (0, f"{tmp_path}\n", "")
    with pytest.raises(FileNotFoundError) as missing:
        run_both("env", cwd=str(tmp_path / "missing"))
    assert str(tmp_path / "missing") in str(missing.value)


def test_a_tool_with_a_cwd_sees_the_shells_pwd_its_physical_path(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for cwd in (tmp_path / "real", tmp_path / "link", tmp_path / "link" / ".." / "real"):
        assert directexec.plan("env", {**ENV, "TOOLRUN_CALL": "t"}, str(cwd)) is not None
        direct, shell = run_both("env", cwd=str(cwd))
        assert seen(direct) == seen(shell)
        assert f"PWD={(tmp_path / 'real').resolve()}" in direct.stdout
        direct, shell = run_both("ls -a", cwd=str(cwd))
        assert seen(direct) == seen(shell)


def test_a_script_without_an_interpreter_line_runs_as_the_shell_runs_it(tmp_path: Path) -> None:
    (tmp_path / "hello-script").write_text("echo from-script $0\n")
    (tmp_path / "hello-script").chmod(0o755)
    (tmp_path / "not-executable").write_text("echo no\n")
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    direct, shell = run_both("hello-script a", env)
    assert seen(direct) == seen(shell)
    assert "from-script" in direct.stdout
    direct, shell = run_both("not-executable", env)
    assert seen(direct) == seen(shell) and "Permission denied" in direct.stderr
