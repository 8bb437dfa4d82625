"""A small POSIX shell lexer for the template lint (catalog/dataflow.py, for catalog/templatelint.py): where in a
shell command a value lands.

Fed the literal text of a command and, in between, the spots where values are rendered, it tracks
quotes, words, commands, `$(...)` and backquotes, comments and a trailing backslash, and says for
each value its context, whether it starts a word, the word before it, whether a `--` came first, and
the role the shell gives it (the command name, `eval`'s argument, `sh -c`'s string). It remembers the
shell variables a value is assigned to, and notes each `$V` of those in a spot the shell runs as code.
"""

from __future__ import annotations

import re
from typing import Any

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})
_DASH_C = re.compile(r"-[a-zA-Z]*c[a-zA-Z]*")  # `-c`, and clusters holding it: `-ec`, `-lc`
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_DECLARES = frozenset({"export", "local", "readonly", "declare", "typeset"})
_VAR_REF = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
# Roles of a value that the shell runs as code: the command name, the argument of `eval`, the
# command string of `sh -c`.
COMMAND, EVAL, SHELL_C = "command", "eval", "sh -c"
# Runs of characters with no meaning to the scanner, per context: they only extend the current word.
_PLAIN_RUN = re.compile(r"[^\s;&|()'\"\\$`#]+")
_RUNS = {
    "plain": _PLAIN_RUN,
    "subst": _PLAIN_RUN,
    "back": _PLAIN_RUN,
    "double": re.compile(r"[^\"\\$`]+"),
    "single": re.compile(r"[^']+"),
}


class Shell:
    """A small POSIX shell lexer fed text and values in order: quotes, words, commands, `$(...)`.

    It also remembers the shell variables a value was assigned to (`V={{ v }}`), and notes each
    `$V` of those that the shell runs as code (in `eval`'s arguments, `sh -c`'s string, as the
    command name): `reached` lists them, as (variable, role, shell)."""

    def __init__(self, words: tuple[str, ...] = ()) -> None:
        self.frames: list[list[Any]] = [["plain", None, 0]]  # kind, saved command state, paren depth
        self.words = list(words)
        self.cur = ""
        self.in_word = False
        self.dashdash = False
        self.comment = False
        self.escape = False  # a backslash ended the last text: it escapes what comes next
        self.tainted: dict[str, list[Any]] = {}  # shell variable -> the values assigned to it
        self.reached: list[tuple[str, str, str]] = []

    def copy(self) -> Shell:
        other = Shell()
        other.frames = [list(f) for f in self.frames]
        other.words, other.cur, other.in_word = list(self.words), self.cur, self.in_word
        other.dashdash, other.comment, other.escape = self.dashdash, self.comment, self.escape
        other.tainted, other.reached = {k: list(v) for k, v in self.tainted.items()}, self.reached
        return other

    def _end_word(self) -> None:
        if self.in_word:
            if self.cur == "--":
                self.dashdash = True
            self.words.append(self.cur)
        self.cur, self.in_word = "", False

    def _end_command(self) -> None:
        self._end_word()
        self.words, self.dashdash = [], False

    def _push(self, kind: str) -> None:
        saved = (self.words, self.cur, self.in_word, self.dashdash)
        self.frames.append([kind, saved, 0])
        self.words, self.cur, self.in_word, self.dashdash = [], "", False, False

    def _pop(self) -> None:
        _, saved, _ = self.frames.pop()
        self.words, self.cur, _, self.dashdash = saved
        self.cur += "\0"
        self.in_word = True

    def role(self) -> tuple[str, str]:
        """(role, shell) of what is written here: COMMAND, EVAL, SHELL_C or ""; the shell for SHELL_C."""
        words = self.words
        if not words:
            plain = self.frames[-1][0] not in ("single", "double")
            return (COMMAND, "") if plain and not self.in_word else ("", "")
        command = words[0].rsplit("/", 1)[-1]
        if command == "eval":
            return EVAL, ""
        if command in _SHELLS and _DASH_C.fullmatch(words[-1]) and all(w.startswith("-") for w in words[1:]):
            return SHELL_C, command
        return "", ""

    def _reference(self, text: str, i: int) -> None:
        """`$V` / `${V}` at `text[i]`: note it when V holds a value and the shell runs it as code here."""
        match = _VAR_REF.match(text, i)
        if match is None or not self.tainted:
            return
        var = match.group(1) or match.group(2)
        role, shell = self.role()
        if var in self.tainted and role:
            self.reached.append((var, role, shell))

    def feed(self, text: str) -> None:
        i = 0
        if self.escape and text:
            self.escape = False
            if self.frames[-1][0] != "single":
                self.cur += text[0]
                self.in_word = True
                i = 1
        end = len(text)
        while i < end:
            run = None if self.comment else _RUNS[self.frames[-1][0]].match(text, i)
            if run is not None:  # a run of plain characters: one step (the scan costs a call a character else)
                self.cur += run.group()
                self.in_word = True
                i = run.end()
            else:
                i = self._char(text, i) + 1

    def _char(self, text: str, i: int) -> int:
        """Scan the character at `text[i]`; return the index of the last character it took."""
        c = text[i]
        kind = self.frames[-1][0]
        if self.comment:
            if c == "\n":
                self.comment = False
                self._end_command()
        elif kind == "single":
            if c == "'":
                self.frames.pop()
            else:
                self.cur += c
        elif c == "\\":
            self.cur += text[i + 1 : i + 2]
            self.in_word = True
            self.escape = i + 1 == len(text)
            return i + 1
        elif text.startswith("$(", i):
            self.in_word = True
            self._push("subst")
            return i + 1
        elif c == "`":
            if kind == "back":
                self._pop()
            else:
                self.in_word = True
                self._push("back")
        else:
            if c == "$":
                self._reference(text, i)
            if kind == "double":
                if c == '"':
                    self.frames.pop()
                else:
                    self.cur += c
            elif c == "&" and (self.cur[-1:] in ("<", ">") or text[i + 1 : i + 2] == ">"):
                self.cur += c  # a redirection (`2>&1`, `>&2`, `&>file`), not the end of a command
                self.in_word = True
            else:
                self._plain(c, kind)
        return i

    def _plain(self, c: str, kind: str) -> None:
        """A character outside quotes: words, commands, parentheses, quotes opening, comments."""
        if c in " \t":
            self._end_word()
        elif c in "\n;&|":
            self._end_command()
        elif c == "(":
            self.frames[-1][2] += 1
            self._end_command()
        elif c == ")":
            if kind == "subst" and self.frames[-1][2] == 0:
                self._end_word()
                self._pop()
            else:
                self.frames[-1][2] = max(0, self.frames[-1][2] - 1)
                self._end_command()
        elif c in "'\"":
            self.in_word = True
            self.frames.append(["single" if c == "'" else "double", None, 0])
        elif c == "#" and not self.in_word:
            self.comment = True
        else:
            self.cur += c
            self.in_word = True

    def value(self) -> dict[str, Any]:
        """Where a value rendered here lands (the fields of its Use); then the scan goes on mid-word."""
        kind = self.frames[-1][0]
        context = kind if kind in ("single", "double") else "plain"
        words = self.words
        role, shell = self.role()
        assigned = _ASSIGN.match(self.cur.replace("\0", ""))
        settable = not words or words[0] in _DECLARES or all(_ASSIGN.match(w) for w in words)
        info = {
            "context": context,
            "word_start": not self.in_word and context == "plain",
            "after_dashdash": self.dashdash,
            "prev_word": words[-1] if words else "",
            "role": role,
            "shell": shell,
            "escaped": self.escape and context == "plain",
            "comment": self.comment,
            "assigned": assigned.group(1) if assigned and settable and not self.comment else "",
        }
        self.escape = False
        self.cur += "\0"
        self.in_word = True
        return info
