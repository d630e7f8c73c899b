"""One ``vllm serve`` per host, shared by every flow run and outliving each of them.

Why: Prefect's process worker runs each flow run in a child process of its own, and
starting vLLM costs minutes, so a one-page run must not pay for it. The server therefore
is not a child of a flow run. The first run on the host spawns a small *supervisor*
process (``python -m folio.gpu.server_supervisor``, in a session of its own so that the
run's end does not take it down) which runs a :class:`~folio.gpu.vllm_server.VLLMServer`
(start, health, bounded crash restarts, process-group kill). Later runs, in other
processes, find it through a state file and attach. Each attached process holds a *lease*
(a file named after its pid); the supervisor stops the server once no lease has existed
for ``idle_timeout_s``, at once when the owner (the worker process) is gone, and on
SIGTERM/SIGINT. A lease whose process died is dropped, so a killed run never pins the GPU.

Files under ``state_dir``, per server identity ``key`` (:meth:`SharedServerSpec.key`)::

    <key>.lock            flock, held for milliseconds: attach/spawn/state writes
    <key>.json            the state (:class:`SharedState`), replaced atomically
    <key>.spec.json       the spec the supervisor runs
    <key>.leases/<pid>-<uuid>   one per attached process
    <key>.slots/slot-N    the cross-process in-flight bound (:class:`SlotSemaphore`)
    <key>.supervisor.log, vllm-<key>.log
    api-key               the API key every server of this folder requires (0600)

Safe on a shared host (docs/security.md): the folder is this user's alone (created 0700;
owner, type and mode checked on every :func:`acquire`, which refuses another user's), a
supervisor is attached to only when its process is this user's, and each server requires
the folder's API key (``VLLM_API_KEY`` in its environment, never on its command line), which
only this user can read: another local user can neither point runs at a server of theirs
nor send pages to folio's.

Example:
    >>> spec = SharedServerSpec(command=["vllm", "serve", "/m", "--port", "{port}"])
    >>> len(spec.key()), spec.key() == spec.model_copy(update={"in_flight": 8}).key()
    (16, True)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Self

from pydantic import BaseModel, Field

from folio.errors import EngineUnavailableError
from folio.gpu.inflight_slots import SlotSemaphore, slot_semaphore
from folio.gpu.server_probe import probe_server, read_metrics
from folio.process_files import flocked, pid_alive, pid_owned, proc_start_time, write_atomic
from folio.security.listeners import ListenerVerdict, url_verdict
from folio.security.private_dir import ensure_private_dir, read_or_make_secret
from folio.security.redaction import MODEL_HUB_SECRETS, child_env

log = logging.getLogger(__name__)

#: states in which a supervisor can be attached to (it is, or will be, serving)
LIVE_STATES = frozenset({"spawning", "starting", "ready", "restarting"})
#: states after which a supervisor will not serve again
DEAD_STATES = frozenset({"stopping", "stopped", "failed"})
_POLL_S = 0.1  # how often waiters re-read the state file


class SharedServerSpec(BaseModel):
    """What to run, and how to supervise it. ``command`` may hold ``{host}``/``{port}``
    (the supervisor picks a free port). Only command, env, host and served model name make
    the identity (:meth:`key`): runs asking for the same server with other timeouts or
    another in-flight bound attach to the first one's (its settings win)."""

    command: list[str]
    env: dict[str, str] = Field(default_factory=dict)
    host: str = "127.0.0.1"
    served_model_name: str | None = None
    in_flight: int = 16
    startup_timeout_s: float = 900.0
    max_restarts: int = 2
    health_interval_s: float = 1.0
    idle_timeout_s: float = 600.0
    log_dir: str | None = None

    def key(self) -> str:
        """Short sha256 of what makes two servers the same server."""
        identity = json.dumps(
            [self.command, sorted(self.env.items()), self.host, self.served_model_name]
        )
        return hashlib.sha256(identity.encode()).hexdigest()[:16]


class SharedState(BaseModel):
    """The state file, written by the supervisor (first, briefly, by the spawning
    process, so that a second acquirer never spawns a second supervisor)."""

    key: str
    state: str  # spawning|starting|ready|restarting|stopping|stopped|failed
    supervisor_pid: int
    supervisor_start: int | None = None  # /proc start time: a reused pid is not ours
    owner_pid: int
    server_pid: int | None = None  # the vLLM process (its process group leader)
    host: str
    port: int | None = None
    base_url: str | None = None  # ends with /v1
    served_model_name: str | None = None
    in_flight: int
    max_restarts: int
    generation: int = 0  # +1 each time a server process becomes ready
    restarts: int = 0
    error: str | None = None
    log_path: str | None = None
    leases: int = 0
    started_at: float  # wall-clock seconds
    updated_at: float
    last_used: float  # last time a lease existed or changed


class ServerFiles:
    """The paths of one key's files under ``state_dir``."""

    def __init__(self, state_dir: Path, key: str) -> None:
        self.dir = Path(state_dir)
        self.key = key
        self.lock = self.dir / f"{key}.lock"
        self.state = self.dir / f"{key}.json"
        self.spec = self.dir / f"{key}.spec.json"
        self.leases = self.dir / f"{key}.leases"
        self.slots = self.dir / f"{key}.slots"
        self.supervisor_log = self.dir / f"{key}.supervisor.log"

    def server_log(self, log_dir: str | None) -> Path:
        return (Path(log_dir) if log_dir else self.dir) / f"vllm-{self.key}.log"


def default_state_dir() -> Path:
    """``$FOLIO_SERVER_STATE_DIR``, else ``$XDG_RUNTIME_DIR/folio-servers`` (a folder only
    this user can reach, emptied at logout), else ``~/.folio/servers``. Never a name under
    the shared temp dir, which another user could create first. Every process of the user
    must agree on it, so it depends on nothing per run."""
    env = os.environ.get("FOLIO_SERVER_STATE_DIR")
    if env:
        return Path(env)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute() and _owned_private(Path(runtime)):
        return Path(runtime) / "folio-servers"
    return Path.home() / ".folio" / "servers"


def _owned_private(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return path.is_dir() and not path.is_symlink() and info.st_uid == os.geteuid() \
        and not info.st_mode & 0o077


def api_key(state_dir: Path) -> str:
    """The API key the servers of ``state_dir`` require (made on first use, 0600)."""
    ensure_private_dir(state_dir)
    with flocked(Path(state_dir) / "api-key.lock"):
        return read_or_make_secret(Path(state_dir) / "api-key")


# --- processes ---------------------------------------------------------------------------------


def read_state(path: Path) -> SharedState | None:
    try:
        return SharedState.model_validate_json(path.read_text())
    except (OSError, ValueError):  # absent, or not ours (pydantic's error is a ValueError)
        return None


def log_tail(path: Path | str | None, lines: int = 40) -> str:
    if path is None:
        return ""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def read_lease(path: Path) -> tuple[int | None, int | None]:
    """(pid, start time) of a lease file; the pid also comes from the name, so a lease is
    judged even when its content cannot be read."""
    pid: int | None
    try:
        pid = int(path.name.split("-", 1)[0])
    except ValueError:
        pid = None
    try:
        data = json.loads(path.read_text())
        return int(data.get("pid", pid)), data.get("start")
    except (OSError, ValueError, TypeError, AttributeError):
        return pid, None


# --- acquire -------------------------------------------------------------------------------------

_SPAWNED: list[subprocess.Popen[bytes]] = []  # supervisors this process started (to reap them)


def acquire(spec: SharedServerSpec, *, state_dir: Path, owner_pid: int) -> SharedEndpoint:
    """Attach to the host's server for ``spec``, starting it if none is running.

    Under ``<key>.lock``: a live supervisor (alive, state not stopping/stopped/failed) is
    attached to; one that is stopping or failed but not yet gone is waited for (its GPU
    memory is not free yet); otherwise a new supervisor is spawned, watching
    ``owner_pid``. A lease for this process is registered before the lock is released, so
    the server cannot idle out in between. Then this waits (not holding the lock) until the
    server is ready, at most ``startup_timeout_s`` (plus a little).

    Raises EngineUnavailableError, with the server log's tail, when it fails or times out;
    InsecureLocationError (a ConfigError) when ``state_dir`` is not this user's private
    folder (another user may have made it to take the server over).
    """
    state_dir = ensure_private_dir(Path(state_dir))
    api_key(state_dir)  # made before any supervisor starts, which reads it
    files = ServerFiles(state_dir, spec.key())
    files.leases.mkdir(exist_ok=True)
    _SPAWNED[:] = [p for p in _SPAWNED if p.poll() is None]
    deadline = time.monotonic() + spec.startup_timeout_s + 10.0
    while True:
        with flocked(files.lock):
            current = read_state(files.state)
            # another user's process is never our supervisor, whatever the file says
            supervisor_up = current is not None and pid_alive(
                current.supervisor_pid, current.supervisor_start) and pid_owned(
                current.supervisor_pid)
            if current is None or not supervisor_up:
                current = _spawn_supervisor(spec, files, owner_pid)
                lease = _make_lease(files)
                break
            if current.state in LIVE_STATES:
                lease = _make_lease(files)
                break
        if time.monotonic() > deadline:
            raise EngineUnavailableError(
                f"shared server {files.key}: supervisor pid {current.supervisor_pid} stayed "
                f"{current.state!r}")
        time.sleep(_POLL_S)  # a stopping/failed supervisor on its way out
    endpoint = SharedEndpoint(files, current, lease)
    if endpoint.wait_ready(max(0.0, deadline - time.monotonic())):
        return endpoint
    endpoint.release()
    raise EngineUnavailableError(endpoint.failure_message())


def _spawn_supervisor(spec: SharedServerSpec, files: ServerFiles, owner_pid: int) -> SharedState:
    """Start ``server_supervisor`` in its own session (the run's end must not reach it)
    and write a first state naming it, before the caller releases the lock. The working
    directory is ``state_dir``: a run's own directory may be a temp dir deleted after it."""
    write_atomic(files.spec, spec.model_dump_json())
    argv = [sys.executable, "-m", "folio.gpu.server_supervisor", str(files.spec),
            "--state-dir", str(files.dir), "--owner-pid", str(owner_pid)]
    # folio importable from the state dir too (a checkout run with PYTHONPATH=. is not)
    root = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    with files.supervisor_log.open("ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True, close_fds=True, cwd=files.dir,
                                # no secret of the run lives on in it for idle minutes
                                env=child_env(keep=MODEL_HUB_SECRETS, PYTHONPATH=path))
    _SPAWNED.append(proc)
    now = time.time()
    state = SharedState(
        key=files.key, state="spawning", supervisor_pid=proc.pid,
        supervisor_start=proc_start_time(proc.pid), owner_pid=owner_pid, host=spec.host,
        served_model_name=spec.served_model_name, in_flight=spec.in_flight,
        max_restarts=spec.max_restarts, log_path=str(files.server_log(spec.log_dir)),
        started_at=now, updated_at=now, last_used=now,
    )
    write_atomic(files.state, state.model_dump_json())
    log.info("started supervisor pid %d for shared server %s (log %s)",
             proc.pid, files.key, files.supervisor_log)
    return state


def _make_lease(files: ServerFiles) -> Path:
    pid = os.getpid()
    path = files.leases / f"{pid}-{uuid.uuid4().hex}"
    write_atomic(path, json.dumps({"pid": pid, "start": proc_start_time(pid), "created": time.time()}))
    return path


class SharedEndpoint:
    """An attached shared server: an :class:`~folio.gpu.vllm_server.Endpoint` whose
    ``generation``/``restarts``/``pid`` are read live from the state file, so an engine
    waits out a restart the supervisor (another process) performs. Release it (or use it
    as a context manager) when the run is done; a process that dies releases implicitly.
    """

    def __init__(self, files: ServerFiles, state: SharedState, lease: Path) -> None:
        self._files = files
        self._lease = lease
        self._supervisor_pid = state.supervisor_pid
        self._supervisor_start = state.supervisor_start
        self._last = state
        self._base_url = state.base_url
        self._served_model_name = state.served_model_name
        self._api_key = api_key(files.dir)
        self._released = False

    # --- Endpoint ------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        if self._base_url is None:
            state = self._read()
            if state is None or state.base_url is None:
                raise EngineUnavailableError(f"shared server {self.key} has no address yet")
            self._base_url = state.base_url
        return self._base_url

    @property
    def served_model_name(self) -> str | None:
        return self._served_model_name

    @property
    def in_flight(self) -> int:
        return self._last.in_flight

    @property
    def api_key(self) -> str:
        """The key the server requires (the OCR client sends it)."""
        return self._api_key

    def wait_ready(self, timeout_s: float) -> bool:
        """True once the supervisor says ready, the server pid it names is alive and the
        server answers ``/health`` and ``/v1/models``; blocks through a restart. False
        when the supervisor failed, stopped or is gone, or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            state = self._read()
            if state is None or state.state in DEAD_STATES or not pid_alive(
                    self._supervisor_pid, self._supervisor_start):
                return False
            # the pid check: a dead server still "ready" in the file is a restart not yet seen
            # and the kernel's word that the socket is that server's before the key is sent
            if (state.state == "ready" and state.base_url and pid_alive(state.server_pid)
                    and state.server_pid is not None
                    and url_verdict(state.server_pid, state.base_url) is ListenerVerdict.OURS):
                remaining = deadline - time.monotonic()
                ok, model = probe_server(state.base_url, timeout_s=min(2.0, max(0.2, remaining)),
                                         api_key=self._api_key)
                if ok:
                    self._base_url = state.base_url
                    self._served_model_name = self._served_model_name or model
                    return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(_POLL_S, remaining))

    # --- live state ------------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._current().generation

    @property
    def restarts(self) -> int:
        return self._current().restarts

    @property
    def pid(self) -> int | None:
        """The vLLM server process (None once the supervisor is gone)."""
        state = self._read()
        return state.server_pid if state is not None else None

    @property
    def state(self) -> str:
        state = self._read()
        return state.state if state is not None else "stopped"

    @property
    def error(self) -> str | None:
        return self._current().error

    @property
    def max_restarts(self) -> int:
        return self._last.max_restarts

    @property
    def key(self) -> str:
        return self._files.key

    @property
    def supervisor_pid(self) -> int:
        return self._supervisor_pid

    @property
    def log_path(self) -> Path | None:
        return Path(self._last.log_path) if self._last.log_path else None

    def metrics(self) -> dict[str, float]:
        return read_metrics(self.base_url, api_key=self._api_key)

    def semaphore(self) -> SlotSemaphore:
        """The in-flight bound shared by every process attached to this server."""
        return slot_semaphore(self._files.dir, self.key, self.in_flight)

    def failure_message(self) -> str:
        """Why the server is not serving, with the tail of its log (and of the
        supervisor's, when the supervisor died without saying)."""
        state = self._read()
        if state is not None and state.error:
            reason = state.error
        elif not pid_alive(self._supervisor_pid, self._supervisor_start):
            reason = f"supervisor pid {self._supervisor_pid} exited"
        elif state is not None:
            reason = f"still {state.state!r} after the start-up timeout"
        else:
            reason = "state file gone"
        text = f"shared vLLM server {self.key} is unavailable: {reason}"
        server_tail = log_tail(self.log_path)
        if server_tail:
            text += f"\n--- {self.log_path}\n{server_tail}"
        if state is None or not state.error:
            sup_tail = log_tail(self._files.supervisor_log, 15)
            if sup_tail:
                text += f"\n--- {self._files.supervisor_log}\n{sup_tail}"
        return text

    # --- lease -----------------------------------------------------------------------------------
    def release(self) -> None:
        """Drop this process's lease (idempotent); the server idles out when none is left."""
        if not self._released:
            self._released = True
            self._lease.unlink(missing_ok=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"SharedEndpoint({self._base_url!r}, key={self.key}, supervisor={self._supervisor_pid})"

    def _read(self) -> SharedState | None:
        """The state file if it is still our supervisor's (a new supervisor's file is
        another server, one this endpoint holds no lease on)."""
        state = read_state(self._files.state)
        if state is None or state.supervisor_pid != self._supervisor_pid:
            return None
        self._last = state
        return state

    def _current(self) -> SharedState:
        return self._read() or self._last
