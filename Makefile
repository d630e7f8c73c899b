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

# Python's bytecode for the test runs, kept in .folio/pycache: the suite starts some 200
# Python processes (CLI runs, flow runs, servers, workers, page workers), each importing
# ~2000 modules, and with PYTHONDONTWRITEBYTECODE=1 (set on the development machine and in
# many container images) and a venv holding no bytecode each compiled them all from source
# again: half the CPU of a one-page CLI ingest (12.6 s, 6.5 s with bytecode), and the suite
# is CPU-bound on two cores. Here bytecode is written once and read by every later
# process, in a folder of its own: nothing is written into the venv or the source tree.
test test-fast: export PYTHONPYCACHEPREFIX := $(CURDIR)/.folio/pycache
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
