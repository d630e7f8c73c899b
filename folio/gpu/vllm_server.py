"""The ``vllm serve`` process: start, health, crash restarts, stop, queue depth.

A supervisor thread owns the child from spawn to death: it waits for ``/health`` and
``/v1/models``, polls the process and its health every ``health_interval_s``, and
restarts a crashed (or hung) server at most ``max_restarts`` times. Clients that lose a
connection call :meth:`VLLMServer.wait_ready`, which blocks while a restart is under way,
so requests in flight at a crash are sent again to the new process instead of being lost.

No orphans: the child leads its own process group (vLLM's engine-core and worker
processes join it), and stopping kills the whole group, SIGTERM then SIGKILL. On Linux the
child is started through a tiny launcher that sets ``PR_SET_PDEATHSIG`` before exec, so a
SIGKILL of this process still takes the server down. (A ``preexec_fn`` would do the same
but is unsafe in a process with threads, which a Prefect worker always is. The death
signal follows the thread that forked the child, which is why the supervisor thread, alive
for the server's whole life, does every spawn.) An ``atexit`` hook stops what is left.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import IO, TYPE_CHECKING, Protocol, Self

from folio.errors import EngineUnavailableError
from folio.gpu.server_probe import free_port, probe_server, read_metrics
from folio.gpu.server_process import LAUNCHER, gone, kill_group, open_log
from folio.security.listeners import ListenerVerdict, url_verdict
from folio.security.redaction import MODEL_HUB_SECRETS, child_env

if TYPE_CHECKING:
    from folio.settings.config import OcrSettings

log = logging.getLogger(__name__)

#: ports tried when another process listens on the one picked (it bound it first)
PORT_ATTEMPTS = 3

class Endpoint(Protocol):
    """What an OCR client needs from a server: where it is, what it serves, how many
    requests to keep in flight, and a way to wait out a restart."""

    @property
    def base_url(self) -> str: ...  # ends with /v1

    @property
    def served_model_name(self) -> str | None: ...

    @property
    def in_flight(self) -> int: ...

    def wait_ready(self, timeout_s: float) -> bool: ...


class EndpointGroup:
    """Several servers of one model on one host (one per GPU or GPU group), seen as one
    endpoint by what needs only one (a health wait, the served model's name); engines
    that can spread pages read :attr:`members` (folio.engines.dispatch)."""

    def __init__(self, members: Sequence[Endpoint]) -> None:
        if not members:
            raise ValueError("an endpoint group needs members")
        self.members: list[Endpoint] = list(members)

    @property
    def base_url(self) -> str:
        return self.members[0].base_url

    @property
    def served_model_name(self) -> str | None:
        return self.members[0].served_model_name

    @property
    def in_flight(self) -> int:
        """Every member's budget together."""
        return sum(m.in_flight for m in self.members)

    def wait_ready(self, timeout_s: float) -> bool:
        """True once any member answers: the others' pages go to it meanwhile."""
        deadline = time.monotonic() + timeout_s
        while True:
            if any(m.wait_ready(0.0) for m in self.members):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))


def endpoint_members(endpoint: Endpoint) -> list[Endpoint]:
    """The servers behind ``endpoint``: a group's members, else the endpoint itself."""
    members = getattr(endpoint, "members", None)
    return list(members) if members else [endpoint]


def configured_endpoints(ocr: OcrSettings) -> list[Endpoint]:
    """The servers a run's OpenAI-protocol engine sends pages to: those the settings name
    (``ocr.endpoints`` / ``ocr.endpoint``), else the task runner's (one, or one per GPU),
    else none. The engine and the page scheduler's budget both read this."""
    urls = ocr.server_urls()
    if urls:
        return [RemoteEndpoint(url, served_model_name=ocr.model, in_flight=ocr.in_flight)
                for url in urls]
    active = active_endpoint()
    return endpoint_members(active) if active is not None else []


class RemoteEndpoint:
    """An OpenAI-compatible server someone else runs (attach mode): nothing to start or
    restart; waiting for it means polling its health."""

    def __init__(self, base_url: str, *, served_model_name: str | None = None, in_flight: int = 16):
        url = base_url.rstrip("/")
        self._base_url = url if url.endswith("/v1") else f"{url}/v1"
        self._served_model_name = served_model_name
        self._in_flight = in_flight

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def served_model_name(self) -> str | None:
        return self._served_model_name

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            ok, model = probe_server(self._base_url)
            if ok:
                self._served_model_name = self._served_model_name or model
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def metrics(self) -> dict[str, float]:
        return read_metrics(self._base_url)

    def __repr__(self) -> str:
        return f"RemoteEndpoint({self._base_url!r})"


class ServerState(StrEnum):
    NEW = "new"
    STARTING = "starting"
    READY = "ready"
    RESTARTING = "restarting"
    FAILED = "failed"
    STOPPED = "stopped"


_LIVE: weakref.WeakSet[VLLMServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        server.stop(timeout_s=5.0)


class VLLMServer:
    """One supervised server process (``vllm serve`` or any OpenAI-compatible command).

    ``command`` may contain ``{host}`` and ``{port}``; ``port=0`` picks a free port once
    (restarts reuse it, so clients keep their URL).

    Example:
        >>> cmd = ["vllm", "serve", "/models/chandra", "--port", "{port}"]
        >>> server = VLLMServer(cmd, port=8000)
        >>> server.base_url
        'http://127.0.0.1:8000/v1'
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        served_model_name: str | None = None,
        in_flight: int = 16,
        startup_timeout_s: float = 900.0,
        max_restarts: int = 2,
        health_interval_s: float = 1.0,
        unhealthy_after_s: float = 60.0,
        stop_timeout_s: float = 30.0,
        api_key: str | None = None,
    ) -> None:
        self.host = host
        #: required by the server (``VLLM_API_KEY`` in its environment: not on its command
        #: line, which every local user can read) and sent by every probe and client
        self.api_key = api_key
        self._template = list(command)
        self.port = 0
        self.command: list[str] = []
        self._use_port(port or free_port(host))
        self.env = dict(env or {})
        #: without a folder given, a private one (0700, a random name): a predictable name
        #: in the shared /tmp could be a link another user planted
        self.log_path = log_path or Path(tempfile.mkdtemp(prefix="folio-vllm-")) / "server.log"
        self._served_model_name = served_model_name
        self._in_flight = in_flight
        self.startup_timeout_s = startup_timeout_s
        self.max_restarts = max_restarts
        self.health_interval_s = health_interval_s
        self.unhealthy_after_s = unhealthy_after_s
        self.stop_timeout_s = stop_timeout_s
        self.restarts = 0
        self.generation = 0  # +1 each time a process becomes ready
        self.error: str | None = None
        self._state = ServerState.NEW
        self._cond = threading.Condition()
        self._proc_lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_fh: IO[bytes] | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _use_port(self, port: int) -> None:
        self.port = port
        self.command = [  # not str.format: JSON arguments are full of braces
            part.replace("{host}", self.host).replace("{port}", str(port)) for part in self._template
        ]

    # --- Endpoint ------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def served_model_name(self) -> str | None:
        return self._served_model_name

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def state(self) -> ServerState:
        return self._state

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None else None

    def wait_ready(self, timeout_s: float) -> bool:
        """True once a process is serving; blocks through a restart; False when the
        server failed for good, was stopped, or ``timeout_s`` passed."""
        self._notice_exit()
        with self._cond:
            self._cond.wait_for(
                lambda: self._state in (ServerState.READY, ServerState.FAILED, ServerState.STOPPED),
                timeout=timeout_s,
            )
            return self._state is ServerState.READY

    # --- lifecycle -----------------------------------------------------------------------
    def start(self) -> Self:
        """Spawn and wait until healthy; EngineUnavailableError (with the log's tail)
        when the process exits or does not get healthy within ``startup_timeout_s``."""
        if self._thread is not None:
            raise RuntimeError("server already started")
        self._set_state(ServerState.STARTING)
        _LIVE.add(self)
        self._thread = threading.Thread(target=self._supervise, name=f"vllm-supervisor-{self.port}",
                                        daemon=True)
        self._thread.start()
        if not self.wait_ready(self.startup_timeout_s + 5.0):
            reason = self.error or f"not healthy after {self.startup_timeout_s:.0f} s"
            self.stop()
            raise EngineUnavailableError(f"vLLM server did not start: {reason}\n{self.log_tail()}")
        return self

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the server and its process group (SIGTERM, then SIGKILL); idempotent."""
        self._stopping.set()
        with self._proc_lock:
            self._kill(timeout_s if timeout_s is not None else self.stop_timeout_s)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=10.0)
        if self._log_fh is not None:
            self._log_fh.close()
            self._log_fh = None
        self._set_state(ServerState.STOPPED)
        _LIVE.discard(self)

    def restart(self) -> None:
        """Kill the current process; the supervisor starts a new one (counts as a restart)."""
        with self._proc_lock:
            self._kill(self.stop_timeout_s)

    def metrics(self) -> dict[str, float]:
        """Queue depth and KV cache use from ``/metrics`` (see :func:`read_metrics`)."""
        return read_metrics(self.base_url, api_key=self.api_key)

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"VLLMServer({self.base_url!r}, state={self._state.value}, pid={self.pid})"

    # --- supervisor ----------------------------------------------------------------------
    def _set_state(self, state: ServerState) -> None:
        with self._cond:
            if self._state is ServerState.STOPPED and state is not ServerState.STOPPED:
                return
            self._state = state
            self._cond.notify_all()

    def _notice_exit(self) -> None:
        """A client saw a connection fail: if the process is gone, mark it restarting now
        instead of at the supervisor's next tick, so waiters block."""
        proc = self._proc
        if proc is not None and self._state is ServerState.READY and gone(proc):
            self._set_state(ServerState.RESTARTING)

    def _supervise(self) -> None:
        try:
            if not self._spawn_and_wait():
                return
            last_ok = time.monotonic()
            while not self._stopping.wait(self.health_interval_s):
                proc = self._proc
                if proc is not None and not gone(proc):
                    if self._verdict(proc) is ListenerVerdict.OURS and probe_server(
                            self.base_url, timeout_s=min(5.0, self.unhealthy_after_s),
                            api_key=self.api_key)[0]:
                        last_ok = time.monotonic()
                        continue
                    if time.monotonic() - last_ok < self.unhealthy_after_s:
                        continue
                    log.warning("vLLM server %s unhealthy for %.0f s: killing it",
                                self.base_url, self.unhealthy_after_s)
                code = proc.poll() if proc is not None else None
                if self._stopping.is_set():
                    return
                self._set_state(ServerState.RESTARTING)
                with self._proc_lock:
                    self._kill(self.stop_timeout_s)  # the rest of the group, or a hung server
                if self.restarts >= self.max_restarts:
                    self._fail(f"exited (code {code}) and {self.restarts} restart(s) are used up")
                    return
                self.restarts += 1
                log.warning("vLLM server %s exited (code %s); restart %d of %d",
                            self.base_url, code, self.restarts, self.max_restarts)
                if not self._spawn_and_wait():
                    return
                last_ok = time.monotonic()
        except Exception as exc:  # the supervisor must never die silently
            log.exception("vLLM supervisor failed")
            self._fail(f"supervisor error: {exc}")

    def _fail(self, reason: str) -> None:
        self.error = reason
        with self._proc_lock:
            self._kill(self.stop_timeout_s)
        self._set_state(ServerState.FAILED)

    def _verdict(self, proc: subprocess.Popen[bytes]) -> ListenerVerdict:
        """Whose socket the server's address reaches: the started process group's, another
        process's (a squatter that bound the port first), or nobody's yet."""
        return url_verdict(proc.pid, self.base_url)

    def _spawn_and_wait(self) -> bool:
        """Start the process and wait until it alone serves its port, then for its health.
        Nothing (no key, no page) is sent before the kernel shows the listening socket is
        the started process's; another process listening there means a new port, up to
        :data:`PORT_ATTEMPTS` times (clients read :attr:`base_url` per request)."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            outcome = self._start_on_port()
            if outcome != "squatted":
                return outcome == "ready"
            log.warning("another process listens on port %d of the vLLM server (attempt %d of "
                        "%d): starting it on another port", self.port, attempt, PORT_ATTEMPTS)
            with self._proc_lock:
                self._kill(self.stop_timeout_s)
            self._use_port(free_port(self.host))
        self._fail(f"another process listened on each of {PORT_ATTEMPTS} ports picked for it "
                   f"(log: {self.log_path})")
        return False

    def _start_on_port(self) -> str:
        """"ready", "failed" (or stopped), or "squatted" (another process listens)."""
        with self._proc_lock:
            if self._stopping.is_set():
                return "failed"
            self._proc = self._spawn()
        proc = self._proc
        deadline = time.monotonic() + self.startup_timeout_s
        while not self._stopping.is_set():
            verdict = self._verdict(proc)
            if verdict is ListenerVerdict.FOREIGN:
                return "squatted"
            code = proc.poll()
            if code is not None:
                self._fail(f"process exited with code {code} during start-up (log: {self.log_path})")
                return "failed"
            if verdict is ListenerVerdict.NONE:
                ok, model = False, None
            else:
                ok, model = probe_server(self.base_url, api_key=self.api_key)
            if ok:
                self._served_model_name = self._served_model_name or model
                self.generation += 1
                self._set_state(ServerState.READY)
                log.info("vLLM server ready at %s (pid %s, generation %d)",
                         self.base_url, proc.pid, self.generation)
                return "ready"
            if time.monotonic() > deadline:
                self._fail(f"not healthy after {self.startup_timeout_s:.0f} s (log: {self.log_path})")
                return "failed"
            self._stopping.wait(min(1.0, self.health_interval_s))
        return "failed"

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        if self._log_fh is None:
            self._log_fh = open_log(self.log_path)
        self._log_fh.write(f"\n=== folio: starting {' '.join(self.command)}\n".encode())
        self._log_fh.flush()
        argv = list(self.command)
        if sys.platform.startswith("linux"):
            argv = [sys.executable, "-S", "-c", LAUNCHER, str(os.getpid()), *argv]
        # the run's secrets stay out of a server that outlives it (docs/security.md)
        env = {**child_env(keep=MODEL_HUB_SECRETS), **self.env}
        if self.api_key:
            env["VLLM_API_KEY"] = self.api_key
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=self._log_fh, stderr=subprocess.STDOUT,
            env=env, start_new_session=True, close_fds=True,
        )
        log.info("started %s (pid %d, log %s)", self.command[0], proc.pid, self.log_path)
        return proc

    def _kill(self, timeout_s: float) -> None:
        """Stop the process group (caller holds _proc_lock)."""
        if self._proc is not None:
            kill_group(self._proc, timeout_s)


# --- the endpoint a flow run is using ----------------------------------------------------
_ACTIVE: list[Endpoint] = []
_ACTIVE_LOCK = threading.Lock()


def register_endpoint(endpoint: Endpoint) -> None:
    """Make ``endpoint`` what :func:`active_endpoint` returns (the task runner calls
    this; engines built by the pipeline's own thread pools, which do not carry context
    variables, find the server this way)."""
    with _ACTIVE_LOCK:
        _ACTIVE.append(endpoint)


def unregister_endpoint(endpoint: Endpoint) -> None:
    with _ACTIVE_LOCK:
        for i in range(len(_ACTIVE) - 1, -1, -1):
            if _ACTIVE[i] is endpoint:
                del _ACTIVE[i]
                return


def active_endpoint() -> Endpoint | None:
    """The most recently registered endpoint still in use, or None."""
    with _ACTIVE_LOCK:
        return _ACTIVE[-1] if _ACTIVE else None
