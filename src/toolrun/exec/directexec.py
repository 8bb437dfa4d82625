"""Skipping the shell: when `/bin/sh -c <command>` would only exec one program, exec it directly.

A tool's command runs as `/bin/sh -c <command>`. When the rendered command is one simple command
of plain words, the shell does nothing but find the program on PATH and replace itself with it
(dash, Debian's /bin/sh, execs the last simple command of `-c` without forking), so the process
tree, the exit status and the output are the program's either way. Starting the shell costs about
1-2 ms of CPU per call on a small machine, more than the rest of the call; GNU make skips it under
the same condition. toolrun does too, when and only when nothing the program can observe changes:

- the command is words separated by spaces or tabs; a word is made of the characters
  ``A-Z a-z 0-9 _ @ % + = : , . / -``, single-quoted strings (no newline) and double-quoted strings
  without ``$``, backquote, backslash or newline; nothing else (no operators, redirections, globs,
  ``~``, ``#``, braces, variables, assignments, newlines);
- the first word has no ``=`` and no ``/``, is not empty, and is not a builtin or a reserved word of
  the shell (`printf`, `echo`, `test`, `cd`, `if`, ...: those the shell runs itself);
- the child's PATH is set, and every entry of it is an absolute directory; the word names an
  executable regular file in one of them (the first, as the shell's search finds it);
- no `user:` and no `limits` other than `output` (their `setpriv` / `prlimit` prefix execs the
  shell by name); with a `cwd`, the shell's PWD is that directory's physical path;
- the environment holds no variable the shell rewrites (IFS, OPTIND, PPID, PWD, LINENO) and only
  valid names; the shell hands the program its environment reordered, with `PWD` added: that
  exact environment is learned once per set of variable names, by running
  `/bin/sh -c '/bin/cat /proc/self/environ'` with it, and is reproduced; if the shell's answer is
  anything else (another shell than dash, an extra variable, a changed value), such commands keep
  the shell;
- if the exec fails for any reason (a script without `#!`, a file gone meanwhile, permissions),
  the shell runs the command instead, so errors and exit codes (127, 126) are the shell's.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Mapping

SHELL = "/bin/sh"
# A command of plain characters only (the common case) is split by str.split. Otherwise: the parts of a word
# are runs of plain characters, single-quoted strings and double-quoted strings; every quantifier is
# possessive and every alternative starts with a different character, so no scan ever backtracks.
_SIMPLE = re.compile(r"[A-Za-z0-9_@%+=:,./ \t-]*+\Z")
_ONE = r"[A-Za-z0-9_@%+=:,./-]++|'[^'\n\0]*+'|" + r'"[^"$`\\\n\0]*+"'
_WHOLE = re.compile(rf"(?:[ \t]++|{_ONE})*+\Z")
_WORD = re.compile(rf"(?:{_ONE})++")
_PART = re.compile(r"""'([^'\n\0]*+)'|"([^"$`\\\n\0]*+)"|([A-Za-z0-9_@%+=:,./-]++)""")
# dash's builtins and reserved words: the shell runs these itself.
SHELL_WORDS = frozenset(
    [
        ".",
        ":",
        "[",
        "alias",
        "bg",
        "break",
        "cd",
        "chdir",
        "command",
        "continue",
        "echo",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fc",
        "fg",
        "getopts",
        "hash",
        "jobs",
        "kill",
        "local",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
        "if",
        "then",
        "else",
        "elif",
        "fi",
        "case",
        "esac",
        "for",
        "while",
        "until",
        "do",
        "done",
        "in",
        "!",
        "{",
        "}",
        "function",
        "select",
        "time",
        "[[",
        "]]",
    ]
)
# Variables the shell sets or rewrites at start: an environment holding one keeps the shell.
_REWRITTEN = frozenset({"IFS", "OPTIND", "PPID", "PWD", "LINENO"})
_CALIBRATE = "/bin/cat /proc/self/environ"

# Per tuple of variable names (in the order given): the names in the order the shell hands them on
# (PWD included), or None when the shell does more than reorder them and add PWD.
_ORDERS: dict[tuple[str, ...], tuple[str, ...] | None] = {}


def split(command: str) -> list[str] | None:
    """The words of `command` when it is one simple command of plain words (see above), else None."""
    head = command.lstrip(" \t")[:16].split(None, 1)
    if not head or head[0] in SHELL_WORDS:  # the common `printf ...` / `echo ...` answer, before any scan
        return None
    if _SIMPLE.match(command) is not None:
        words = command.split()
    elif _WHOLE.match(command) is not None:
        words = ["".join(a or b or c for a, b, c in _PART.findall(word)) for word in _WORD.findall(command)]
    else:
        return None
    if not words:
        return None
    first = words[0]
    if not first or "=" in first or "/" in first or first in SHELL_WORDS:
        return None
    return words


def find(name: str, path: str) -> str | None:
    """The file the shell's search would exec for `name` on `path`, or None when in doubt."""
    for directory in path.split(":"):
        if not directory.startswith("/") or "%" in directory:  # relative (the shell's cwd), or dash's %func
            return None
        candidate = f"{directory}/{name}"  # as the shell builds it (a trailing slash gives //: the same file)
        try:
            st = os.stat(candidate)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _valid_name(name: str) -> bool:
    return bool(name) and (name[0].isalpha() or name[0] == "_") and name.isascii() and name.replace("_", "a").isalnum()


def _learn(env: Mapping[str, str]) -> tuple[str, ...] | None:
    """The order in which the shell hands `env` on (PWD added), or None when it changes more than that."""
    try:
        done = subprocess.run(
            [SHELL, "-c", _CALIBRATE], env=env, capture_output=True, timeout=5, check=False, start_new_session=True
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if done.returncode != 0 or not done.stdout.endswith(b"\0"):
        return None
    seen: dict[str, str] = {}
    for item in done.stdout[:-1].split(b"\0"):
        name, sep, value = item.partition(b"=")
        if not sep:
            return None
        seen[os.fsdecode(name)] = os.fsdecode(value)
    expected = {**env, "PWD": os.getcwd()}
    if seen != expected or len(seen) != len(expected):
        return None
    return tuple(seen)


def plan(command: str, env: Mapping[str, str], cwd: str | None = None) -> tuple[str, list[str], dict[str, str]] | None:
    """(the program's file, its argv, its environment) when the shell can be skipped, else None.

    `cwd` is the directory the program will start in (None: this process's): the shell's PWD is its
    physical path."""
    words = split(command)
    if words is None:
        return None
    path = env.get("PATH")
    if path is None:
        return None
    names = tuple(env)
    order = _ORDERS.get(names, ())
    if order == ():
        rewritten = any(name in _REWRITTEN or not _valid_name(name) for name in names)
        order = None if rewritten else _learn(env)
        if len(_ORDERS) >= 4096:  # a bound: tools' name sets are few, but nothing grows without one
            _ORDERS.clear()
        _ORDERS[names] = order
    if order is None:
        return None
    executable = find(words[0], path)
    if executable is None:
        return None
    try:
        pwd = os.getcwd() if cwd is None else os.path.realpath(cwd, strict=True)
    except OSError:  # the working directory is gone or missing: the shell's own business (and error)
        return None
    return executable, words, {name: pwd if name == "PWD" else env[name] for name in order}
