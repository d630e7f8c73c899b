"""A real self-hosted Prefect stack for tests: ``prefect server start`` (own PREFECT_HOME,
free port, UI included), the pools ``folio-cpu`` and ``folio-control``, the document and
sweep deployments from ``prefect.yaml`` deployed with the CLI, and a process worker on
``folio-cpu`` running flows from this checkout.

Why subprocesses and not ``prefect_test_harness``: the proofs are about what a person and a
RAG job see on a server (UI, deployments, triggers, workers), which the in-process harness
does not have. One stack serves the whole session because it costs about 30 s to start.

Use from conftest.py::

    pytest_plugins = ["tests.prefect_stack"]
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from folio_prefect.deployments.work_pools import CONTROL_POOL
from tests.pg_cluster import PgCluster
from tests.process_guard import child_preexec, guard_group, release_group

__all__ = ["PrefectStack", "prefect_stack", "prefect_stack_server"]

REPO = Path(__file__).resolve().parent.parent
POOL = "folio-cpu"
SWEEP_DEPLOYMENT = "folio-sweep/sweep-example"
DOCUMENT_DEPLOYMENT = "folio-ingest-document/document"
_STARTUP_S = 120.0
#: how long a stopping group of processes (the workers, then the server) may take to exit
#: after SIGTERM before SIGKILL
STOP_S = 5.0


@dataclass
class PrefectStack:
    api_url: str
    ui_url: str
    home: Path
    env: dict[str, str]  # for subprocesses that talk to this server
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    logs: list[Path] = field(default_factory=list, repr=False)

    def run(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=REPO, env=self.env, capture_output=True,
                              text=True, timeout=timeout, check=False)

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-chars:]}"
                         for p in self.logs if p.exists())

    def stop(self) -> None:
        """The workers (and their flow runs) first, all at once, then the server. Each
        group gets one short deadline, not one per process: two hosts' workers stopped one
        after the other would hold their test's xdist worker twice as long. Nothing of a
        test stack needs a graceful exit."""
        server, workers = self.processes[:1], self.processes[1:]
        for group in (workers, server):
            live = [proc for proc in group if proc.poll() is None]
            for proc in live:
                os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_S
            for proc in live:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            for proc in group:
                release_group(proc.pid)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default action, as a service manager
    starts a worker. A suite started in the background of a non-interactive shell
    (``make test &``, a CI step's ``cmd &``) runs with SIGINT ignored, and every child
    inherits that. Prefect's worker stops on SIGTERM by sending itself SIGINT
    (``setup_signal_handlers_worker``); with SIGINT ignored that SIGINT does nothing and the
    worker does not stop. Seen in every such full run: the GPU pool's worker, started with
    SIGINT ignored, was alive 9 s after SIGTERM and killed after its minute; with SIGINT at
    its default it stopped within 8 s (and the suite took 7:54 against 8:22)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(stack: PrefectStack, name: str, *args: str, env: dict[str, str] | None = None,
           cwd: Path = REPO) -> subprocess.Popen[bytes]:
    log = stack.home / f"{name}.log"
    stack.logs.append(log)
    with log.open("wb") as fh:  # the child keeps its own descriptor
        proc = subprocess.Popen(list(args), cwd=cwd, env=env or stack.env, stdout=fh,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=child_preexec(_default_sigint))
    stack.processes.append(proc)
    guard_group(proc.pid)  # stopped if this test process goes first (tests/process_guard.py)
    return proc


def _wait_healthy(stack: PrefectStack, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + _STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prefect server exited:\n{stack.log_tail()}")
        try:
            with urllib.request.urlopen(f"{stack.api_url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prefect server not healthy after {_STARTUP_S:.0f} s:\n{stack.log_tail()}")


def _create_process_pools(api_url: str, names: tuple[str, ...]) -> None:
    """What ``prefect work-pool create NAME --type process`` does (a pool with the process
    worker's default base job template), from this process: a ``prefect`` CLI process
    costs seconds of CPU to start, and the suite is CPU-bound."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.workers.process import ProcessWorker

    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as client:
        for name in names:
            client.create_work_pool(WorkPoolCreate(
                name=name, type="process",
                base_job_template=ProcessWorker.get_default_base_job_template()))


def start_prefect_stack(home: Path, deployments: tuple[str, ...] = ("document",), *,
                        server_env: dict[str, str] | None = None, worker: bool = True,
                        env: dict[str, str] | None = None) -> PrefectStack:
    """Server, work pool, ``prefect deploy --name`` of ``deployments`` (names in
    prefect.yaml), worker (unless not ``worker``); stopped on error. ``server_env``: the
    server's own settings (its database, say); ``env``: more of everyone's environment
    (the worker's and the commands' a test runs with ``stack.run``)."""
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **os.environ,
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,  # the UI's own calls (default: port 4200)
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",  # default 10 s between polls of the pool
        "PREFECT_LOGGING_LEVEL": "INFO",
        "PWD": str(REPO),  # prefect.yaml's pull step reads {{ $PWD }} at deploy time
        "OMP_THREAD_LIMIT": "1",
        # moto's keys (tests.s3_server): a test gives its endpoint with the request
        # (--s3-endpoint-url); a local source never reaches S3
        "FOLIO_S3__ACCESS_KEY_ID": "test", "FOLIO_S3__SECRET_ACCESS_KEY": "test",
        **(env or {}),
    }
    stack = PrefectStack(api_url=api, ui_url=f"http://127.0.0.1:{port}", home=home, env=env)
    try:
        server_only = {**{k: v for k, v in env.items() if k != "PREFECT_API_URL"},
                       **(server_env or {})}
        log = home / "server.log"
        stack.logs.append(log)
        with log.open("wb") as fh:
            server = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                 "--port", str(port)], cwd=home, env=server_only, stdout=fh,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=child_preexec())
        stack.processes.append(server)
        guard_group(server.pid)
        _wait_healthy(stack, server)
        _create_process_pools(api, (POOL, CONTROL_POOL))
        if deployments:  # one `prefect deploy` for them all: a CLI process each cost seconds
            names = [arg for name in deployments for arg in ("--name", name)]
            deploy = stack.run(sys.executable, "-m", "prefect", "--no-prompt", "deploy", *names)
            assert deploy.returncode == 0, deploy.stdout[-3000:] + deploy.stderr[-3000:]
        if worker:
            _spawn(stack, "worker", sys.executable, "-m", "prefect", "worker", "start",
                   "--pool", POOL, "--type", "process")
    except BaseException:
        stack.stop()
        raise
    return stack


@pytest.fixture(scope="session")
def prefect_stack_server(tmp_path_factory: pytest.TempPathFactory, pg_cluster: PgCluster | None,
                         ) -> Iterator[PrefectStack]:
    """One server + deployments + worker for the session.

    The server's database is PostgreSQL where this machine has it (as production guidance
    says, docs/hosts.md): on SQLite, a loaded 2-core CI machine running two test processes
    had the server answer "database is locked" to a worker's heartbeat and a run started
    from the UI never ran. SQLite stays the fallback, and the demo's default.

    Its worker's flow runs and the commands run on it go through the warm server
    (``FOLIO_WARM=1``, the default a team gets; the rest of the suite turns it off): the
    deployments' tests then run what users run, and each run after the first skips its
    imports (test_trigger.py beside test_sweep.py on one worker: 87 user CPU-s against 146).
    It also caught a warm flow run that took the warm server for the worker whose end
    stops the run's shared GPU server (flows/vllm_runner.flow_run_owner)."""
    if not shutil.which("gs"):
        pytest.skip("ghostscript absent: the document flow cannot run")
    server_env = ({"PREFECT_API_DATABASE_CONNECTION_URL": pg_cluster.database()}
                  if pg_cluster is not None else None)
    stack = start_prefect_stack(tmp_path_factory.mktemp("prefect-home"),
                                deployments=("document", "sweep-example"), server_env=server_env,
                                env={"FOLIO_WARM": "1"})
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture()
def prefect_stack(prefect_stack_server: PrefectStack) -> Iterator[PrefectStack]:
    """The session's stack; the test process's Prefect client points at it for this test
    only, so tests on ``prefect_api``'s temporary server never talk to it by accident."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: prefect_stack_server.api_url}):
        yield prefect_stack_server
