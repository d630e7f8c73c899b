"""The process that owns one shared vLLM server (see :mod:`folio.gpu.shared_server`).

Usage (``acquire`` runs this; nobody else should)::

    python -m folio.gpu.server_supervisor SPEC_JSON --state-dir DIR --owner-pid N

Why a process of its own: the server must outlive the flow run that started it, yet must
not outlive the worker (the owner) nor run for nobody. This process runs a
:class:`~folio.gpu.vllm_server.VLLMServer` (which restarts a crashed server up to
``max_restarts`` times and bumps ``generation``) and publishes what attached runs need in
``<key>.json``. Every tick it drops leases of dead processes; it stops the server when no
lease has existed for ``idle_timeout_s``, at once when the owner is gone, and on
SIGTERM/SIGINT/SIGHUP; it exits 1 after writing ``failed`` when the server fails for good.

No orphans: the server is started through VLLMServer's PDEATHSIG launcher, so even a
SIGKILL of this process takes vLLM down; every other exit path calls ``VLLMServer.stop``,
which kills the server's whole process group.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from folio.gpu.shared_server import (
    ServerFiles,
    SharedServerSpec,
    SharedState,
    api_key,
    flocked,
    pid_alive,
    proc_start_time,
    read_lease,
    read_state,
    write_atomic,
)
from folio.gpu.vllm_server import ServerState, VLLMServer

log = logging.getLogger("folio.gpu.server_supervisor")

TICK_S = 0.2  # state changes reach the file within this (waiters poll it)
LEASE_SCAN_S = 0.5
REFRESH_S = 2.0  # the state file is rewritten at least this often (updated_at)

_STATE_NAMES = {
    ServerState.NEW: "starting",
    ServerState.STARTING: "starting",
    ServerState.READY: "ready",
    ServerState.RESTARTING: "restarting",
    ServerState.FAILED: "failed",
    ServerState.STOPPED: "stopping",
}


class Supervisor:
    """One server's life: start it, publish its state, count leases, stop it."""

    def __init__(self, spec: SharedServerSpec, state_dir: Path, owner_pid: int) -> None:
        self.spec = spec
        self.files = ServerFiles(state_dir, spec.key())
        self.owner_pid = owner_pid
        self.owner_start = proc_start_time(owner_pid)
        self.pid = os.getpid()
        self.start_ticks = proc_start_time(self.pid)
        self.server = VLLMServer(
            spec.command, host=spec.host, env=spec.env,
            log_path=self.files.server_log(spec.log_dir),
            served_model_name=spec.served_model_name, in_flight=spec.in_flight,
            startup_timeout_s=spec.startup_timeout_s, max_restarts=spec.max_restarts,
            health_interval_s=spec.health_interval_s, api_key=api_key(state_dir),
        )
        self.stop_requested = threading.Event()
        self.start_error: str | None = None
        self.started_at = time.time()
        self.last_used = time.time()
        self.last_used_mono = time.monotonic()
        self.leases = 0
        self._starter: threading.Thread | None = None
        self._published: dict[str, object] | None = None
        self._published_at = 0.0

    # --- main loop ------------------------------------------------------------------------------
    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        log.info("supervisor %d for %s: %s (owner pid %d, idle timeout %.1f s)", self.pid,
                 self.files.key, self.server.command, self.owner_pid, self.spec.idle_timeout_s)
        if not self._owner_alive():
            return self._shutdown(f"owner pid {self.owner_pid} is gone")
        if not self._publish(force=True):
            return self._orphaned()
        self._starter = threading.Thread(target=self._start, name="server-start", daemon=True)
        self._starter.start()
        next_scan = 0.0
        try:
            while True:
                if self.stop_requested.is_set():
                    return self._shutdown("signal")
                if not self._owner_alive():
                    return self._shutdown(f"owner pid {self.owner_pid} is gone")
                failure = self._failure()
                if failure is not None:
                    return self._fail(failure)
                now = time.monotonic()
                if now >= next_scan:
                    self._scan_leases()
                    next_scan = now + LEASE_SCAN_S
                    if (self.leases == 0 and now - self.last_used_mono >= self.spec.idle_timeout_s
                            and self._idle_stop()):
                        return 0
                if not self._publish():
                    return self._orphaned()
                self.stop_requested.wait(TICK_S)
        except Exception as exc:  # never leave the server behind on a bug here
            log.exception("supervisor error")
            return self._fail(f"supervisor error: {exc}")

    def _start(self) -> None:
        """In a thread, so the loop keeps watching the owner and leases during a
        minutes-long start. (VLLMServer spawns from its own long-lived thread, which keeps
        the parent-death signal valid.)"""
        try:
            self.server.start()
        except Exception as exc:
            self.start_error = self.server.error or str(exc).splitlines()[0]

    def _failure(self) -> str | None:
        """Why the server will not serve again, or None. A start failure makes VLLMServer
        stop itself, so STOPPED that this process did not ask for is a failure too."""
        state = self.server.state
        if state is ServerState.FAILED:
            return self.server.error or "server failed"
        if state is ServerState.STOPPED:
            if self._starter is not None:
                self._starter.join(timeout=5.0)
            return self.start_error or self.server.error or "server stopped by itself"
        return self.start_error

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested.set()

    def _owner_alive(self) -> bool:
        return pid_alive(self.owner_pid, self.owner_start)

    # --- leases ---------------------------------------------------------------------------------
    def _scan_leases(self) -> None:
        """Count leases of live processes, deleting those of dead ones; any lease, or a
        change in their number, is use."""
        live = 0
        try:
            paths = [p for p in self.files.leases.iterdir() if not p.name.startswith(".")]
        except FileNotFoundError:
            paths = []
        for path in paths:
            pid, start = read_lease(path)
            if pid_alive(pid, start):
                live += 1
            else:
                log.info("dropping lease %s (process gone)", path.name)
                path.unlink(missing_ok=True)
        if live or live != self.leases:
            self.last_used, self.last_used_mono = time.time(), time.monotonic()
        self.leases = live

    def _idle_stop(self) -> bool:
        """Stop for idleness, unless a lease appeared: the re-check and the "stopping"
        mark happen under the lock acquirers take, so none attaches to a dying server."""
        with flocked(self.files.lock):
            self._scan_leases()
            if self.leases:
                return False
            self._write(self._state("stopping"), locked=True)
        log.info("no lease for %.1f s: stopping", self.spec.idle_timeout_s)
        self.server.stop()
        self._final()
        return True

    # --- endings --------------------------------------------------------------------------------
    def _shutdown(self, reason: str) -> int:
        log.info("stopping: %s", reason)
        self._write(self._state("stopping"))
        self.server.stop()
        self._final()
        return 0

    def _fail(self, reason: str) -> int:
        """Failed for good: say why (acquirers show it) and exit 1. The file stays, with a
        dead supervisor pid, so the next acquire starts afresh."""
        log.error("server failed: %s", reason)
        self.server.stop()
        self._write(self._state("failed", error=reason))
        return 1

    def _orphaned(self) -> int:
        log.error("state file %s names another supervisor: stopping", self.files.state)
        self.server.stop()
        return 2

    def _final(self) -> None:
        with flocked(self.files.lock):
            if self._write(self._state("stopped"), locked=True):
                self.files.state.unlink(missing_ok=True)
        log.info("stopped")

    # --- state file -----------------------------------------------------------------------------
    def _state(self, name: str | None = None, error: str | None = None) -> SharedState:
        server = self.server
        return SharedState(
            key=self.files.key, state=name or _STATE_NAMES[server.state],
            supervisor_pid=self.pid, supervisor_start=self.start_ticks, owner_pid=self.owner_pid,
            server_pid=server.pid, host=server.host, port=server.port, base_url=server.base_url,
            served_model_name=server.served_model_name, in_flight=server.in_flight,
            max_restarts=server.max_restarts, generation=server.generation,
            restarts=server.restarts, error=error or server.error, log_path=str(server.log_path),
            leases=self.leases, started_at=self.started_at, updated_at=time.time(),
            last_used=self.last_used,
        )

    def _publish(self, force: bool = False) -> bool:
        """Write the state when it changed, and every REFRESH_S anyway; False when the
        file is no longer ours."""
        state = self._state()
        content = state.model_dump(exclude={"updated_at", "last_used"})
        if (not force and content == self._published
                and time.monotonic() - self._published_at < REFRESH_S):
            return True
        if not self._write(state):
            return False
        self._published, self._published_at = content, time.monotonic()
        return True

    def _write(self, state: SharedState, *, locked: bool = False) -> bool:
        """Replace the state file if it is ours (or absent). Under the lock, so that an
        acquirer's read-decide-write never interleaves with it."""
        if locked:
            return self._write_locked(state)
        with flocked(self.files.lock):
            return self._write_locked(state)

    def _write_locked(self, state: SharedState) -> bool:
        current = read_state(self.files.state)
        if current is not None and current.supervisor_pid != self.pid:
            return False
        write_atomic(self.files.state, state.model_dump_json())
        return True


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("spec", help="SharedServerSpec as a JSON file")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--owner-pid", type=int, required=True)
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(process)d %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore"):  # a line per health probe, for hours
        logging.getLogger(noisy).setLevel(logging.WARNING)
    spec = SharedServerSpec.model_validate_json(Path(a.spec).read_text())
    return Supervisor(spec, Path(a.state_dir), a.owner_pid).run()


if __name__ == "__main__":
    sys.exit(main())
