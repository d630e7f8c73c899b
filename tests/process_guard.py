"""Nothing the suite starts outlives it: not when ``make test`` ends, and not when it is
stopped (SIGTERM, SIGINT, a timeout's SIGKILL).

The servers and workers the fixtures start run in sessions of their own (so that a
stack stops as a whole, and a terminal's Ctrl-C reaches pytest first), which is also why
a signal to the suite's process group never reached them: a suite stopped by ``timeout``
left its Prefect server, a worker and the local Prefect server running. Three layers:

1. SIGTERM and SIGHUP in a test process raise KeyboardInterrupt, as SIGINT does: pytest
   then tears the session's fixtures down (each stops what it started) and reports, in
   the controlling process and in each xdist worker alike (:func:`pytest_configure`).
2. Each spawning fixture registers what it started with this test process's reaper
   (tests/process_reaper.py: a process in a session of its own that ignores those
   signals); when the test process is gone, however it went (SIGKILL included, or a
   teardown that hung), the reaper stops what is still registered.
3. Children the harness spawns get ``PR_SET_PDEATHSIG`` (:func:`die_with_parent`): the
   kernel sends them SIGTERM when the test process dies.

Use from conftest.py (``pytest_plugins = ["tests.process_guard"]``) and, in a spawner,
:func:`guard_group` / :func:`release_group` and the others.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

__all__ = ["die_with_parent", "guard_folio_home", "guard_group", "guard_pid",
           "guard_postgres", "guard_warm_dir", "release_group", "release_pid",
           "release_postgres", "release_warm_dir"]

REPO = Path(__file__).resolve().parent.parent
#: linux/prctl.h
PR_SET_PDEATHSIG = 1

_lock = threading.Lock()
_reaper: subprocess.Popen[bytes] | None = None
_reaper_pid_owner: int | None = None  # the process that started it (not a forked child)


def _send(message: dict[str, Any]) -> None:
    """One registration to this process's reaper (started on first use)."""
    global _reaper, _reaper_pid_owner
    with _lock:
        if _reaper is None or _reaper_pid_owner != os.getpid():
            _reaper = subprocess.Popen(
                [sys.executable, "-m", "tests.process_reaper"], cwd=REPO,
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, "PYTHONPATH": str(REPO)})
            _reaper_pid_owner = os.getpid()
        assert _reaper.stdin is not None
        with contextlib.suppress(BrokenPipeError, OSError):
            _reaper.stdin.write((json.dumps(message) + "\n").encode())
            _reaper.stdin.flush()


def guard_group(pgid: int) -> None:
    """Stop process group ``pgid`` (a child started with ``start_new_session``) when
    this test process is gone, if it still runs."""
    _send({"op": "group", "pgid": pgid})


def release_group(pgid: int) -> None:
    """The group was stopped by its owner: the reaper forgets it (its id may be reused)."""
    _send({"op": "ungroup", "pgid": pgid})


def guard_pid(pid: int) -> None:
    _send({"op": "pid", "pid": pid})


def release_pid(pid: int) -> None:
    _send({"op": "unpid", "pid": pid})


def guard_postgres(data: Path) -> None:
    """Stop the PostgreSQL whose data folder is ``data`` (immediate shutdown)."""
    _send({"op": "postgres", "path": str(data)})


def release_postgres(data: Path) -> None:
    _send({"op": "unpostgres", "path": str(data)})


def guard_folio_home(home: Path) -> None:
    """Stop the folio local Prefect server of ``home`` and remove the home."""
    _send({"op": "folio_home", "path": str(home)})


def guard_warm_dir(runtime: Path) -> None:
    """Stop the warm servers whose sockets are in ``runtime`` and remove it."""
    _send({"op": "warm_dir", "path": str(runtime)})


def release_warm_dir(runtime: Path) -> None:
    _send({"op": "unwarm_dir", "path": str(runtime)})


def _close_reaper() -> None:
    """At a clean exit: end of file to the reaper, which stops what is left (nothing,
    when every fixture released what it stopped)."""
    reaper = _reaper
    if reaper is not None and reaper.stdin is not None and _reaper_pid_owner == os.getpid():
        with contextlib.suppress(OSError):
            reaper.stdin.close()


atexit.register(_close_reaper)


def die_with_parent() -> None:
    """In a child, before exec: SIGTERM when the thread that started it dies (Linux's
    ``PR_SET_PDEATHSIG``; elsewhere nothing). For children started from the main thread
    only (:func:`child_preexec`): the signal follows the starting thread, not the
    process."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def child_preexec(then: Any = None) -> Any:
    """A ``preexec_fn`` for a harness's child: ``then`` (another preexec, or None), and
    :func:`die_with_parent` when the child is started from the main thread (decided here,
    in the parent: a child of a thread that ends would be killed with it)."""
    pdeath = in_main_thread()

    def preexec() -> None:
        if then is not None:
            then()
        if pdeath:
            die_with_parent()

    return preexec


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP stop a test process as SIGINT does: pytest unwinds and runs
    every fixture's teardown. (A test that installs its own handler replaces this one for
    its own time, as tests of folio's signal handling do.)"""
    if in_main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) in (signal.SIG_DFL, None):
                signal.signal(sig, _interrupt)
