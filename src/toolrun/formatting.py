"""Text forms shared by the doors: a result as text, signatures, markdown and HTML blocks."""

from __future__ import annotations

import html
import json
import re
from typing import Any

from .models import CallResult, Param, ToolSpec


def result_text(value: Any) -> str:
    """A tool result coerced to text: str as is, tuples as Python reprs, dicts/lists as JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):
        return repr(value)
    if isinstance(value, (dict, list, bool, int, float)):
        try:
            return json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            return repr(value)
    return str(value)


def output_bytes(result: CallResult | None) -> int:
    """The bytes of output a call gave: an exec tool's stdout and stderr as kept, an fn tool's result as text."""
    if result is None:
        return 0
    if result.exec is not None:
        return result.exec.bytes_kept
    return len(result_text(result.value).encode("utf-8", "replace"))


def answer_text(result: CallResult) -> str:
    """A call's answer as text: a typed output's value as JSON (a JSON string stays quoted), else `result_text`."""
    if result.typed:
        return json.dumps(result.value, ensure_ascii=False)
    return result_text(result.value)


def encodable(text: str) -> bool:
    """Whether `text` can be sent as UTF-8 (it holds no lone surrogate, which an fn tool's text may)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def scrub_surrogates(value: Any) -> Any:
    """`value` with every lone surrogate in its strings (keys included) replaced by "?", as the HTTP door's
    `encode("utf-8", "replace")` does; tuples become lists."""
    if isinstance(value, str):
        return value if encodable(value) else value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {scrub_surrogates(k): scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_surrogates(v) for v in value]
    return value


_SCALARS = frozenset({str, int, bool, float})  # exact types (a subclass may override how it encodes)


def result_json(value: Any) -> Any:
    """A JSON-friendly form of a result (tuples become {returncode, stdout, stderr})."""
    if isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], int):
        return {"returncode": value[0], "stdout": value[1], "stderr": value[2]}
    if value is None or type(value) in _SCALARS:  # json.dumps never refuses these: no trial encoding
        return value
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return result_text(value)
    return value


def structured_result(result: CallResult) -> dict[str, Any]:
    """A call result as one JSON object (MCP structured content, `toolrun call --json`).

    fn tools: `{key, ok, result}`; exec and curl tools: `{key, ok, returncode, stdout, stderr,
    timed_out}` (and `result`, the parsed value, for a typed `output:`), plus `truncated: true`,
    `bytes_kept` and `bytes_dropped` (stdout and stderr together) when output was capped.
    """
    payload: dict[str, Any] = {"key": result.key, "ok": result.ok}
    ex = result.exec
    if ex is None:
        payload["result"] = result_json(result.value)
        return payload
    payload.update(returncode=ex.returncode, stdout=ex.stdout, stderr=ex.stderr, timed_out=ex.timed_out)
    if result.typed:  # the parsed output of a tool with a typed `output:` (typedoutput.py)
        payload["result"] = result.value
    if ex.truncated:
        payload.update(truncated=True, bytes_kept=ex.bytes_kept, bytes_dropped=ex.bytes_dropped)
    return payload


_MD_INLINE = [
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), r"\1"),  # [text](url), ![alt](src) -> text
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # **bold**, __bold__
    (re.compile(r"(?<![\w*])\*(?=\S)(.+?)(?<=\S)\*(?![\w*])"), r"\1"),  # *em*
    (re.compile(r"(?<![\w_])_(?=\S)(.+?)(?<=\S)_(?![\w_])"), r"\1"),  # _em_ (not snake_case)
    (re.compile(r"~~(?=\S)(.+?)(?<=\S)~~"), r"\1"),  # ~~strike~~
    (re.compile(r"`+([^`]+)`+"), r"\1"),  # `code`
    (re.compile(r"^\s{0,3}(?:#{1,6}\s+|>\s?|[-*+]\s+|\d+[.)]\s+)"), ""),  # heading, quote, list marker
]


def plain(text: str) -> str:
    """One line of Markdown as plain text: emphasis, code marks, links and line markers dropped."""
    for pattern, replacement in _MD_INLINE:
        text = pattern.sub(replacement, text)
    return text.strip()


def call_payload(result: CallResult) -> dict[str, Any]:
    """`toolrun call --json`, and `POST /tools/{key}` asked for JSON: the structured result plus
    `result` for every kind (`typed: true` when it is a typed output's parsed value), the wall time in
    `seconds`, and for fn tools `text`, the result as the plain-text answer would give it."""
    payload = {**structured_result(result), "seconds": round(result.seconds, 6)}
    payload.setdefault("result", result_json(result.value))
    if result.typed:  # `result` is a typed output's parsed value (the tool's `output:`)
        payload["typed"] = True
    ex = result.exec
    if ex is not None:
        payload.update(truncated=ex.truncated, bytes_kept=ex.bytes_kept, bytes_dropped=ex.bytes_dropped)
    else:
        payload["text"] = result_text(result.value)
    return payload


def _param_sig(p: Param) -> str:
    if p.required:
        return f"{p.name}: {p.type}"
    if p.default is None:
        return f"{p.name}: {p.type} | None = None"
    return f"{p.name}: {p.type} = {p.default!r}"


def signature(tool: ToolSpec) -> str:
    """`key(name: type, opt: type = default, ...) -> return_type`, Python style."""
    return f"{tool.key}({', '.join(_param_sig(p) for p in tool.params)}) -> {tool.return_type}"


def _cell(value: Any) -> str:
    text = "" if value is None else (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return text.replace("|", "\\|").replace("\n", " ")


def markdown(tool: ToolSpec) -> str:
    lines = [f"### `{tool.key}`", "", "```python", signature(tool), "```", ""]
    lines.append(f"Groups: {', '.join(f'`{g}`' for g in tool.groups)}")
    lines.append("")
    if tool.description.strip():
        lines += [tool.description.strip(), ""]
    if tool.params:
        lines += ["| param | type | required | default | description |", "|---|---|---|---|---|"]
        for p in tool.params:
            required = "yes" if p.required else "no"
            lines.append(f"| `{p.name}` | {p.type} | {required} | {_cell(p.default)} | {_cell(p.description)} |")
        lines.append("")
    lines += [f"Example: `{tool.example}`", ""]
    return "\n".join(lines)


def markdown_page(tools: list[ToolSpec]) -> str:
    return "\n".join(markdown(t) for t in tools) if tools else "_No tools._\n"


def html_block(tool: ToolSpec) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td><code>{e(p.name)}</code></td><td>{e(p.type)}</td><td>{'yes' if p.required else 'no'}</td>"
        f"<td>{e(_cell(p.default))}</td><td>{e(p.description)}</td></tr>"
        for p in tool.params
    )
    table = (
        "<table><thead><tr><th>param</th><th>type</th><th>required</th><th>default</th>"
        f"<th>description</th></tr></thead><tbody>{rows}</tbody></table>"
        if tool.params
        else ""
    )
    groups = " ".join(f'<span class="group">{e(g)}</span>' for g in tool.groups)
    return (
        f'<section class="tool" id="{e(tool.key, quote=True)}">'
        f"<h3><code>{e(tool.key)}</code></h3>"
        f'<pre class="signature"><code>{e(signature(tool))}</code></pre>'
        f'<p class="groups">{groups}</p>'
        f'<pre class="description">{e(tool.description.strip())}</pre>'
        f"{table}"
        f'<p class="example">Example: <code>{e(tool.example)}</code></p>'
        "</section>"
    )


def html_page(tools: list[ToolSpec]) -> str:
    body = "\n".join(html_block(t) for t in tools) or "<p>No tools.</p>"
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>toolrun tools</title></head>'
        f"<body>\n{body}\n</body></html>\n"
    )


def gh_escape(text: str, prop: bool = False) -> str:
    """GitHub Actions workflow-command escaping (properties also escape `:` and `,`)."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


# -- compact text for agents (MCP text content): every token counts --------------------------------


def search_text(
    items: list[ToolSpec],
    total: int,
    offset: int,
    next_offset: int | None,
    scores: list[float] | None = None,
    min_score: float = 0.0,
) -> str:
    """One line per tool, `.92 key(param: type = default, ...) - summary` (its score, two places, when the query
    was not blank), then where the page is."""
    from .paramtypes import signature

    if scores is None:
        lines = [search_line(signature(t), t.summary) for t in items]
    else:
        width = SEARCH_LINE - 4  # the score and a space: a line, and so a page, takes no more than before
        lines = [
            f"{_score(sc)} {search_line(signature(t), t.summary, width)}" for t, sc in zip(items, scores, strict=True)
        ]
    if not items and total == 0 and scores is not None and min_score > 0:
        lines.append(f"No good match: no tool scores {min_score:g} or more. Try other words, or min_score=0.")
    elif not items:
        lines.append("No tools match." if total == 0 else f"No tools at offset {offset} (total {total}).")
    else:
        tail = f"{offset + 1}-{offset + len(items)} of {total}"
        lines.append(f"[{tail}; next_offset={next_offset}]" if next_offset is not None else f"[{tail}]")
    return "\n".join(lines)


SEARCH_LINE = 112  # characters a search result line takes at most: a page of 10 stays under 300 tokens
SEARCH_SIGNATURE = 72  # of which the signature (its later params elided)


def _score(score: float) -> str:
    """A score in three characters: `.92`, `1.0`."""
    return "1.0" if score >= 0.995 else f"{score:.2f}"[1:]


def search_line(sig: str, summary: str, width: int = SEARCH_LINE) -> str:
    """`key(params) - summary` in at most `width` characters: later params become `…`, the summary is cut at a
    word (describe_tools has it all)."""
    if len(sig) > SEARCH_SIGNATURE:
        cut = sig.rfind(", ", 0, SEARCH_SIGNATURE - 3)
        sig = (sig[:cut] if cut > sig.find("(") else sig[: SEARCH_SIGNATURE - 3].rstrip(", ")) + ", …)"
    if not summary:
        return sig
    room = width - len(sig) - 3
    if len(summary) > room:
        summary = summary[: max(room - 1, 0)].rsplit(" ", 1)[0].rstrip(" ,;:.") + "…"
    return f"{sig} - {summary}"


def describe_text(tool: ToolSpec) -> str:
    """A tool for an agent: signature, description, each param's description, hints, an example."""
    from .paramtypes import signature

    lines = [signature(tool)]
    if tool.description.strip():
        lines.append(tool.description.strip())
    lines += [f"- {p.name}: {p.description.strip()}" for p in tool.params if p.description.strip()]
    hints = annotation_words(tool)
    if hints:
        lines.append(f"hints: {hints}")
    runs = job_words(tool)
    if runs:
        lines.append(f"runs: {runs}")
    lines.append(f"returns: {tool.return_type}")
    if tool.typed_output is not None:
        lines.append(f"  ({return_words(tool.return_type, tool.typed_output)})")
    lines.append(f"example: {tool.example}")
    return "\n".join(lines)


def job_words(tool: ToolSpec) -> str:
    """How a call of `tool` runs, when not at once: '' for a plain tool."""
    if tool.approval:
        who = ", ".join(tool.approvers) or "admin"
        how = "; the call answers with a job at once" if tool.run_async else "; the call waits for the decision"
        return f"needs approval by a member of {who} before each call runs{how}"
    if tool.run_async:
        return "runs as a job: the call answers at once with the job's id, the result comes later"
    return ""


def direct_description(tool: ToolSpec) -> str:
    """A tool's description as MCP's direct mode lists it: the catalog's text, then how a call runs when it waits
    for a person or answers with a job."""
    text = tool.description or tool.key
    runs = job_words(tool)
    return f"{text.rstrip()}\n\nRuns: {runs}." if runs else text


def return_words(return_type: str, output: Any = None) -> str:
    """What a return type means, in words ('' when the type says it all). The UI's ToolDetail says the same.
    `output`: the tool's typed output (typedoutput.py), when it has one."""
    from .models import EXEC_RETURN_TYPE

    if output is not None and output.typed:
        from .typedoutput import words

        return words(output)
    if return_type == EXEC_RETURN_TYPE:
        return (
            "the command's standard output when it exits with code 0; otherwise the tuple "
            "(exit code, stdout, stderr), where exit code -1 means the timeout stopped it"
        )
    if return_type == "unknown":
        return "the function declares no return type"
    return ""


def annotation_words(tool: ToolSpec) -> str:
    """The declared behaviour hints as words (`read-only, idempotent`), '' when none is declared."""
    entry = tool.annotations
    words = []
    for field, yes, no in (
        ("read_only", "read-only", "writes"),
        ("destructive", "destructive", "not destructive"),
        ("idempotent", "idempotent", "not idempotent"),
        ("open_world", "open world", "closed world"),
    ):
        value = entry.get(field)
        if value is not None:
            words.append(yes if value else no)
    return ", ".join(words)
