# toolrun: the two set-up commands are `make demo` and `make test` (see README.md).
#
#   make demo         install toolrun into .venv and run it on the bundled example catalog
#   make test         install everything the tests need (apt, pip, npm), then lint, type-check and test
#   make ui           rebuild the browser UI (ui/ -> ui-dist/, committed) when its sources changed
#   make bench        performance figures against bare baselines (bench/README.md)
#   make bench-exec   the exec route vs adnanh/webhook and the server CPU per call vs the last release
#   make completions  regenerate completions/ from the Typer app
#   make schema       regenerate schema/catalog.schema.json from the catalog models
#
# Every target is safe to re-run: installs happen only when something is missing or changed.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet
EXAMPLES := examples/

# apt package -> the command that proves it is installed (wrk, webhook, hyperfine and ab are for bench/; gcc for the
# red-team tests in which a sandboxed tool compiles a library)
APT_COMMANDS := redis-server:redis-server chromium:chromium prometheus:promtool wrk:wrk \
	webhook:webhook curl:curl hyperfine:hyperfine nginx:nginx apache2-utils:ab bubblewrap:bwrap gcc:cc

.PHONY: help demo test lint typecheck pytest pytest-plain ui ui-lint bench bench-exec completions schema system-deps python-deps clean

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

# -- installation ---------------------------------------------------------------------------------

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# Re-installed only when pyproject.toml changes (or the venv is new).
$(VENV)/.installed-runtime: pyproject.toml | $(BIN)/python
	$(PIP) install -e .
	@touch $@

# Test-only packages beyond the [test] extra: hatchling lets the wheel test build offline;
# schemathesis drives tests/test_openapi_fuzz.py, playwright tests/test_ui_browser.py (with Debian's
# chromium; never `playwright install`). They belong in the [test] extra of pyproject.toml.
TEST_EXTRAS := hatchling "schemathesis>=4.32" "playwright>=1.65"

$(VENV)/.installed-test: pyproject.toml Makefile | $(BIN)/python
	$(PIP) install -e '.[test]' $(TEST_EXTRAS)
	@touch $@ $(VENV)/.installed-runtime

python-deps: $(VENV)/.installed-test

# System packages for the tests: checked with `command -v` first, so a machine that has them all
# spends no time here; `apt-get update` runs only when something is missing.
system-deps:
	@missing=""; \
	for pair in $(APT_COMMANDS); do \
		pkg=$${pair%%:*}; cmd=$${pair#*:}; \
		if ! command -v "$$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$$cmd" ]; then missing="$$missing $$pkg"; fi; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
		echo "missing system packages:$$missing (install them with apt-get as root)" >&2; exit 1; \
	fi; \
	echo "installing system packages:$$missing"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq; \
	apt-get install -y -qq --no-install-recommends $$missing >/dev/null

# -- the two set-up commands ----------------------------------------------------------------------

demo: $(VENV)/.installed-runtime
	BIN=$(BIN) CATALOG=$(EXAMPLES) bash examples/demo.sh

# Runs every check even when an earlier one fails, so one run shows all problems; the test suite runs last (its
# door tests twice, the second time with the speed tricks off: see `pytest`), its summary closes the output; the
# exit status is non-zero if any check failed. lint, ui-lint and mypy run side by side (each is mostly one
# process on one core), their output shown one check after the other once all three are done.
CHECKS := lint:lint ui-lint:ui-lint typecheck:mypy

test: system-deps python-deps ui
	@failed=""; logs=$$(mktemp -d); \
	for pair in $(CHECKS); do \
		( status=0; $(MAKE) --no-print-directory $${pair%%:*} >"$$logs/$${pair#*:}" 2>&1 || status=$$?; \
		  echo $$status >"$$logs/$${pair#*:}.status" ) & \
	done; \
	wait; \
	for pair in $(CHECKS); do \
		cat "$$logs/$${pair#*:}"; \
		[ "$$(cat "$$logs/$${pair#*:}.status")" = 0 ] || failed="$$failed $${pair#*:}"; \
	done; \
	rm -rf "$$logs"; \
	$(MAKE) --no-print-directory pytest || failed="$$failed pytest"; \
	if [ -n "$$failed" ]; then echo "make test: failed:$$failed" >&2; exit 1; fi

# ruff, then vulture: dead code in src/toolrun ([tool.vulture] in pyproject.toml, vulture_whitelist.py)
lint: python-deps
	@status=0; \
	$(BIN)/ruff check src tests bench completions || status=1; \
	$(BIN)/ruff format --check src tests bench completions || status=1; \
	$(BIN)/vulture || status=1; \
	exit $$status

typecheck: python-deps
	$(BIN)/mypy

# The suite in two parts. First every test not marked `serial`, side by side on pytest-xdist workers, and on one
# more worker the door tests (marked `doors` by tests/conftest.py) a second time with every speed trick off
# (TOOLRUN_SPEEDUPS=off, src/toolrun/speedups.py: the product must answer the same, only slower). A file that
# starts its servers once for all its tests runs on one worker (ONE_WORKER in tests/support/scheduling.py). Then
# the `serial` tests (they time the server under load: they must run alone) one at a time. Both parts run even
# when the first failed.
# One worker more than there are cores: a good part of the end-to-end tests' time is waiting (an approval that
# comes a round later, servers starting, a browser), which a third worker fills. Measured on a loaded 2-core machine,
# the files that used to be serial: 737 s on 2 workers, 539 s on 3 (PYTEST_WORKERS=auto: one per core).
PYTEST_WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))

# The files that hold `serial` tests (tests/test_scheduling.py checks that a mark elsewhere cannot hide from this):
# the serial part collects only these, not the whole suite again (~20 s of one core on a cold cache).
SERIAL_FILES = $(shell grep -l 'mark\.serial' tests/test_*.py)

# Python writes bytecode caches (__pycache__/) here even where PYTHONDONTWRITEBYTECODE is set (some CI images set it):
# the suite starts thousands of Python processes (servers, `toolrun` commands, workers), each of which would
# otherwise compile toolrun and the test modules from source again (~0.25 s of CPU each).
# The parallel part's JUnit report (each test's seconds) is kept in build/: `python tests/support/durations.py
# build/pytest-parallel.xml` refreshes the table the scheduler deals the longest tests first by.
pytest: python-deps
	@unset PYTHONDONTWRITEBYTECODE; status=0; mkdir -p build; \
	$(BIN)/pytest -n $(PYTEST_WORKERS) --speedups-off-doors -m "not serial" --junitxml=build/pytest-parallel.xml \
		|| status=1; \
	$(BIN)/pytest -m serial $(SERIAL_FILES) || status=1; \
	exit $$status

# The door tests alone with every speed trick off, in this process (`make pytest` runs them so on a worker).
pytest-plain: python-deps
	TOOLRUN_SPEEDUPS=off $(BIN)/pytest -q -m doors

# The browser UI: ui/ (an npm project, Node 20) built into ui-dist/. ui-dist/ is committed, so a
# pip-installed toolrun serves /ui without Node.js; the build records the fingerprint of the sources
# it came from (ui-dist/.source-hash), and this target rebuilds only when ui/ no longer matches it
# (no npm needed when it does). Commit ui-dist/ together with the ui/ change (tests/test_ui.py fails
# when they drift apart).
ui:
ifneq ($(wildcard ui/package.json),)
	@if $(PYTHON) ui/source_hash.py --check 2>/dev/null; then exit 0; fi; \
	$(MAKE) --no-print-directory ui/node_modules/.package-lock.json; \
	cd ui && npm run build --silent
endif

# ESLint (typescript-eslint and the React hooks rules) and tsc over the UI sources.
ui-lint: ui/node_modules/.package-lock.json
	cd ui && npm run --silent typecheck && npm run --silent lint

ui/node_modules/.package-lock.json: ui/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm is missing: install Node.js 20 with npm to build the UI" >&2; exit 1; }
	cd ui && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# -- the rest -------------------------------------------------------------------------------------

bench: $(VENV)/.installed-runtime
	$(BIN)/python bench/core.py

# The exec route's guard: exec/webhook req/s at c=1/8/32 and the server's CPU per call beside the last release's
# (bench/exec_cpu.py, under two minutes). Run it before resolving any change to the exec path or the server.
bench-exec: $(VENV)/.installed-runtime
	$(BIN)/python bench/exec_cpu.py

completions: $(VENV)/.installed-runtime
	$(BIN)/python completions/generate.py

# The generator lives with the catalog models (tests/test_schema.py checks the file for drift).
schema: $(VENV)/.installed-runtime
	$(BIN)/python -m toolrun.catalog.schema > schema/catalog.schema.json.tmp
	mv schema/catalog.schema.json.tmp schema/catalog.schema.json

clean:
	rm -rf build dist .pytest_cache .mypy_cache .ruff_cache .hypothesis
