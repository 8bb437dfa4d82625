"""Every speed trick toolrun plays, in one table, and the one switch that turns them off.

Each trick stands in for a plain path that does the same job more slowly; the plain path is what
the product would do without it, and a test holds the two together (the `pinned_by` column). With
`TOOLRUN_SPEEDUPS=off` in the environment, every trick is off and toolrun takes the plain paths:
the same answers, bytes, statuses and logs, only slower. Use it to rule a trick out when something
looks wrong, and to measure what a trick still buys (`make test` runs the door tests a second time
this way).

    TOOLRUN_SPEEDUPS=on                       every trick on (the default; also when unset or empty)
    TOOLRUN_SPEEDUPS=off                      every trick off
    TOOLRUN_SPEEDUPS=coalesce,mcp_fast_path   the named tricks off, the others on

The tricks that have no switch, because the plain path would answer and behave the same (a cache that is
always kept right, a pool for another pool), are listed in `ALWAYS_ON` with the reason.

A name that is not in the table stops `toolrun` at start-up with an error that lists the names
(`check`). The value is read once, when this module is imported: the modules that hold a trick copy
their answer into a module-level flag or decide when their object is built, so a hot path tests a
plain boolean.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import UsageError

ENV = "TOOLRUN_SPEEDUPS"


@dataclass(frozen=True, slots=True)
class Speedup:
    """One trick: what it replaces, what it was measured to save, and the test that pins it to the plain path."""

    name: str
    replaces: str
    gain: str
    pinned_by: str


SPEEDUPS: tuple[Speedup, ...] = (
    Speedup(
        "hot_routes",
        "Starlette's router for the rows of the route table served as plain ASGI (POST /tools/{key}, GET /healthz, "
        "GET /tools/{key}, POST /mcp): the dispatcher hands such a request to its row's handler from a dict "
        "lookup (server/dispatch.py); off, the router runs the same handlers, with the same auth modes",
        "app CPU per request, access log on: GET /healthz 120-137 -> 17-26 us, GET /tools/{key} 175-186 -> "
        "34-40 us, with the other changes of that round (bench/README.md, workers and per-request figures)",
        "tests/test_speedups.py::test_the_hot_routes_answer_as_the_router_does",
    ),
    Speedup(
        "mcp_fast_path",
        "the MCP SDK's per-request machinery for a plain tools/call over HTTP (server/mcp/fast.py)",
        "server CPU per /mcp call 1,850 -> 1,200 us (2026-07-28) and 3,175 -> 1,175 us (handshake era) "
        "(bench/README.md, MCP over HTTP; bench/mcp.py)",
        "tests/test_mcp_fast.py (every answer byte-equal to the SDK's)",
    ),
    Speedup(
        "coalesce",
        "uvicorn's two send() calls per answer, head then body (server/protocol.py, CoalescingTransport)",
        "about 20 us of CPU per small answer (server/protocol.py; bench/coalesce.py measures it)",
        "tests/test_protocol_writes.py",
    ),
    Speedup(
        "keepalive_timer",
        "uvicorn's keep-alive timer, created when an answer is complete and cancelled when the next request "
        "arrives: one lazily re-armed timer per connection instead (server/protocol.py, IdleTimerHttpToolsProtocol)",
        "server CPU per GET /healthz and GET /tools/{key} on kept-alive connections: 5-30% more without it "
        "(bench/http_routes.py, issue 22 in bench/README.md; noisy, a loaded 2-core machine)",
        "tests/test_protocol_writes.py::test_deadlines_still_hold_on_a_connection_that_served_requests",
    ),
    Speedup(
        "direct_answer",
        "uvicorn's send() for the answers of the plain handlers (POST /tools/{key}, GET /healthz, GET /tools/{key}): "
        "the whole answer is written in one transport write at once, the bytes uvicorn would write "
        "(server/protocol.py, answer)",
        "about 5 us of CPU per answer: 3.8 us against 7-9 us for the two send() calls and the coalescing flush "
        "(in-process, a real uvicorn RequestResponseCycle; a 2-core shared VM); some 5% of a GET /healthz, 1% of "
        "an exec call",
        "tests/test_protocol_writes.py::test_direct_answers_are_the_bytes_uvicorn_sends",
    ),
    Speedup(
        "direct_exec",
        "/bin/sh -c for a command that is one plain program call: the program is exec'd directly (exec/directexec.py)",
        "about 1-2 ms of CPU per call on a small machine, the shell's start (exec/directexec.py)",
        "tests/test_directexec.py (each command both ways: same output, exit status, environment)",
    ),
    Speedup(
        "exit_first",
        "watching a child's pipes from its start (a loop wake-up for its output, another for the EOFs, another for "
        "its exit): its pipes are read when its exit is seen, and watched only if it is still running after "
        "QUIET_START (exec/executor.py)",
        "4 system calls fewer per call (epoll_ctl 6 -> 2: 28.7k against 32.9k system calls for 1,050 calls at "
        "concurrency 8, strace -c) and 9% fewer loop wake-ups; CPU per call within the noise of the loaded 2-CPU VM "
        "it was measured on (bench/README.md, issue 40)",
        "tests/test_executor.py::test_a_quiet_start_loses_no_output_and_keeps_every_deadline",
    ),
    Speedup(
        "posix_spawn",
        "subprocess.Popen to start a tool's process: glibc's posix_spawn with closefrom (exec/spawn.py)",
        "60-100 us of the server's CPU per call (exec/spawn.py)",
        "tests/test_spawn.py (each probe both ways)",
    ),
    Speedup(
        "pidfd",
        "a worker thread blocked in waitpid per child: the exit is read from a pidfd on the loop (exec/executor.py)",
        "a pidfd child watcher was 1.15-1.3x faster end to end than a thread per child (NOTES, Python 3.11)",
        "tests/test_executor.py::test_without_pidfd_a_worker_thread_waits_for_the_exit",
    ),
    Speedup(
        "threaded_spawn",
        "spawning on the loop during a burst: from 64 running calls on, children start from 4 threads "
        "(exec/executor.py, THREADED_FROM)",
        "200 `sleep 1` at once in one process: p99 1.5-1.8 s -> 1.2-1.3 s (exec/executor.py)",
        "tests/test_executor.py::test_a_burst_spawned_from_threads_gets_the_same_answers",
    ),
    Speedup(
        "plain_render",
        "Jinja for a template of the plain shapes ({{ x }}, {{ x | quote }}): joined without Jinja (exec/render.py)",
        "no compiled template to build or keep: about 0.45 ms per template compiled, 5 KB each kept (NOTES, "
        "bench/README.md)",
        "tests/test_render.py::test_plain_templates_render_without_jinja_exactly_as_jinja_does",
    ),
    Speedup(
        "jail_pool",
        "starting bwrap for each sandboxed call: jails prepared ahead per profile recently called, each used once, "
        "handed the call's words and pipes (exec/sandboxpool.py)",
        "a sandboxed `echo` at concurrency 1 with a 50 ms gap between calls, p50: 28.9 -> 6.6 ms (plain 3.7); back to "
        "back 34.5 -> 16.1 ms; 8 at once: no gain, bounded by a jail's 7-9 ms of CPU (bench/README.md, issue 34)",
        "tests/test_sandbox_pool.py (the sandbox tests pass with it off and on)",
    ),
    Speedup(
        "cli_coercion",
        "Typer's pydantic coercion of the CLI's options (cli/fastcoerce.py)",
        "about 70-120 ms per command, the pydantic import and TypeAdapters (cli/fastcoerce.py)",
        "tests/test_cli.py (run again with the speedups off by `make test`: tests/conftest.py)",
    ),
)
NAMES = tuple(s.name for s in SPEEDUPS)


@dataclass(frozen=True, slots=True)
class AlwaysOn:
    """A trick `TOOLRUN_SPEEDUPS` does not switch: what it does, why it has no switch, and where it lives."""

    name: str
    does: str
    why_always: str
    where: str  # module:attribute (tests/test_speedups.py imports it)


ALWAYS_ON: tuple[AlwaysOn, ...] = (
    AlwaysOn(
        "fn_threads",
        "plain-`def` fn tools run on toolrun's own threads (a queue in, call_soon_threadsafe out) rather than the "
        "loop's default executor: about 30 us less per trivial call",
        "both are a thread pool running the same function; the answer, its errors and timeouts are the same",
        "toolrun.exec.fnthreads:FN_THREADS",
    ),
    AlwaysOn(
        "big_blocks_mapped",
        "a server maps every block of BIG_BLOCK bytes or more on its own (mallopt M_MMAP_THRESHOLD), given back when "
        "freed",
        "a memory bound rather than a speed trick: without it a process keeps the high-water mark of its largest "
        "answers",
        "toolrun.exec.heap:big_blocks_mapped",
    ),
    AlwaysOn(
        "gc_freeze",
        "`toolrun serve` freezes what it loaded before serving (gc.freeze): full collections no longer walk it (100+ "
        "ms pauses at 32 concurrent calls) and forked workers share its pages",
        "it changes when memory is scanned, never what is kept or answered",
        "toolrun.server.run:serve",
    ),
    AlwaysOn(
        "pid_cache",
        "this process's id kept by an at-fork hook instead of a getpid() system call on every request's path",
        "the same number either way; a forked worker sees its own at once",
        "toolrun.exec.pidcache:pid",
    ),
    AlwaysOn(
        "token_memo",
        "an OAuth bearer token that verified is remembered until it expires or the key set changes: about 2 us "
        "instead of 70 (RS256) to 200 (ES256) per request",
        "only a token that verified gets in, and it leaves on expiry and on a new key set (tests/test_oauth.py)",
        "toolrun.access.oauth:TokenVerifier.remembered",
    ),
    AlwaysOn(
        "param_checks",
        "a tool's parameter checks are prepared once per loaded catalog (params.prepare, kept by the service's "
        "catalog state): the declared names, and per param the one function its value goes through, its type's "
        "coercion alone when it declares no constraint: a one-param validation 1.57 -> 0.85 us (the best of six "
        "alternated timeit runs each, a loaded 2-CPU VM; bench/README.md, issue 40)",
        "the same checks in the same order with the same errors (tests/test_service.py compares them), and a reload "
        "brings the new catalog's checks with its state, all at once",
        "toolrun.params:prepare",
    ),
    AlwaysOn(
        "key_memo",
        "an API key that resolved is remembered per key store connection (at most _MEMO_MAX)",
        "every change to the key store, from any connection or process, is seen at the next call, and an expiry "
        "counts without one (tests/test_auth.py)",
        "toolrun.state.sqlite:SQLiteKeyStore.resolve",
    ),
)


def parse(value: str) -> frozenset[str]:
    """The names a `TOOLRUN_SPEEDUPS` value turns off; UsageError naming a name that is not a speedup."""
    text = value.strip()
    if text.lower() in ("", "on"):
        return frozenset()
    if text.lower() == "off":
        return frozenset(NAMES)
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise UsageError(
            f"{ENV}={value!r}: unknown speedup {', '.join(repr(n) for n in unknown)}; "
            f"expected on, off, or a comma list of speedups to turn off: {', '.join(NAMES)}"
        )
    return frozenset(names)


def _from_environ() -> tuple[frozenset[str], UsageError | None]:
    try:
        off = parse(os.environ.get(ENV, ""))
    except UsageError as exc:
        return frozenset(NAMES), exc  # never run half-configured: `check` stops the start
    return off, None


OFF, _PROBLEM = _from_environ()


def on(name: str) -> bool:
    """Whether the speedup `name` is on in this process (read once, at import)."""
    if name not in NAMES:
        raise KeyError(f"{name!r} is not a speedup in toolrun.speedups.SPEEDUPS")
    return name not in OFF


def check() -> None:
    """Raise the UsageError of a `TOOLRUN_SPEEDUPS` value that names an unknown speedup (at start-up)."""
    if _PROBLEM is not None:
        raise _PROBLEM
