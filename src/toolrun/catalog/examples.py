"""Tool examples: the `examples:` a catalog declares, checked at load time and run by `toolrun test`.

An example is a call (its `args`) and what it should give (`expect`). `toolrun test` runs every
example through the ToolService, as any other door would call the tool, and compares:

    exit_code        the exit code `toolrun call` would end with: the command's own code,
                     124 on timeout; an fn tool gives 0 (or 1 when it raises). Default 0.
    stdout           the whole output, exactly (an fn tool's result as `toolrun call` prints it)
    stdout_matches   a regular expression found anywhere in the output (re.search, multiline)
    stderr_matches   the same, on stderr (exec and curl tools)
    json             {dotted.path: value}: the output parsed as JSON holds these values
    error            the call must fail before it runs (bad params, ...), with a matching message

Examples of a tool that changes things are skipped unless asked for (`--all`): a tool declared
`destructive: true` or `read_only: false`, or an example with `safe: false`. `safe: true` on an
example runs it whatever the tool declares.

The reports (text lines, JUnit XML, GitHub annotations) are built here too, so every door that
shows them shows the same thing.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from xml.sax.saxutils import quoteattr as _quoteattr

from ..errors import ParamError, ToolrunError
from ..models import CallResult, Example, Identity, ToolSpec

Status = Literal["passed", "failed", "skipped", "error"]
_SHOWN = 200  # characters of an actual value quoted in a failure message


@dataclass(frozen=True, slots=True)
class Outcome:
    """One example's verdict."""

    tool: ToolSpec
    example: Example
    index: int  # 1-based, within the tool
    status: Status
    message: str = ""
    seconds: float = 0.0

    @property
    def name(self) -> str:
        """`key[name]`, or `key[n]` for an unnamed example."""
        return f"{self.tool.key}[{self.example.name or self.index}]"


# -- load-time checks ----------------------------------------------------------------------------


def problems(tool: ToolSpec, example: Example, index: int = 1) -> list[tuple[tuple[Any, ...], str]]:
    """What is wrong with example number `index` of `tool`: (location within it, message) pairs.

    Arguments are checked against the params exactly as a call would check them (unknown names,
    wrong types, missing required ones, enum/pattern/min/max), unless the example expects an
    `error`; every regular expression must compile.
    """
    from .. import params

    found: list[tuple[tuple[Any, ...], str]] = []
    expect = example.expect
    for field in ("stdout_matches", "stderr_matches", "error"):
        pattern = getattr(expect, field)
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as exc:
            found.append(
                (("expect", field), f"example {_label(example, index)}: {field} is not a regular expression: {exc}")
            )
    if expect.error is None:
        try:
            params.validate(tool, example.args)
        except ParamError as exc:
            where: tuple[Any, ...] = ("args",)
            for name in example.args:
                if repr(name) in str(exc):
                    where = ("args", name)
                    break
            found.append((where, f"example {_label(example, index)}: {exc}"))
    if expect.stderr_matches is not None and tool.kind == "fn":
        found.append((("expect", "stderr_matches"), f"example {_label(example, index)}: fn tools have no stderr"))
    return found


def _label(example: Example, index: int) -> str:
    return repr(example.name) if example.name else str(index)


# -- running -------------------------------------------------------------------------------------


def _hint(tool: ToolSpec, name: str) -> bool | None:
    """A declared behaviour hint (`destructive`, `read_only`) of the tool, or None when undeclared."""
    value = getattr(tool, name, None)
    if value is None:
        annotations = getattr(tool, "annotations", None)
        if isinstance(annotations, dict):
            value = annotations.get(name)
    return value if isinstance(value, bool) else None


def skip_reason(tool: ToolSpec, example: Example, run_unsafe: bool) -> str | None:
    """Why this example does not run by default (None: it runs)."""
    if run_unsafe or example.safe is True:
        return None
    if example.safe is False:
        return "marked safe: false (run with --all)"
    if _hint(tool, "destructive") is True:
        return "destructive tool (run with --all)"
    if _hint(tool, "read_only") is False:
        return "tool is not read-only (run with --all)"
    return None


def exit_code(result: CallResult) -> int:
    """The exit code `toolrun call` ends with for this result (124 on timeout, 128+N on signal N)."""
    ex = result.exec
    if ex is None:
        return 0
    if ex.timed_out:
        return 124
    if ex.returncode < 0:
        return 128 - ex.returncode
    return min(ex.returncode, 255)


def output_text(result: CallResult) -> str:
    """What `toolrun call` prints on stdout for this result."""
    from ..formatting import result_text

    if result.exec is not None:
        return result.exec.stdout
    return result_text(result.value)


def _show(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


def _lookup(data: Any, path: str) -> tuple[bool, Any]:
    """`a.b.0.c` in nested dicts and lists: (found, value)."""
    for part in path.split(".") if path else []:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and part.lstrip("-").isdigit() and -len(data) <= int(part) < len(data):
            data = data[int(part)]
        else:
            return False, None
    return True, data


def judge(example: Example, result: CallResult) -> list[str]:
    """Every way `result` differs from what `example` expects (empty: it passed)."""
    expect = example.expect
    failures: list[str] = []
    if expect.error is not None:
        return [f"expected an error matching /{expect.error}/, but the call ran (exit {exit_code(result)})"]
    out = output_text(result)
    code = exit_code(result)
    wanted = 0 if expect.exit_code is None else expect.exit_code
    if code != wanted:
        stderr = result.exec.stderr.strip() if result.exec is not None else ""
        failures.append(f"exit code {code}, expected {wanted}" + (f" (stderr: {_show(stderr)})" if stderr else ""))
    if expect.stdout is not None and out != expect.stdout:
        failures.append(f"stdout is {_show(out)}, expected {_show(expect.stdout)}")
    if expect.stdout_matches is not None and not re.search(expect.stdout_matches, out, re.MULTILINE):
        failures.append(f"stdout does not match /{expect.stdout_matches}/: {_show(out)}")
    if expect.stderr_matches is not None:
        err = result.exec.stderr if result.exec is not None else ""
        if not re.search(expect.stderr_matches, err, re.MULTILINE):
            failures.append(f"stderr does not match /{expect.stderr_matches}/: {_show(err)}")
    if expect.json is not None:
        if result.typed or (result.exec is None and not isinstance(result.value, str)):
            data: Any = result.value
        else:
            try:
                data = json.loads(out)
            except ValueError:
                return [*failures, f"stdout is not JSON: {_show(out)}"]
        for path, value in expect.json.items():
            found, actual = _lookup(data, path)
            if not found:
                failures.append(f"JSON field {path!r} is missing")
            elif actual != value or (type(actual) is bool and type(value) is not bool):
                failures.append(
                    f"JSON field {path!r} is {json.dumps(actual, ensure_ascii=False)}, "
                    f"expected {json.dumps(value, ensure_ascii=False)}"
                )
    return failures


async def run_one(service: Any, identity: Identity, tool: ToolSpec, example: Example, index: int) -> Outcome:
    """Call the tool with the example's arguments and judge the result."""
    started = time.perf_counter()

    def outcome(status: Status, message: str = "") -> Outcome:
        return Outcome(tool, example, index, status, message, time.perf_counter() - started)

    try:
        if example.timeout is not None:
            async with asyncio.timeout(example.timeout):
                result = await service.call(identity, tool.key, example.args)
        else:
            result = await service.call(identity, tool.key, example.args)
    except TimeoutError:
        return outcome("failed", f"took longer than the example's timeout of {example.timeout:g}s")
    except ToolrunError as exc:
        wanted = example.expect.error
        if wanted is not None and (re.search(wanted, str(exc)) or re.search(wanted, exc.summary)):
            return outcome("passed")
        if wanted is not None:
            return outcome("failed", f"error {exc.summary!r} does not match /{wanted}/")
        if isinstance(exc, ParamError):
            return outcome("error", exc.summary)
        return outcome("failed", exc.summary)
    failures = judge(example, result)
    return outcome("failed" if failures else "passed", "; ".join(failures))


def selected(tools: Iterable[ToolSpec]) -> Iterator[tuple[ToolSpec, Example, int]]:
    for tool in tools:
        for index, example in enumerate(tool.examples, 1):
            yield tool, example, index


async def run(
    service: Any, identity: Identity, tools: Sequence[ToolSpec], *, run_unsafe: bool = False, jobs: int = 4
) -> AsyncIterator[Outcome]:
    """Run every example of `tools`, up to `jobs` at a time; yields Outcomes in catalog order."""
    limit = asyncio.Semaphore(max(1, jobs))

    async def guarded(tool: ToolSpec, example: Example, index: int) -> Outcome:
        reason = skip_reason(tool, example, run_unsafe)
        if reason is not None:
            return Outcome(tool, example, index, "skipped", reason)
        async with limit:
            return await run_one(service, identity, tool, example, index)

    tasks = [asyncio.ensure_future(guarded(*item)) for item in selected(tools)]
    try:
        for task in tasks:
            yield await task
    finally:
        for task in tasks:
            task.cancel()


# -- reports -------------------------------------------------------------------------------------


def counts(outcomes: Sequence[Outcome]) -> dict[str, int]:
    tally = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for o in outcomes:
        tally[o.status] += 1
    return tally


def summary(outcomes: Sequence[Outcome], seconds: float) -> str:
    """`3 passed, 1 failed, 1 skipped in 0.42s`."""
    tally = counts(outcomes)
    parts = [f"{n} {word}" for word, n in tally.items() if n or word == "passed"]
    return ", ".join(parts) + f" in {seconds:.2f}s"


def text_line(outcome: Outcome) -> str:
    word = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}[outcome.status]
    line = f"{word:5} {outcome.name}"
    if outcome.status != "skipped":
        line += f" ({outcome.seconds:.2f}s)"
    return line + (f": {outcome.message}" if outcome.message else "")


def _where(outcome: Outcome) -> tuple[str, int, int]:
    ex = outcome.example
    if ex.line:
        return outcome.tool.file, ex.line, ex.col
    return outcome.tool.file, outcome.tool.line, outcome.tool.col


def github_lines(outcomes: Sequence[Outcome]) -> list[str]:
    """GitHub Actions annotations: `::error file=…,line=…::…` on the example's line, per failure."""
    from ..formatting import gh_escape

    lines = []
    for o in outcomes:
        if o.status in ("failed", "error"):
            file, line, col = _where(o)
            message = gh_escape(f"{o.name}: {o.message}")
            lines.append(f"::error file={gh_escape(file, True)},line={line},col={col}::{message}")
    return lines


def junit_xml(outcomes: Sequence[Outcome], seconds: float) -> str:
    """A JUnit XML report: one <testsuite> per catalog file, one <testcase> per example."""
    suites: dict[str, list[Outcome]] = {}
    for o in outcomes:
        suites.setdefault(o.tool.file or "catalog", []).append(o)
    tally = counts(outcomes)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="toolrun test" tests="{len(outcomes)}" failures="{tally["failed"]}" '
        f'errors="{tally["error"]}" skipped="{tally["skipped"]}" time="{seconds:.3f}">',
    ]
    for file, items in suites.items():
        t = counts(items)
        out.append(
            f'  <testsuite name={quoteattr(file)} tests="{len(items)}" failures="{t["failed"]}" '
            f'errors="{t["error"]}" skipped="{t["skipped"]}" time="{sum(o.seconds for o in items):.3f}">'
        )
        for o in items:
            _, line, _ = _where(o)
            head = (
                f"    <testcase classname={quoteattr(o.tool.key)} name={quoteattr(o.name)} "
                f'file={quoteattr(file)} line="{line}" time="{o.seconds:.3f}"'
            )
            if o.status == "passed":
                out.append(head + "/>")
                continue
            tag = {"failed": "failure", "error": "error", "skipped": "skipped"}[o.status]
            out += [head + ">", f"      <{tag} message={quoteattr(o.message)}/>", "    </testcase>"]
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    """Characters XML 1.0 cannot hold (control characters, lone surrogates) become U+FFFD."""
    return _XML_BAD.sub("\ufffd", text)


def quoteattr(text: str) -> str:
    return _quoteattr(_xml_text(text))
