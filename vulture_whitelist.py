"""What vulture (the dead-code check of `make lint`, [tool.vulture] in pyproject.toml) cannot see used.

Each name is used by something vulture does not read: a framework that calls it, a user's fn tool, a foreign
object whose attribute is set, a test. Typer's commands are left out by the `ignore_decorators` setting. A name
that is truly dead is deleted, not listed here.
"""

# ruff: noqa
# mypy: ignore-errors
_ = object()

# pydantic models of the catalog schema (catalog/schema.py): fields and settings pydantic reads
model_config
title
idempotent
open_world
schema_

# the API of fn tools (context.py): called from the users' Python modules
current_identity
get_session
set_session
session_available

# attributes set on objects of the standard library or a dependency, which read them
_.whitespace_split  # shlex.shlex (complete.py)
_.commenters
_.log_errors  # re2.Options (params.py)
_.maxstring  # reprlib.Repr (paramtypes.py)
_.maxother
_.waiting_for_100_continue  # uvicorn's RequestResponseCycle (server/protocol.py, answer)
_.maxlevel
_.intra_op_num_threads  # onnxruntime.SessionOptions (search/embedder.py)
_.inter_op_num_threads
_.enable_cpu_mem_arena
_._srcfile  # logging (server/accesslog.py)
_.logMultiprocessing
_.logProcesses
_.logThreads
_.asctime  # logging.Formatter (telemetry/logs.py)
_.ValueClass  # prometheus_client (telemetry/metrics.py)

# route handlers, named by the route table (server/app.py, server/jobroutes.py)
_.readyz
_.admin_reload
_.protected_resource
_.openapi
_.list_jobs
_.get_job
_.approve_job
_.deny_job
_.cancel_job
_.job_events
_.hold_job
_.withdraw_job

# overrides of asyncio's and uvicorn's internals, called by them (server/loop.py, server/protocol.py)
ServerLoop  # uvicorn.Config(loop="toolrun.server.loop:ServerLoop")
_._accept_connection
_.writelines
_.disconnected
_._unsupported_upgrade_warning
_._unset_keepalive_if_required
_.on_response_complete
_.total_requests

# a Starlette path convertor (server/request.py)
regex
_.convert
_.to_string

# read by tests only: the outcome labels of svc_tool_calls_total (tests/test_metrics.py), the key set's fetch
# count (tests/test_oauth.py)
OUTCOMES
_.fetches

# the app as `toolrun serve` builds it, for the in-process tests (tests/support/app.py; server/run.py)
build_app

# the speedups tables' columns, read by tests/test_speedups.py and the docs (speedups.py)
replaces
gain
pinned_by
does
why_always
where
ALWAYS_ON  # the tricks with no switch: a table for readers, checked by tests/test_speedups.py

# used by the search evaluation (bench/search_eval.py times each query embedded anew), not by the product
forget_queries

# the jail pool's introspection, used by tests/test_sandbox_pool.py (a test's clean start, the jails waiting per profile)
close_all
prepared
