"""Shell completion of tool keys, parameter names and values, straight from the catalog cache.

`toolrun call ops.<TAB>` lists the keys, `toolrun call ops.disk_usage p<TAB>` gives `path=`, and
after `=` the declared `enum` values (`true`/`false` for a bool). The shells ask the program
itself (the scripts in completions/ run `toolrun` with `_TOOLRUN_COMPLETE=complete_<shell>`), and
the console script answers these requests here, before the Typer app is even imported. The answer
comes from a completion index, a small JSON file in the cache dir holding each tool's summary and
params, rebuilt (from the catalog and its cache) only when a catalog file or a Python file beside it
changes: no YAML, no catalog package, no Typer on the way to a TAB. Any other
completion (subcommands, options, files) returns None and is left to Typer.

Words and the word under the cursor arrive per shell: bash gives COMP_WORDS split at its word
breaks (`path=/v` arrives as `path`, `=`, `/v`, and the reply replaces only `/v`); zsh and fish
give the line as typed, and the reply replaces the whole `path=/v` word.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

VAR = "_TOOLRUN_COMPLETE"
# Options that take a value, per subcommand (their values are not positional arguments).
_VALUED = {"--catalog", "-c", "--input", "-i", "--group", "-g", "--format", "-f", "--url", "--api-key"}
_ROOT_VALUED = {"--url", "--api-key"}
_SUBCOMMANDS = ("call", "describe")
_SPACE = re.compile(r"\s")


def _split(text: str) -> list[str]:
    """Shell-like split that never fails on an open quote (click's split_arg_string, simplified)."""
    import shlex

    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    try:
        for token in lex:
            out.append(token)
    except ValueError:  # an unclosed quote: keep what was typed after it
        out.append(lex.token)
    return out


def request(environ: Mapping[str, str]) -> tuple[str, list[str], str] | None:
    """(shell, words before the cursor word, the cursor word) from the shell's environment.

    For bash the `name`, `=`, `value` pieces are joined back into `name=value`, and the cursor word
    keeps the `name=` part (the reply strips it again)."""
    mode = environ.get(VAR, "")
    shell = mode.removeprefix("complete_")
    if shell == "bash":
        words = _split(environ.get("COMP_WORDS", ""))
        try:
            cword = int(environ.get("COMP_CWORD", ""))
        except ValueError:
            return None
        words = [*words[:cword], words[cword] if cword < len(words) else ""]
        joined: list[str] = []
        for word in words[1:]:
            if joined and (word == "=" or joined[-1].endswith("=")) and not joined[-1].startswith("-"):
                joined[-1] += word
            else:
                joined.append(word)
        if not joined:
            return None
        return shell, joined[:-1], joined[-1]
    if shell in ("zsh", "fish"):
        line = environ.get("_TYPER_COMPLETE_ARGS", "")
        words = _split(line)[1:]
        if words and not line.endswith(" "):
            return shell, words[:-1], words[-1]
        return shell, words, ""
    return None


def _catalog_flags(words: Sequence[str]) -> list[str]:
    found: list[str] = []
    for i, word in enumerate(words):
        if word in ("--catalog", "-c") and i + 1 < len(words):
            found.append(words[i + 1])
        elif word.startswith("--catalog="):
            found.append(word.split("=", 1)[1])
    return found


def _files(paths: Sequence[str]) -> list[Path]:
    """The catalog files of `paths` (a directory's *.yaml and *.yml), as the loader expands them."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            files.append(path)
    return files


def _stamp(files: Sequence[Path]) -> list[Any]:
    """What the index depends on: each catalog file, and the Python files beside it (fn tools)."""
    stamp: list[Any] = []
    dirs: set[Path] = set()
    for file in files:
        st = file.stat()
        stamp.append((str(file.resolve()), st.st_mtime_ns, st.st_size))
        dirs.add(file.resolve().parent)
    for folder in sorted(dirs):
        for py in sorted(folder.glob("*.py")):
            st = py.stat()
            stamp.append((str(py), st.st_mtime_ns, st.st_size))
    return stamp


class Tool:
    """What completion needs of a tool: its summary and params (name, type, required, enum, help)."""

    __slots__ = ("params", "summary")

    def __init__(self, summary: str, params: list[list[Any]]) -> None:
        self.summary = summary
        self.params = params


def _tools(words: Sequence[str], environ: Mapping[str, str]) -> dict[str, Tool]:
    """The catalog's tools by key, from the completion index (a small JSON file in the cache dir,
    rebuilt when a catalog file or a Python file beside it changes); {} without a usable catalog."""
    import hashlib
    import json

    from . import __version__
    from .settings import Settings

    try:
        settings = Settings.load({}, environ)
        paths = _catalog_flags(words) or list(settings.catalog or ["tools.yaml"])
        files = _files(paths)
        digest = hashlib.sha256(json.dumps([__version__, _stamp(files)]).encode()).hexdigest()[:32]
        index = settings.dirs["cache"] / "complete" / f"{digest}.json"
        try:
            data = json.loads(index.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = _build_index(files, settings, environ)
            _write(index, json.dumps(data, ensure_ascii=False))
        return {key: Tool(summary, params) for key, (summary, params) in data.items()}
    except Exception:  # a broken or missing catalog completes nothing; it never prints a traceback
        return {}


def _build_index(files: Sequence[Path], settings: Any, environ: Mapping[str, str]) -> dict[str, Any]:
    from .catalog import LoadOptions, load
    from .formatting import plain

    cache = settings.dirs["cache"] / "catalog" if settings.catalog_cache else None
    options = LoadOptions(
        default_timeout=settings.default_timeout,
        max_output=settings.max_output,
        cache_dir=cache,
        curl_protocols=settings.curl_protocols,
    )
    tools = load([str(f) for f in files], environ, options).tools
    return {
        key: [
            plain(tool.summary),
            [[p.name, p.type, p.required, list(p.enum) if p.enum else None, p.description] for p in tool.params],
        ]
        for key, tool in tools.items()
    }


def _write(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass  # an index that cannot be written is only a slower next TAB


def candidates(words: Sequence[str], incomplete: str, environ: Mapping[str, str]) -> list[tuple[str, str]] | None:
    """(value, help) pairs for the word under the cursor, or None when this is not ours to answer."""
    i = 0
    while i < len(words) and words[i].startswith("-"):  # root options: --url URL, --api-key KEY, ...
        i += 2 if words[i] in _ROOT_VALUED else 1
    if i >= len(words) or words[i] not in _SUBCOMMANDS:
        return None
    sub, rest = words[i], words[i + 1 :]
    if incomplete.startswith("-") or (rest and rest[-1] in _VALUED):
        return None  # an option, or an option's value: Typer's
    positional: list[str] = []
    skip = False
    for word in rest:
        if skip:
            skip = False
        elif word in _VALUED:
            skip = True
        elif not word.startswith("-"):
            positional.append(word)
    if environ.get("TOOLRUN_URL") or any(w == "--url" or w.startswith("--url=") for w in words[:i]):
        return []  # a remote catalog is not completed (no network round trip at every TAB)
    tools = _tools(rest, environ)
    if not positional:
        return [(key, tool.summary) for key, tool in tools.items() if key.startswith(incomplete)]
    if sub != "call":
        return []
    tool = tools.get(positional[0])
    if tool is None:
        return []
    if "=" in incomplete:
        name, _, typed = incomplete.partition("=")
        name = name.removesuffix(":")
        param = next((p for p in tool.params if p[0] == name), None)
        if param is None:
            return []
        _, kind, _, enum, _ = param
        values = [_text(v) for v in enum] if enum else (["true", "false"] if kind == "bool" else [])
        return [(f"{name}={v}", "") for v in values if v.startswith(typed)]
    given = {w.split("=", 1)[0].removesuffix(":") for w in positional[1:] if "=" in w}
    return [
        (f"{name}=", f"{kind}{'' if required else ', optional'}: {text}".rstrip(": "))
        for name, kind, required, _, text in tool.params
        if name.startswith(incomplete) and (name not in given or kind == "list")
    ]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _zsh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def render(shell: str, incomplete: str, items: list[tuple[str, str]]) -> str:
    """The reply in the form each shell's script expects."""
    if shell == "bash":
        # bash replaces only the text after the last `=` of the word: answer that part.
        cut = incomplete.rfind("=") + 1
        return "\n".join(value[cut:] for value, _ in items)
    if shell == "fish":
        return "\n".join(f"{value}\t{_SPACE.sub(' ', text)}" if text else value for value, text in items)
    # zsh: the output is eval'd; `name=` gets no trailing space
    if not items:
        return "_files"
    opens = [v for v, _ in items if v.endswith("=")]
    closed = [(v, t) for v, t in items if not v.endswith("=")]
    parts = []
    if opens:
        parts.append("compadd -S '' -- " + " ".join(_zsh_quote(v) for v in opens))
    if closed:
        values = " ".join(_zsh_quote(v) for v, _ in closed)
        descriptions = " ".join(_zsh_quote(f"{v}:{t}" if t else v) for v, t in closed)
        parts.append(f"local -a _toolrun_d=({descriptions}); local -a _toolrun_v=({values}); ")
        parts.append("compadd -d _toolrun_d -l -- ${_toolrun_v[@]}")
    return "; ".join(parts)


def answer(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """(text for stdout, exit status) for a completion request that is ours, else None."""
    parsed = request(environ)
    if parsed is None:
        return None
    shell, words, incomplete = parsed
    items = candidates(words, incomplete, environ)
    if items is None:
        return None
    if shell == "fish" and environ.get("_TYPER_COMPLETE_FISH_ACTION") == "is-args":
        return "", 0 if items else 1
    return render(shell, incomplete, items), 0


def fast(environ: Mapping[str, str] | None = None) -> None:
    """Answer and exit when the request is ours (called before the Typer app is imported)."""
    environ = os.environ if environ is None else environ
    done = answer(environ)
    if done is None:
        return
    text, status = done
    if text:
        sys.stdout.write(text + "\n")
    sys.stdout.flush()
    os._exit(status)
