"""Template lint: syntax, undeclared and unused variables, and where each value lands in the shell
command (unquoted, inside another quoting layer, shell code, an option position, unguarded)."""

from __future__ import annotations

import difflib
import functools
import re
from typing import TYPE_CHECKING, Any

from ..exec import render
from ..models import Param
from . import dataflow
from .dataflow import NUMBER, QUOTED, RAW, SAFE

if TYPE_CHECKING:
    from .loadcontext import LoadContext

_TAG = re.compile(r"\{\{.*?\}\}|\{%.*?%\}", re.DOTALL)


def _find_name(template: str, name: str, unquoted_only: bool = False, nth: int = 0) -> int | None:
    """Offset of the first (or the `nth`, counting from 0) use of `name` inside a `{{ }}` or `{% %}` tag of
    `template`."""
    word = re.compile(rf"(?<![\w.'\"]){re.escape(name)}(?![\w'\"])")
    for tag in _TAG.finditer(template):
        text = tag.group(0)
        if unquoted_only and (text.startswith("{%") or "quote" in text):
            continue
        match = word.search(text)
        if match:
            if nth == 0:
                return tag.start() + match.start()
            nth -= 1
    return None


def _uses_before(template: str, name: str, line: int) -> int:
    """How many tags of `template` that use `name` start before (1-based) line `line`: the same count finds the
    use in the catalog's source text, whatever the YAML scalar style did to the lines."""
    count, offset = 0, 0
    while (found := _find_name(template[offset:], name)) is not None:
        start = offset + found
        if template.count("\n", 0, start) + 1 >= line:
            break
        count += 1
        offset = start + len(name)
    return count


def check_template(
    ctx: LoadContext, template: str, params: list[Param], stdin: bool, key: str, loc: tuple[Any, ...], kind: str
) -> tuple[tuple[str, bool], ...]:
    """Report what is wrong with a template; return the params that can reach curl's option position."""
    tloc = (*loc, kind)
    analysis = render.analyse(template)
    if analysis.error:
        pos = ctx.locate.scalar_line(tloc, analysis.error_line)
        ctx.problem_at(pos, key, f"template error in {kind}: {analysis.error}")
        return ()

    def where(name: str, unquoted: bool = False, line: int = 0) -> tuple[int, int]:
        # Searching the source text (composing the node tree) happens only once a problem needs it.
        pos = None
        if line > 1:  # the use on that line of the template, not the first use of the name
            nth = _uses_before(template, name, line)
            pos = ctx.locate.find(tloc, lambda text: _find_name(text, name, nth=nth))
        if pos is None and unquoted:
            pos = ctx.locate.find(tloc, lambda text: _find_name(text, name, unquoted_only=True))
        pos = pos or ctx.locate.find(tloc, lambda text: _find_name(text, name))
        return pos or ctx.locate.value(tloc)

    declared = {p.name: p for p in params}
    for name in sorted(analysis.names - set(declared) - set(render.JINJA_GLOBALS)):
        close = difflib.get_close_matches(name, list(declared), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        ctx.problem_at(where(name), key, f"template uses {name!r}, which is not a declared param{hint}")
    if not stdin:
        _unused_params(ctx, params, analysis.names, key, loc, kind)
    if kind == "curl":
        for word, message in curl_option_problems(template):
            found = ctx.locate.find(tloc, functools.partial(_find_word, word=word))
            ctx.problem_at(found or ctx.locate.value(tloc), key, message, "warning", "curl-option")
    if kind == "curl":
        for name, message in curl_url_problems(template, declared):
            ctx.problem_at(where(name), key, message, "warning", "curl-url-host")
    words = CURL_PREFIX if kind == "curl" else ()
    findings, option_params = data_flow(dataflow.uses(template, words), declared, kind)
    for name, unquoted, message, code, line in findings:
        ctx.problem_at(where(name, unquoted=unquoted, line=line), key, message, "warning", code)
    return option_params


def _unused_params(
    ctx: LoadContext, params: list[Param], used: set[str], key: str, loc: tuple[Any, ...], kind: str
) -> None:
    for i, p in enumerate(params):
        if p.name not in used:
            ctx.problem_at(
                ctx.locate.value((*loc, "params", i, "name")),
                key,
                f"param {p.name!r} is declared but never used in {kind}",
                "warning",
                "unused-param",
            )


def _find_word(text: str, word: str) -> int | None:
    match = re.search(rf"(?<![^\s'\"]){re.escape(word)}", text)
    return match.start() if match else None


# curl's short options that take an argument (the rest of a cluster, else the next word).
_CURL_SHORT_ARGS = frozenset("AbcCdDeEFHKmoPQrtTuUwxXyYz")
_CURL_OUTPUT = (
    "the shorthand already sends the body to stdout (`curl -sS -o -`), so the body is printed anyway; to discard or "
    "save it, write an `exec:` tool that runs curl itself (`exec: curl -s -o /dev/null -w '%{http_code}' -- "
    "{{ url | quote }}`)"
)
CURL_CONFLICTS = {
    "-o": _CURL_OUTPUT,
    "--output": _CURL_OUTPUT,
    "-O": "it writes the body to a file named after the URL instead of stdout, against the shorthand's `-o -`; "
    "write an `exec:` tool that runs curl itself to save files",
    "--remote-name": "",
    "--remote-name-all": "",
    "-J": "",
    "--remote-header-name": "",
    "--output-dir": "",
    "--proto": "it replaces the protocols toolrun lets curl use (`--proto =http,https`); set `protocols:` on the "
    "tool instead",
    "-K": "it reads curl options from a file, which can undo the shorthand's `-o -` and `--proto`; write the "
    "options in the value itself",
    "--config": "",
}
for _name in ("--remote-name", "--remote-name-all", "-J", "--remote-header-name", "--output-dir"):
    CURL_CONFLICTS[_name] = CURL_CONFLICTS["-O"]
CURL_CONFLICTS["--config"] = CURL_CONFLICTS["-K"]


def curl_option_problems(template: str) -> list[tuple[str, str]]:
    """(option as written, warning) for each option of a `curl:` value that fights the shorthand
    (`curl -sS -o - --proto =...`): output to a file, other protocols, a config file. `-w` is fine:
    curl prints it after the body."""
    import shlex

    literal = _TAG.sub("X", template)  # template tags as plain words: they are never options
    try:
        words = shlex.split(literal, comments=True)
    except ValueError:
        return []
    found: list[tuple[str, str]] = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word == "--":
            break
        option = word.split("=", 1)[0] if word.startswith("--") else word
        if word.startswith("--"):
            skip = option in CURL_ARG_OPTIONS and "=" not in word
        elif word.startswith("-") and len(word) > 1:
            for i, letter in enumerate(word[1:], 1):
                if f"-{letter}" in CURL_CONFLICTS:
                    option = f"-{letter}"
                    break
                if letter in _CURL_SHORT_ARGS:
                    skip = i == len(word) - 1
                    break
            else:
                continue
        if option in CURL_CONFLICTS:
            found.append((word, f"`{option}` in a `curl:` value: {CURL_CONFLICTS[option]}"))
    return found


# Options of curl whose argument is a URL curl connects to (as a positional word is).
_CURL_URL_OPTIONS = frozenset({"--url", "-x", "--proxy"})
_MARK = re.compile(r"\x01(\d+)\x02")
_IDENT = re.compile(r"[A-Za-z_]\w*")


def _url_words(template: str) -> tuple[list[str], list[str]]:
    """The words of a `curl:` value that curl reads as URLs (positional words, all words after `--`, the
    argument of `--url` and `--proxy`), with each `{{ }}` tag replaced by a marker `\x01N\x02`; and the text of
    each tag, by N."""
    import shlex

    tags: list[str] = []

    def mark(match: re.Match[str]) -> str:
        if match.group(0).startswith("{%"):
            return ""
        tags.append(match.group(0))
        return f"\x01{len(tags) - 1}\x02"

    try:
        words = shlex.split(_TAG.sub(mark, template), comments=True)
    except ValueError:
        return [], tags
    urls: list[str] = []
    after_dashdash, arg_of = False, ""
    for word in words:
        if after_dashdash:
            urls.append(word)
        elif arg_of:
            if arg_of in _CURL_URL_OPTIONS:
                urls.append(word)
            arg_of = ""
        elif word == "--":
            after_dashdash = True
        elif word.startswith("-") and len(word) > 1:
            option = word.split("=", 1)[0] if word.startswith("--") else word
            if word.startswith("--") and "=" in word and option in _CURL_URL_OPTIONS:
                urls.append(word.split("=", 1)[1])
            elif word.startswith("--"):
                arg_of = option if option in CURL_ARG_OPTIONS and "=" not in word else ""
            else:
                arg_of = _short_arg_of(word)
        else:
            urls.append(word)
    return urls, tags


def _short_arg_of(word: str) -> str:
    """The short option of a cluster (`-sSx`) that takes the next word as its argument, or ""."""
    for i, letter in enumerate(word[1:], 1):
        if letter in _CURL_SHORT_ARGS:
            return f"-{letter}" if i == len(word) - 1 else ""
    return ""


def curl_url_problems(template: str, declared: dict[str, Param]) -> list[tuple[str, str]]:
    """(param, warning) for each param of a `curl:` value that lands in the scheme, host or port of a URL curl
    requests: a caller then chooses which server the tool reaches (SSRF). A param with an `enum` is fine."""
    urls, tags = _url_words(template)
    found: dict[str, str] = {}
    for url in urls:
        scheme = url.find("://")
        start = scheme + 3 if scheme >= 0 else 0
        ends = [i for i in (url.find(c, start) for c in "/?#") if i >= 0]
        end = min(ends, default=len(url))
        for match in _MARK.finditer(url):
            if match.start() >= end:
                continue
            part = "host or port"
            if 0 <= match.start() < scheme:
                part = "scheme"
            elif scheme < 0 and match.start() == 0:
                part = "scheme and host"
            for name in _IDENT.findall(tags[int(match.group(1))]):
                param = declared.get(name)
                if param is None or param.enum is not None or name in found:
                    continue
                found[name] = (
                    f"param {name!r} sets the {part} of the URL curl requests: any caller can point the tool at "
                    "any address the server reaches (a cloud metadata service, a loopback admin port); write the "
                    "scheme and host in the template and pass the value in the path or query "
                    f"(`https://api.example/{{{{ {name} | urlencode }}}}`), or give the param an `enum`"
                )
    return sorted(found.items())


# Options of curl that take the next word as their argument: a value right after one is that argument.
CURL_ARG_OPTIONS = frozenset(
    {
        *("-H", "--header", "-d", "--data", "--data-raw", "--data-binary", "--data-urlencode", "--json"),
        *("-X", "--request", "-u", "--user", "-A", "--user-agent", "-e", "--referer", "-b", "--cookie"),
        *("-F", "--form", "--form-string", "--url", "-m", "--max-time", "--connect-timeout", "-x", "--proxy"),
        *("-w", "--write-out", "-o", "--output", "--proto", "--retry", "--resolve", "--cacert"),
    }
)
CURL_PREFIX = ("curl", "-sS", "-o", "-", "--proto", "=http,https")
_TEXT_TYPES = ("str", "list", "dict")


def code_message(use: dataflow.Use) -> str:
    """The warning for a value the shell runs as code, naming the role it has."""
    name = use.name
    if use.role == dataflow.COMMAND:
        where = "the command name"
    elif use.role == dataflow.EVAL:
        where = "shell code (the argument of `eval`)"
    else:
        where = f"shell code (the command string of `{use.shell or 'sh'} -c`)"
    if use.via.startswith("$"):
        what = "runs what the value names" if use.role == dataflow.COMMAND else "reads the variable's text as code"
        return (
            f"param {name!r} becomes {where} through the shell variable `{use.via}` it is assigned to: the "
            f"shell {what}, so `| quote` does not protect it; pass the value as an argument or through stdin"
        )
    return (
        f"param {name!r} becomes {where}: `| quote` protects one shell level only; pass the value as an "
        "argument or through stdin"
    )


# The `what` of each data-flow warning -> its name in WARNING_CODES (for `allow_warnings:`).
_CODES = {
    "unguarded": "unguarded-param",
    "code": "shell-code",
    "escaped": "backslash-quote",
    "unquoted": "unquoted-param",
    "nested": "nested-quotes",
    "comment": "shell-comment",
    "negative": "negative-number",
    "curl-option": "curl-option-position",
}


def data_flow(
    uses: list[dataflow.Use], declared: dict[str, Param], kind: str
) -> tuple[list[tuple[str, bool, str, str, int]], tuple[tuple[str, bool], ...]]:
    """Warnings (param, about an unquoted use, message, warning code, the use's line in the template) for where the
    template puts each value, and (for curl) the params that can reach curl's option position, with whether they
    arrive quoted."""
    found: dict[tuple[str, str], tuple[str, bool, str, str, int]] = {}
    options: dict[str, bool] = {}
    use: dataflow.Use | None = None

    def warn(name: str, what: str, message: str, unquoted: bool = False) -> None:
        line = use.line if use is not None else 0
        found.setdefault((name, what), (name, unquoted, message, _CODES[what.split()[0]], line))

    for use in uses:
        param = declared.get(use.name)
        if param is None:
            continue
        name, ptype = use.name, param.type
        if not use.guarded and not param.required and param.default is None:
            warn(
                name,
                "unguarded",
                f"param {name!r} is optional without a default and rendered outside a guard: a call that "
                f"leaves it out fails; wrap it in `{{% if {name} %}}` or give it a default",
            )
        if use.code and use.state in (RAW, QUOTED) and ptype in _TEXT_TYPES:
            warn(name, f"code {use.via}", code_message(use))
        elif use.escaped and use.state == QUOTED and ptype in _TEXT_TYPES:
            warn(
                name,
                "escaped",
                f"param {name!r} comes right after a backslash, which escapes the opening quote that `| quote` "
                "adds: the value then runs as shell code; remove the backslash",
            )
        elif use.state == RAW and ptype in _TEXT_TYPES:
            how = f" (through `{use.via}`)" if use.via else ""
            if use.after_quote:
                how = f" (`| {use.after_quote}` after `| quote` undoes the quoting)"
            warn(name, "unquoted", f"param {name!r} ({ptype}) is interpolated without `| quote`{how}", True)
        elif use.state == QUOTED and use.context != "plain":
            marks = "'...'" if use.context == "single" else '"..."'
            warn(
                name,
                "nested",
                f"param {name!r} is quoted with `| quote` inside a {marks} string of the command, where that "
                "quoting does not hold (the value can end the string); drop the surrounding quotes",
            )
        if use.comment and use.state in (RAW, QUOTED) and ptype in _TEXT_TYPES:
            warn(
                name,
                "comment",
                f"param {name!r} is rendered inside a shell comment (after `#`): a newline in the value ends "
                "the comment and the rest of the value runs as a command; move it out of the comment",
            )
        at_option = use.context == "plain" and use.word_start and not use.after_dashdash
        if kind == "curl":
            at_option = at_option and use.prev_word not in CURL_ARG_OPTIONS
        else:
            at_option = at_option and not use.prev_word.startswith("-")
        number = (ptype in ("int", "float") and use.state != SAFE) or use.state == NUMBER
        if at_option and number and not (param.min is not None and param.min >= 0):
            warn(
                name,
                "negative",
                f"param {name!r} ({ptype}) starts a word before `--`: a negative value like -5 is read as an "
                "option; put `--` before it or set `min: 0`",
            )
        if kind == "curl" and ptype in _TEXT_TYPES and use.state in (RAW, QUOTED):
            raw_before_dashdash = use.state == RAW and use.context == "plain" and not use.after_dashdash
            if at_option or raw_before_dashdash:
                options[name] = options.get(name, True) and use.state == QUOTED
                warn(
                    name,
                    "curl-option",
                    f"param {name!r} can reach curl's option position: write `--` before it (toolrun refuses a "
                    "value that would start an option, like `--version` or `-K file`, at call time)",
                )
    return list(found.values()), tuple(sorted(options.items()))
