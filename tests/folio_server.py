"""folio's local Prefect server (folio_prefect/deployments/local_server.py) for the CLI
runs of the whole test session, as a user's ``folio ingest`` runs attach to theirs.

Why not Prefect's temporary server per CLI run (``FOLIO_PREFECT_SERVER=ephemeral``, the
suite's choice before): each run started one, 10 s on an idle 2-core machine and over a
minute on a loaded one, before its first page. One server for the session is started
once; every CLI run attaches to it in a second, through the same code a user's runs take.

Isolation: the server lives in a home of the session's own (``FOLIO_PREFECT_HOME``, a
temporary folder the controlling pytest process makes, which its xdist workers inherit),
never the user's ``~/.folio/prefect``. It is stopped, and its home removed, when the
session ends (:func:`pytest_sessionfinish`, in the controlling process only: workers end
at different times). Each worker that uses it holds a lease for its own pid, so the
server does not idle out between CLI tests, and a session that is killed leaves a server
that stops itself :data:`IDLE_S` after the last worker is gone. Tests of the server's
own start and stop (tests/test_local_server.py) and tests that look into the database a
run used give their CLI runs a home or a server of their own.

Use from conftest.py::

    pytest_plugins = ["tests.folio_server"]
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from folio.process_files import flocked, pid_alive
from folio_prefect.deployments import local_server
from tests.prefect_db_template import copy_migrated_db
from tests.process_guard import guard_folio_home

__all__ = ["folio_prefect_server", "session_home"]

#: a leftover server (the session was killed) stops this long after its last lease
IDLE_S = 300.0
#: the supervisor stops Prefect's server (SIGTERM, SIGKILL after 20 s) and exits
STOP_WAIT_S = 60.0


def session_home() -> Path:
    """The session's local-server home (set by :func:`pytest_configure`)."""
    return Path(os.environ[local_server.HOME_ENV])


def pytest_configure(config: pytest.Config) -> None:
    """The controlling process makes the session's home before xdist starts its workers,
    which inherit the environment; a worker keeps the one it inherited."""
    if hasattr(config, "workerinput"):
        return
    os.environ[local_server.HOME_ENV] = tempfile.mkdtemp(prefix="folio-test-prefect-")
    os.environ[local_server.IDLE_ENV] = str(IDLE_S)
    # a session stopped before its end (SIGTERM, a timeout's SIGKILL) stops it at once,
    # not IDLE_S later (tests/process_guard.py)
    guard_folio_home(session_home())


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The controlling process, after every worker is done: stop the session's server,
    wait until it is gone, remove its home."""
    if hasattr(session.config, "workerinput"):
        return
    home = Path(os.environ.get(local_server.HOME_ENV, ""))
    if not home.name.startswith("folio-test-prefect-"):
        return  # not ours (pytest_configure did not run)
    stop_server(home)
    shutil.rmtree(home, ignore_errors=True)


def stop_server(home: Path) -> None:
    """Stop the server of ``home`` if one runs, and wait until its supervisor (which stops
    Prefect's own server first) has exited; if it has not within :data:`STOP_WAIT_S`, it
    and Prefect's server (its child, in a process group of its own) are killed."""
    try:
        state = json.loads((home / "server.json").read_text())
    except (OSError, ValueError):
        return  # none was started (or it has stopped)
    pid, start = state.get("supervisor_pid"), state.get("supervisor_start")
    if not isinstance(pid, int) or not local_server.stop(home):
        return
    deadline = time.monotonic() + STOP_WAIT_S
    while pid_alive(pid, start if isinstance(start, int) else None):
        if time.monotonic() > deadline:
            print(f"folio tests: the session's Prefect server (supervisor {pid}) did not stop "
                  f"within {STOP_WAIT_S:.0f} s: killed", file=sys.stderr)
            for child in _children(pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(child, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.2)


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.fixture(scope="session")
def folio_prefect_server() -> Iterator[str]:
    """The session's server, started by the first worker that needs it and attached to by
    the others (its lock makes that one start); yields its API URL. Started here, not by
    the first CLI run: a run that starts it says so on stderr, and the CLI's error tests
    count stderr's lines."""
    home = session_home()
    # a migrated database (tests/prefect_db_template.py), copied under the server's own lock
    # so no worker copies over the file a started server has open
    with flocked(home / "server.lock"):
        if not (home / "server.json").exists():
            copy_migrated_db(home / "prefect.db")
    url, _ = local_server.attach(home, idle_s=IDLE_S)
    try:
        yield url
    finally:
        local_server.release(home)
