"""The suite's reaper: one small process a test process starts (tests/process_guard.py),
which stops what that test process started once the test process is gone, however it
went (a clean end, SIGTERM, SIGINT, a timeout's SIGKILL, a crash).

It reads registrations on its standard input, one JSON object a line, from a pipe only the
test process writes; end of file means the test process has exited. It runs in a session
of its own and ignores SIGINT, SIGTERM and SIGHUP, so the signal that stops the suite (a
terminal's Ctrl-C, ``timeout``'s signal to its process group) does not stop it before it
has done its work. Registrations (``op``):

* ``group`` / ``ungroup``: a process group (``pgid``) the test process started in a
  session of its own (a Prefect server, a worker): SIGTERM, then SIGKILL after
  :data:`GRACE_S`;
* ``pid`` / ``unpid``: one process (``pid``) in the test process's own group (it gets a
  group's signal too, but not a SIGKILL of the test process alone);
* ``postgres`` / ``unpostgres``: a PostgreSQL data folder (``path``): its postmaster
  (``postmaster.pid``) gets SIGQUIT, PostgreSQL's immediate shutdown, which stops its
  backends too;
* ``folio_home``: a folio local Prefect server's home (``path``): that server is stopped
  (tests/folio_server.py's ``stop_server``) and the home removed;
* ``warm_dir``: a runtime folder (``path``, the test process's ``XDG_RUNTIME_DIR``) whose
  warm servers (folio/warm) are stopped (:func:`stop_warm_servers`) and the folder removed.

Run as ``python -m tests.process_reaper`` from the repository.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sys
import time
from pathlib import Path

#: how long the stopped processes get between SIGTERM and SIGKILL
GRACE_S = 5.0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _postmaster(path: str) -> int | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        return int((Path(path) / "postmaster.pid").read_text().split()[0])
    return None


def warm_server_pid(sock: Path) -> int | None:
    """The pid of the warm server listening on ``sock``, from the ``ready on`` line of its
    log beside it (None before that line, or without a log)."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in sock.with_suffix(".log").read_text().splitlines():
            if line.startswith("folio warm server ") and "ready on" in line:
                return int(line.split()[3].rstrip(":"))
    return None


def warm_runs(runtime: Path) -> list[tuple[int, str]]:
    """What the warm servers of ``runtime`` forked, in order: (pid, target) from their
    logs' ``folio warm server: PID runs TARGET in ...`` lines."""
    text = "".join(log.read_text() for log in sorted((runtime / "folio-warm").glob("*.log")))
    return [(int(pid), target) for pid, target in
            re.findall(r"folio warm server: (\d+) runs (\S+) in ", text)]


def stop_warm_servers(runtime: Path) -> list[int]:
    """SIGTERM to every warm server of ``runtime`` (the servers whose logs are in its
    ``folio-warm`` folder), then the folder removed: the pids signalled. A server exits
    on SIGTERM; unlike the suite's other servers it runs in a session of its own that no
    fixture started, and would idle for an hour (FOLIO_WARM_IDLE_S) after the suite."""
    stopped = []
    for log in (runtime / "folio-warm").glob("*.log"):
        pid = warm_server_pid(log.with_suffix(".sock"))
        if pid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
    shutil.rmtree(runtime, ignore_errors=True)
    return stopped


def reap(groups: set[int], pids: set[int], postgres: set[str], homes: set[str],
         warm_dirs: set[str] | None = None) -> None:
    """Stop everything registered: SIGTERM to the groups and pids, SIGQUIT to the
    postmasters, the folio servers stopped; SIGKILL to what is left after the grace."""
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGTERM)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    for path in postgres:
        postmaster = _postmaster(path)
        if postmaster is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(postmaster, signal.SIGQUIT)
    for home in homes:
        with contextlib.suppress(Exception):  # best effort: the others still get stopped
            from tests.folio_server import stop_server

            stop_server(Path(home))
        shutil.rmtree(home, ignore_errors=True)
    for runtime in warm_dirs or ():
        stop_warm_servers(Path(runtime))
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(_group_alive(g) for g in groups):
        time.sleep(0.1)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    pids: set[int] = set()
    postgres: set[str] = set()
    homes: set[str] = set()
    warm_dirs: set[str] = set()
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        op = message.get("op")
        if op == "group":
            groups.add(int(message["pgid"]))
        elif op == "ungroup":
            groups.discard(int(message["pgid"]))
        elif op == "pid":
            pids.add(int(message["pid"]))
        elif op == "unpid":
            pids.discard(int(message["pid"]))
        elif op == "postgres":
            postgres.add(str(message["path"]))
        elif op == "unpostgres":
            postgres.discard(str(message["path"]))
        elif op == "folio_home":
            homes.add(str(message["path"]))
        elif op == "warm_dir":
            warm_dirs.add(str(message["path"]))
        elif op == "unwarm_dir":
            warm_dirs.discard(str(message["path"]))
    reap(groups, pids, postgres, homes, warm_dirs)


if __name__ == "__main__":
    main()
