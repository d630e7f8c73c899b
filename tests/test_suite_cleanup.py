"""Stopping the suite leaves none of its processes behind (tests/process_guard.py): a small
pytest run of a tiny test file whose session fixture starts a "server" the way the
Prefect stack starts its server and workers (tests/prefect_stack.py's ``_spawn``: a
session of its own, with a child of its own as ``prefect server start`` has), stopped
mid-test as ``make test`` is: SIGTERM or SIGINT to its process group (a terminal's
Ctrl-C, ``timeout``), or SIGKILL (``timeout -s KILL``, an OOM kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

TINY = '''
import os
import sys
import time
from pathlib import Path

import pytest

from tests.prefect_stack import PrefectStack, _spawn

SERVER = ("import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
          "time.sleep(600)")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    stack = PrefectStack(api_url="", ui_url="", home=tmp_path_factory.mktemp("home"),
                         env=dict(os.environ))
    _spawn(stack, "server", sys.executable, "-c", SERVER)
    yield stack
    stack.stop()


def test_runs_until_stopped(server):
    time.sleep(1.0)  # the server's own child is started
    Path(os.environ["FOLIO_TINY_MARK"]).write_text(str(server.processes[0].pid))
    time.sleep(600)
'''


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return found


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL],
                         ids=["SIGTERM", "SIGINT", "SIGKILL"])
def test_a_stopped_suite_leaves_no_server_behind(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["tests.process_guard"]\n')
    (tmp_path / "test_tiny.py").write_text(TINY)
    mark = tmp_path / "server.pid"
    env = {**os.environ, "PYTHONPATH": str(REPO), "FOLIO_TINY_MARK": str(mark)}
    suite = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_tiny.py"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group, signalled as a whole as timeout does
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and suite.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert mark.exists(), (suite.stdout.read() if suite.stdout else b"").decode()[-3000:]
        server = int(mark.read_text())
        assert len(_group_members(server)) == 2  # the server and its own child
        os.killpg(suite.pid, sig)
        suite.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _group_members(server) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _group_members(server), f"left running after {sig.name}"
    finally:
        if suite.poll() is None:
            os.killpg(suite.pid, signal.SIGKILL)
            suite.wait(timeout=10)
        if mark.exists():
            for pid in _group_members(int(mark.read_text())):
                os.kill(pid, signal.SIGKILL)
