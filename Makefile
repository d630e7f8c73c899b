# The two commands of the README: `make demo` and `make test`.
PY := .venv/bin/python
export PREFECT_SERVER_ANALYTICS_ENABLED := false
export PREFECT_HOME ?= $(CURDIR)/.folio/prefect
CORPUS ?= $(abspath ../shared/corpus)
export FOLIO_CORPUS_DIR ?= $(CORPUS)

.PHONY: setup demo test test-fast bench

setup:
	@bash scripts/setup.sh

# Sets everything up and ingests the built-in sample PDFs through the real Prefect flow.
demo: setup
	@mkdir -p $(PREFECT_HOME)
	$(PY) -m folio_prefect.flows.demo

# Bytecode for the test runs: the suite starts some 200 Python processes (CLI runs, flow
# runs, servers, workers, page workers), each importing ~2000 modules, and without
# bytecode each compiles them all from source again (13.8 CPU-s against 5.6-5.9 for the
# imports of one flow process here), on two cores that the suite keeps busy. The venv's
# bytecode is compiled at setup (scripts/setup.sh, --compile-bytecode) and read as it is;
# PYTHONDONTWRITEBYTECODE=1 (set on the development machine and in many container images)
# is lifted so that folio's own modules are compiled once, into the source tree's
# __pycache__ folders (git-ignored). A PYTHONPYCACHEPREFIX, used before, hid the venv's
# bytecode: a fresh clone compiled every module again into an empty folder, several
# processes at once at the suite's start (a fresh clone's `make test` took 933 CPU-s
# without it, 940 and 961 with it; a set-up checkout's 825 and 827, the same).
test test-fast: export PYTHONDONTWRITEBYTECODE :=

# Sets everything up and runs the whole test suite. Three test processes on two cores: many
# tests wait on servers and subprocesses, and a third overlaps those waits (11.5 against 15
# minutes for the suite here).
test:
	@bash scripts/setup.sh --test
	@mkdir -p $(PREFECT_HOME)
	.venv/bin/ruff check folio folio_prefect bench tests
	.venv/bin/mypy
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder

# The edit-run loop: the tests that start no server and read no corpus (marked in
# tests/conftest.py: `stack`) and are not marked slow; `make test` runs them all.
test-fast:
	@bash scripts/setup.sh --test
	@mkdir -p $(PREFECT_HOME)
	$(PY) -m pytest -q -n 3 -m "not slow and not stack" --durations=10

bench: setup
	$(PY) bench/cpu_prep.py
	$(PY) bench/memory.py
