"""ToolService.call end to end: exec and fn tools, scoping, rate limits, the observer, plan, env, sessions."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from support.catalogs import write_catalog
from toolrun import catalog
from toolrun.errors import NotFound, Overloaded, ParamError, RateLimited, ToolFailed
from toolrun.models import CallResult, Identity
from toolrun.service import ToolService
from toolrun.state.memory import MemoryLimiter, MemorySessions

ENVIRON = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": "/nonexistent"}
ADMIN = Identity(username="root", groups=frozenset({"admin"}), anonymous=False)
ANN = Identity(username="ann", groups=frozenset({"team"}), anonymous=False)
BOB = Identity(username="bob", groups=frozenset({"team"}), anonymous=False)
NOBODY = Identity()
# Two operators of the `ops` group, for session values.
CARL = Identity(username="carl", groups=frozenset({"ops"}), anonymous=False)
DORA = Identity(username="dora", groups=frozenset({"ops"}), anonymous=False)

FNS = '''
import asyncio
from toolrun.context import current_identity, get_session, set_session

def add(a: int, b: int = 2) -> int:
    """Add two numbers."""
    return a + b

async def shout(text: str) -> str:
    await asyncio.sleep(0)
    return text.upper() + "!"

def boom(msg: str) -> str:
    raise ValueError(msg)

async def sleepy() -> str:
    await asyncio.sleep(30)
    return "late"

def counter() -> int:
    n = get_session("n", 0) + 1
    set_session("n", n)
    return n

async def acounter() -> int:
    n = get_session("n", 0) + 1
    set_session("n", n)
    return n

def whoami() -> str:
    return current_identity().username
'''

CATALOG = """
version: 1
group: ops
tools:
  - name: echo
    exec: printf '%s' {{ msg | quote }}
    params:
      - {name: msg, type: str}
  - name: fail
    exec: echo out; echo err >&2; exit 4
  - name: slow
    exec: sleep 30
    timeout: 0.3
  - name: json_in
    stdin: true
    exec: cat
    params:
      - {name: n, type: int}
      - {name: tags, type: list, required: false}
  - name: append
    exec: echo x >> {{ log | quote }}
    params:
      - {name: log, type: str}
  - name: pub
    public: true
    exec: echo public
  - name: team
    groups: [team]
    exec: echo team
  - name: secret
    group: vault
    exec: echo secret
  - name: add
    fn: MOD:add
  - name: shout
    fn: MOD:shout
  - name: boom
    fn: MOD:boom
  - name: sleepy
    fn: MOD:sleepy
    timeout: 0.2
  - name: counter
    fn: MOD:counter
  - name: acounter
    fn: MOD:acounter
  - name: whoami
    fn: MOD:whoami
"""


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, float]] = []

    def observe(self, key: str, outcome: str, seconds: float) -> None:
        self.seen.append((key, outcome, seconds))


def make_service(
    tmp_path: Path, text: str = CATALOG, environ: dict[str, str] | None = None, **kwargs: Any
) -> ToolService:
    module = f"toolrun_test_fns_{uuid.uuid4().hex}"  # a fresh module: sys.modules caches by name
    (tmp_path / f"{module}.py").write_text(FNS, encoding="utf-8")
    path = write_catalog(tmp_path, text.replace("MOD:", f"{module}:"))
    environ = ENVIRON if environ is None else environ
    return ToolService(catalog.load([path], environ), environ=environ, **kwargs)


@pytest.fixture
def service(tmp_path: Path) -> ToolService:
    return make_service(tmp_path)


def call(service: ToolService, key: str, args: dict[str, Any] | None = None, who: Identity = ADMIN, **kw: Any) -> Any:
    return asyncio.run(service.call(who, key, args, **kw)).value


def call_result(service: ToolService, key: str, args: dict[str, Any] | None = None) -> CallResult:
    return asyncio.run(service.call(ADMIN, key, args))


# -- exec ----------------------------------------------------------------------------------------


def test_an_exec_tool_returns_its_stdout_on_success(service: ToolService) -> None:
    result = call_result(service, "ops.echo", {"msg": "a 'b' $c"})

    assert result.value == "a 'b' $c"
    assert result.ok
    assert result.exec is not None and result.exec.returncode == 0


def test_an_exec_tool_returns_the_tuple_on_a_non_zero_exit(service: ToolService) -> None:
    result = call_result(service, "ops.fail")

    assert result.value == (4, "out\n", "err\n")
    assert not result.ok


def test_an_exec_tool_past_its_timeout_returns_the_minus_one_tuple(service: ToolService) -> None:
    assert call(service, "ops.slow") == (-1, "", "timeout after 0.3s")


def test_a_stdin_tool_receives_the_validated_params_as_one_json_object(service: ToolService) -> None:
    # `tags` (optional, no default) was not provided: it is left out of the JSON, not sent as null
    assert json.loads(call(service, "ops.json_in", {"n": "3"})) == {"n": 3}


def test_invalid_params_raise_before_anything_runs(service: ToolService, tmp_path: Path) -> None:
    with pytest.raises(ParamError, match="unknown parameter 'lgo'"):
        call(service, "ops.append", {"lgo": str(tmp_path / "log")})
    assert not (tmp_path / "log").exists()


def test_a_missing_working_directory_is_a_tool_failure(tmp_path: Path) -> None:
    service = make_service(tmp_path, "version: 1\ngroup: ops\ntools:\n  - {name: here, exec: pwd, cwd: missing}\n")

    with pytest.raises(ToolFailed):
        call(service, "ops.here")


# -- fn ------------------------------------------------------------------------------------------


def test_a_sync_fn_tool_returns_its_value(service: ToolService) -> None:
    assert call(service, "ops.add", {"a": "40"}) == 42
    assert call(service, "ops.add", {"a": 1, "b": 1}) == 2


def test_an_async_fn_tool_returns_its_value(service: ToolService) -> None:
    assert call(service, "ops.shout", {"text": "hi"}) == "HI!"


def test_a_fn_that_raises_is_a_tool_failure_summarised_as_type_and_message(service: ToolService) -> None:
    with pytest.raises(ToolFailed) as caught:
        call(service, "ops.boom", {"msg": "bad things"})

    assert caught.value.summary == "ValueError: bad things"


def test_a_fn_past_its_timeout_is_a_tool_failure(service: ToolService) -> None:
    with pytest.raises(ToolFailed) as caught:
        call(service, "ops.sleepy")

    assert caught.value.summary == "TimeoutError: timeout after 0.2s"


def test_a_fn_sees_the_calling_identity(service: ToolService) -> None:
    assert call(service, "ops.whoami", who=ADMIN) == "root"


# -- lookup and scoping --------------------------------------------------------------------------


def test_an_unknown_key_is_not_found_with_did_you_mean_suggestions(service: ToolService) -> None:
    with pytest.raises(NotFound) as caught:
        call(service, "ops.ecoh")

    assert "ops.echo" in caught.value.suggestions
    assert "did you mean ops.echo" in str(caught.value)


def test_groups_decide_what_a_caller_may_call(service: ToolService) -> None:
    assert call(service, "ops.pub", who=NOBODY) == "public\n"
    assert call(service, "ops.team", who=ANN) == "team\n"
    assert call(service, "vault.secret", who=ADMIN) == "secret\n"
    with pytest.raises(NotFound):
        call(service, "vault.secret", who=ANN)
    with pytest.raises(NotFound):
        call(service, "ops.team", who=NOBODY)


def test_listing_shows_each_caller_only_what_it_may_call(service: ToolService) -> None:
    assert [t.key for t in service.list(NOBODY)] == ["ops.pub"]
    assert [t.key for t in service.list(ANN)] == ["ops.pub", "ops.team"]
    assert "vault.secret" in [t.key for t in service.list(ADMIN)]


def test_a_hidden_tool_raises_the_same_not_found_as_an_unknown_one(service: ToolService) -> None:
    without = ToolService(
        catalog.Catalog(tools={k: v for k, v in service.catalog.tools.items() if k != "vault.secret"}), environ=ENVIRON
    )
    with pytest.raises(NotFound) as hidden:
        call(service, "vault.secret", who=ANN)
    with pytest.raises(NotFound) as unknown:
        call(without, "vault.secret", who=ANN)

    assert type(hidden.value) is type(unknown.value)
    assert (str(hidden.value), hidden.value.suggestions) == (str(unknown.value), unknown.value.suggestions)


def test_suggestions_never_name_a_hidden_tool(service: ToolService) -> None:
    with pytest.raises(NotFound) as caught:
        call(service, "vault.secrets", who=ANN)

    assert caught.value.suggestions == []
    assert "did you mean" not in str(caught.value)


# -- rate limits, concurrency and the observer ----------------------------------------------------


def test_the_rate_limiter_refuses_a_call_past_the_limit_without_running_it(tmp_path: Path) -> None:
    service = make_service(tmp_path, limiter=MemoryLimiter(calls=2, window=60, clock=lambda: 1000.0))
    log = tmp_path / "log"

    call(service, "ops.append", {"log": str(log)})
    call(service, "ops.append", {"log": str(log)})
    with pytest.raises(RateLimited) as caught:
        call(service, "ops.append", {"log": str(log)})

    assert caught.value.retry_after == 20  # the fixed window [960, 1020) ends 20 s after t=1000
    assert "20" in str(caught.value)
    assert log.read_text() == "x\nx\n"


def test_rate_limit_buckets_are_per_caller_and_per_tool(tmp_path: Path) -> None:
    service = make_service(tmp_path, limiter=MemoryLimiter(calls=1, window=60, clock=lambda: 1000.0))

    call(service, "ops.team", who=ANN)
    with pytest.raises(RateLimited):
        call(service, "ops.team", who=ANN)
    assert call(service, "ops.team", who=BOB) == "team\n"
    assert call(service, "ops.pub", who=ANN) == "public\n"


def test_calls_past_max_concurrent_are_refused_as_overloaded(tmp_path: Path) -> None:
    service = make_service(tmp_path, max_concurrent=1)

    async def two_at_once() -> tuple[CallResult | BaseException, CallResult | BaseException]:
        return await asyncio.gather(
            service.call(ADMIN, "ops.slow"), service.call(ADMIN, "ops.pub"), return_exceptions=True
        )

    slow, refused = asyncio.run(two_at_once())
    assert isinstance(slow, CallResult) and slow.value == (-1, "", "timeout after 0.3s")
    assert isinstance(refused, Overloaded)


def test_the_observer_sees_each_call_exactly_once_with_its_outcome(tmp_path: Path) -> None:
    recorder = Recorder()
    service = make_service(tmp_path, observer=recorder, limiter=MemoryLimiter(calls=1, window=60, clock=lambda: 1000.0))

    call(service, "ops.echo", {"msg": "x"})
    call(service, "ops.fail")
    call(service, "ops.slow")
    call(service, "ops.add", {"a": 1})
    for key, args, error in [
        ("ops.add", {"a": 1}, RateLimited),  # second call to the same tool
        ("ops.boom", {"msg": 1}, ToolFailed),
        ("ops.shout", {}, ParamError),
        ("ops.nothing", {}, NotFound),  # unknown keys are not metrics labels
    ]:
        with pytest.raises(error):
            call(service, key, args)

    assert [(key, outcome) for key, outcome, _ in recorder.seen] == [
        ("ops.echo", "ok"),
        ("ops.fail", "error"),
        ("ops.slow", "timeout"),
        ("ops.add", "ok"),
        ("ops.add", "rate_limited"),
        ("ops.boom", "exception"),
        ("ops.shout", "invalid"),
    ]
    assert all(seconds >= 0 for _, _, seconds in recorder.seen)
    assert recorder.seen[2][2] >= 0.3


# -- plan (dry run) ------------------------------------------------------------------------------


def test_plan_shows_the_command_and_runs_nothing(service: ToolService, tmp_path: Path) -> None:
    log = tmp_path / "planned log"

    plan = service.plan(ADMIN, "ops.append", {"log": str(log)})

    assert plan["command"] == f"echo x >> '{log}'"
    assert plan["kind"] == "exec"
    assert not log.exists()


def test_plan_of_a_stdin_tool_shows_the_json_it_would_send(service: ToolService) -> None:
    plan = service.plan(ADMIN, "ops.json_in", {"n": 5, "tags": ["a"]})

    assert json.loads(plan["stdin"]) == {"n": 5, "tags": ["a"]}


def test_plan_validates_and_scopes_like_a_call(service: ToolService) -> None:
    with pytest.raises(ParamError):
        service.plan(ADMIN, "ops.json_in", {"n": "many"})
    with pytest.raises(NotFound):
        service.plan(NOBODY, "ops.echo", {"msg": "x"})


# -- environment ---------------------------------------------------------------------------------

ENV_CATALOG = """
version: 1
group: ops
tools:
  - name: env
    exec: env
  - name: env_rich
    exec: env
    env: {STATIC: static value, EXACT_ONE: overridden}
    env_file: vars.env
    env_passthrough: [EXACT_ONE, EXACT_TWO, APP_*]
"""


def env_of(output: Any) -> dict[str, str]:
    return dict(line.split("=", 1) for line in str(output).splitlines() if "=" in line)


def test_server_variables_are_not_visible_to_a_tool_by_default(tmp_path: Path) -> None:
    (tmp_path / "vars.env").write_text("", encoding="utf-8")
    environ = {**ENVIRON, "SECRET_TOKEN": "s3cret", "APP_KEY": "k"}
    service = make_service(tmp_path, ENV_CATALOG, environ=environ)

    env = env_of(call(service, "ops.env"))
    assert "SECRET_TOKEN" not in env and "APP_KEY" not in env
    assert env["PATH"] == ENVIRON["PATH"] and env["HOME"] == "/nonexistent"


def test_the_real_process_environment_does_not_leak_either(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    path = write_catalog(tmp_path, ENV_CATALOG.split("  - name: env_rich")[0])
    service = ToolService(catalog.load([path]))  # environ defaults to os.environ

    assert "SECRET_TOKEN" not in env_of(call(service, "ops.env"))


def test_env_env_file_and_passthrough_are_what_a_tool_sees(tmp_path: Path) -> None:
    (tmp_path / "vars.env").write_text('# comment\nexport FROM_FILE="x y"\nPLAIN=1\n', encoding="utf-8")
    environ = {**ENVIRON, "EXACT_ONE": "server", "EXACT_TWO": "two", "APP_A": "a", "APP_B": "b", "OTHER": "o"}
    service = make_service(tmp_path, ENV_CATALOG, environ=environ)

    env = env_of(call(service, "ops.env_rich"))
    assert env["STATIC"] == "static value"
    assert env["FROM_FILE"] == "x y" and env["PLAIN"] == "1"
    assert env["EXACT_TWO"] == "two"
    assert env["EXACT_ONE"] == "overridden"  # the tool's own env wins over passthrough
    assert (env["APP_A"], env["APP_B"]) == ("a", "b")
    assert "OTHER" not in env


def test_a_tool_gets_a_default_path_when_the_server_has_none(tmp_path: Path) -> None:
    (tmp_path / "vars.env").write_text("", encoding="utf-8")
    service = make_service(tmp_path, ENV_CATALOG, environ={})

    assert env_of(call(service, "ops.env"))["PATH"] == catalog.DEFAULT_PATH


def test_plan_lists_environment_names_never_values(tmp_path: Path) -> None:
    environ = {**ENVIRON, "EXACT_TWO": "two-secret-value"}
    (tmp_path / "vars.env").write_text("PLAIN=1\n", encoding="utf-8")
    service = make_service(tmp_path, ENV_CATALOG, environ=environ)

    plan = service.plan(ADMIN, "ops.env_rich", {})
    assert "EXACT_TWO" in plan["env"]
    assert "two-secret-value" not in json.dumps(plan)


# -- session values ------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["ops.counter", "ops.acounter"])
def test_session_values_persist_per_identity_and_session_id(tmp_path: Path, key: str) -> None:
    service = make_service(tmp_path, sessions=MemorySessions())

    assert [call(service, key, who=CARL, session_id="s1") for _ in range(3)] == [1, 2, 3]
    assert call(service, key, who=DORA, session_id="s1") == 1  # same session id, other identity
    assert call(service, key, who=CARL, session_id="s2") == 1
    assert call(service, key, who=CARL, session_id="s1") == 4


@pytest.mark.parametrize("key", ["ops.counter", "ops.acounter"])
def test_without_a_session_id_values_are_not_persisted(tmp_path: Path, key: str) -> None:
    service = make_service(tmp_path, sessions=MemorySessions())

    assert [call(service, key, who=CARL) for _ in range(2)] == [1, 1]
    assert call(service, key, who=CARL, session_id="s1") == 1  # nothing leaked into a real session


def test_without_a_session_store_values_are_not_persisted(service: ToolService) -> None:
    assert [call(service, "ops.counter", who=CARL, session_id="s1") for _ in range(2)] == [1, 1]


def test_a_call_beyond_the_concurrency_cap_waits_for_a_slot_then_runs(tmp_path: Path) -> None:
    loaded = catalog.load(
        [write_catalog(tmp_path, "group: t\ntools:\n  - name: nap\n    exec: sleep 0.3; echo done\n")]
    )
    service = ToolService(loaded, max_concurrent=1, queue_timeout=5.0)

    async def both() -> list[Any]:
        return await asyncio.gather(
            service.call(Identity.operator(), "t.nap"), service.call(Identity.operator(), "t.nap")
        )

    assert [r.value for r in asyncio.run(both())] == ["done\n", "done\n"]


def test_a_call_that_cannot_get_a_slot_in_time_is_overloaded(tmp_path: Path) -> None:
    loaded = catalog.load([write_catalog(tmp_path, "group: t\ntools:\n  - name: nap\n    exec: sleep 1; echo done\n")])
    service = ToolService(loaded, max_concurrent=1, queue_timeout=0.1)

    async def both() -> list[Any]:
        return await asyncio.gather(
            service.call(Identity.operator(), "t.nap"),
            service.call(Identity.operator(), "t.nap"),
            return_exceptions=True,
        )

    first, second = asyncio.run(both())
    assert first.value == "done\n"
    assert isinstance(second, Overloaded)


def test_an_inline_fn_runs_on_the_event_loop_thread_and_a_plain_one_in_a_worker(tmp_path: Path) -> None:
    (tmp_path / "where_fns.py").write_text(
        "import threading\n\ndef where() -> str:\n    return threading.current_thread().name\n", encoding="utf-8"
    )
    text = (
        "group: t\ntools:\n"
        "  - name: inline\n    fn: where_fns:where\n    inline: true\n"
        "  - name: thread\n    fn: where_fns:where\n"
    )
    service = ToolService(catalog.load([write_catalog(tmp_path, text)]))

    async def both() -> tuple[Any, Any]:
        inline = await service.call(Identity.operator(), "t.inline")
        thread = await service.call(Identity.operator(), "t.thread")
        return inline.value, thread.value

    inline, thread = asyncio.run(both())
    assert inline == "MainThread"
    assert thread != "MainThread"


def test_plain_functions_share_at_most_max_workers_threads_and_run_side_by_side() -> None:
    from toolrun.exec import fnthreads

    workers = fnthreads.FnThreads(3)
    threads: set[int] = set()

    def job(i: int) -> int:
        threads.add(threading.get_ident())
        time.sleep(0.1)
        return i

    def boom() -> None:
        raise ValueError("bad input")

    async def main() -> tuple[list[int], float]:
        loop = asyncio.get_running_loop()
        started = time.monotonic()
        results = await asyncio.gather(*(workers.run(loop, job, i) for i in range(12)))
        took = time.monotonic() - started
        with pytest.raises(ValueError, match="bad input"):
            await workers.run(loop, boom)
        return list(results), took

    results, took = asyncio.run(main())
    assert results == list(range(12))
    assert len(threads) == 3  # never more than max_workers, and all of them used
    assert took < 1.0  # 12 x 0.1 s one at a time would be 1.2 s; 3 side by side take about 0.4 s


def test_a_function_calling_sys_exit_fails_its_call_whichever_way_it_runs(tmp_path: Path) -> None:
    (tmp_path / "exit_fns.py").write_text(
        "import sys\n\ndef leave() -> str:\n    sys.exit(3)\n\nasync def aleave() -> str:\n    sys.exit(4)\n",
        encoding="utf-8",
    )
    text = (
        "group: t\ntools:\n"
        "  - name: thread\n    fn: exit_fns:leave\n"
        "  - name: inline\n    fn: exit_fns:leave\n    inline: true\n"
        "  - name: async\n    fn: exit_fns:aleave\n"
    )
    service = ToolService(catalog.load([write_catalog(tmp_path, text)]))

    async def all_three() -> list[Any]:
        return [await _failure(service, key) for key in ("t.thread", "t.inline", "t.async")]

    assert asyncio.run(all_three()) == ["SystemExit: 3", "SystemExit: 3", "SystemExit: 4"]


async def _failure(service: ToolService, key: str) -> str:
    with pytest.raises(ToolFailed) as caught:
        await service.call(Identity.operator(), key)
    return caught.value.summary


def test_a_plain_function_whose_call_timed_out_while_queued_never_runs() -> None:
    """A call that gave up waiting for a worker must not run later (its side effects would surprise everyone)."""
    from toolrun.exec import fnthreads

    workers = fnthreads.FnThreads(1)
    ran: list[str] = []

    def slow() -> None:
        time.sleep(0.3)
        ran.append("slow")

    def side_effect() -> None:
        ran.append("side effect")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = workers.run(loop, slow)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(workers.run(loop, side_effect), 0.05)
        await first
        await workers.run(loop, lambda: None)  # the queue has been worked through

    asyncio.run(main())
    assert ran == ["slow"]


def test_start_or_call_decides_for_every_door_whether_a_call_becomes_a_job(tmp_path: Path) -> None:
    """The job choice is the core's: approval always makes a job; `async: true` or a caller's request makes one
    where the door can answer with a running job (HTTP), and runs to its end where it cannot (MCP)."""
    from toolrun.service import JobStarted

    path = write_catalog(
        tmp_path,
        "group: j\ntools:\n"
        "  - {name: plain, public: true, exec: printf plain}\n"
        "  - {name: gated, public: true, approval: required, exec: printf gated}\n"
        "  - {name: later, public: true, async: true, exec: printf later}\n",
    )
    service = ToolService(catalog.load([str(path)], ENVIRON), environ=ENVIRON)

    def outcome(key: str, **kw: Any) -> Any:
        return asyncio.run(service.start_or_call(ANN, key, {}, **kw))

    assert outcome("j.plain").value == "plain"
    for kw in ({}, {"background": False}):
        gated = outcome("j.gated", **kw)
        assert isinstance(gated, JobStarted) and (gated.state, gated.asked) == ("awaiting_approval", False), kw
    later = outcome("j.later")
    assert isinstance(later, JobStarted) and later.state == "running"
    assert outcome("j.later", background=False).value == "later"  # MCP: runs to its end
    asked = outcome("j.plain", prefer_async=True)
    assert isinstance(asked, JobStarted) and (asked.state, asked.asked) == ("running", True)
    assert outcome("j.plain", prefer_async=True, background=False).value == "plain"
    seen: list[str] = []

    async def watch(call: Any) -> CallResult:
        seen.append("watched")
        result: CallResult = await call
        return result

    assert outcome("j.plain", watch=watch).value == "plain" and seen == ["watched"]
    with pytest.raises(NotFound):
        outcome("j.nothing")


def test_a_reload_brings_the_new_parameter_checks_with_the_new_catalog(tmp_path: Path) -> None:
    """The checks prepared per loaded catalog (params.prepare, kept by the catalog's state) never outlive it."""
    service = make_service(tmp_path)
    assert asyncio.run(service.call(ADMIN, "ops.echo", {"msg": "hi"})).value == "hi"  # its checks are now kept
    old = service.registry.get(ADMIN, "ops.echo")
    tightened = CATALOG[: CATALOG.index("  - name: fail")].replace("type: str}", "type: str, enum: [up, down]}")
    service.swap(catalog.load([write_catalog(tmp_path, tightened)], ENVIRON))
    with pytest.raises(ParamError, match="must be one of 'up', 'down'"):
        asyncio.run(service.call(ADMIN, "ops.echo", {"msg": "hi"}))
    assert asyncio.run(service.call(ADMIN, "ops.echo", {"msg": "up"})).value == "up"
    # A tool of the catalog before (a job admitted then) is checked as that catalog declared it.
    assert asyncio.run(service.admit(ADMIN, old, {"msg": "hi"})) == {"msg": "hi"}
    with pytest.raises(ParamError, match="must be one of"):
        asyncio.run(service.admit(ADMIN, service.registry.get(ADMIN, "ops.echo"), {"msg": "hi"}))


def test_prepared_checks_answer_as_checks_made_at_the_call(tmp_path: Path) -> None:
    from toolrun import params

    text = """
version: 1
group: g
tools:
  - name: t
    exec: echo {{ a | quote }}
    params:
      - {name: a, type: str}
      - {name: n, type: int, required: false, min: 2, max: 5}
      - {name: c, type: str, required: false, enum: [x, y]}
      - {name: p, type: str, required: false, pattern: "[a-z]+"}
      - {name: s, type: str, required: false, secret: true, pattern: "[0-9]+"}
      - {name: l, type: list, required: false, default: [1]}
      - {name: f, type: float, required: false, default: 1.5}
"""
    tool = catalog.load([write_catalog(tmp_path, text)], ENVIRON).tools["g.t"]
    prepared = params.prepare(tool)
    cases: list[dict[str, Any]] = [
        {"a": "x"},
        {"a": 3},
        {},
        {"a": "x", "zz": 1},
        {"a": "x", "n": 9},
        {"a": "x", "n": "3"},
        {"a": "x", "c": "z"},
        {"a": "x", "p": "A1"},
        {"a": "x", "s": "abc"},
        {"a": "x", "s": "123", "l": ["a"], "f": 2},
        {"a": None},
    ]
    for args in cases:
        try:
            expected: Any = params.validate(tool, args)
        except ParamError as exc:
            expected = ("error", str(exc))
        try:
            got: Any = params.validate(tool, args, prepared)
        except ParamError as exc:
            got = ("error", str(exc))
        assert got == expected, args
    assert params.validate(tool, {"a": "x"}, prepared)["l"] is not params.validate(tool, {"a": "x"}, prepared)["l"]
