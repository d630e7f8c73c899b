"""A local Prefect server that ``folio ingest`` starts once and reuses.

Without ``PREFECT_API_URL``, Prefect starts a temporary server in every process that runs
a flow: several seconds before the first page of every CLI run. folio instead starts
``prefect server start`` in the background the first time (its own session, its own
``PREFECT_HOME``), and later runs attach to it: a rerun that finds everything done answers
in a couple of seconds, and the runs stay visible in the UI at the printed address. The
server stops after ``idle_s`` without a run holding a lease (default 30 minutes), or with
``python -m folio_prefect.deployments.local_server --stop``.

    FOLIO_PREFECT_SERVER=ephemeral   # per-process temporary server, as Prefect does
    FOLIO_PREFECT_SERVER_IDLE_S=600  # stop a reused server after 10 idle minutes
    FOLIO_PREFECT_SERVER_START_S=900 # how long a run waits for it to start (default 600)

The first start creates Prefect's database and imports its whole server: about 15 s on an
idle 2-core machine, more than 90 s on a loaded one. A run waits while the server's
process lives, saying so every ``PROGRESS_S``, up to ``FOLIO_PREFECT_SERVER_START_S``.

Layout under ``home`` (``~/.folio/prefect/<installation>`` by default, or
``FOLIO_PREFECT_HOME``): ``server.json`` (pids, port, URL, the installation that started
it), ``server.lock``, ``auth`` (the login), ``leases/<pid>`` (one per running CLI),
``server.log`` and Prefect's own database.

One installation, one server: the default home is named after the installation (folio's
version, the interpreter or virtualenv, the code's folder), so another checkout or
virtualenv never attaches to this one's server nor writes its runs into this database; a
home named by ``FOLIO_PREFECT_HOME`` whose running server another installation started is
refused with what to do.

Safe on a shared host (docs/security.md): the home is this user's private folder (0700,
owner and mode checked on every use); the server requires Prefect's basic auth with a
login made per home (``auth``, 0600) that folio's CLI sends without the user typing it;
the supervisor picks the port and starts Prefect on it, and a run uses the server only
once the kernel says the listening socket is held by the server process folio started
(:func:`folio.security.listeners.process_holds_listener`): a process that took the port
first is never sent a request, and the supervisor starts again on another port. The
server and its supervisor inherit none of the run's secrets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from folio.errors import ConfigError, TransientError
from folio.process_files import flocked, pid_alive, pid_owned, proc_start_time, write_atomic
from folio.security.listeners import ListenerVerdict, listener_verdict, process_holds_listener
from folio.security.private_dir import ensure_private_dir, read_or_make_secret
from folio.security.redaction import child_env

MODE_ENV = "FOLIO_PREFECT_SERVER"
#: the server's home (its state, leases, log and Prefect's database)
HOME_ENV = "FOLIO_PREFECT_HOME"
IDLE_ENV = "FOLIO_PREFECT_SERVER_IDLE_S"
DEFAULT_IDLE_S = 1800.0
START_ENV = "FOLIO_PREFECT_SERVER_START_S"
#: the first start on a loaded 2-core machine took over 90 s (the old fixed wait); the
#: wait ends sooner when the server's process dies
DEFAULT_START_S = 600.0
#: seconds between the "still starting" lines
PROGRESS_S = 10.0
#: the login file under the home: ``folio:<64 hex digits>``, 0600
AUTH_FILE = "auth"
#: ports the supervisor tries when another process holds the one it picked
PORT_ATTEMPTS = 3

#: ``progress(waited_s, url)`` while a run waits for the server to start
Progress = Callable[[float, str], None]


def start_timeout() -> float:
    """How long a run waits for the server to answer (FOLIO_PREFECT_SERVER_START_S).

    Raises:
        ConfigError: the variable is not a positive number.
    """
    from folio.errors import ConfigError

    raw = os.environ.get(START_ENV)
    if raw is None:
        return DEFAULT_START_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"{START_ENV}={raw!r}: seconds, a positive number")
    return value


def installation() -> dict[str, str]:
    """What makes two folio installations the same one: a server started by another
    (another version, virtualenv or checkout) is not reused."""
    from importlib import metadata

    try:
        version = metadata.version("folio")
    except metadata.PackageNotFoundError:
        version = "unknown"
    return {"folio": version, "python": sys.executable,
            "code": str(Path(__file__).resolve().parent.parent)}


def installation_id() -> str:
    blob = json.dumps(installation(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def default_home() -> Path:
    """``FOLIO_PREFECT_HOME``, else ``~/.folio/prefect/<installation id>``."""
    env = os.environ.get(HOME_ENV)
    return Path(env) if env else Path.home() / ".folio" / "prefect" / installation_id()


def auth_string(home: Path | None = None) -> str:
    """The login the server of ``home`` requires (``user:password``), made on first use;
    what the CLI sets as PREFECT_API_AUTH_STRING and what the UI asks for."""
    home = ensure_private_dir(home or default_home())
    with flocked(home / "auth.lock"):
        return read_or_make_secret(home / AUTH_FILE, prefix="folio:")


def attach(home: Path | None = None, *, idle_s: float | None = None,
           progress: Progress | None = None) -> tuple[str, bool]:
    """The API URL of this machine's folio Prefect server (started if none runs; the
    second value says whether this call started it), with a lease for this process until
    it exits or calls :func:`release`. ``progress`` hears about a wait for it to start.

    Raises:
        TransientError: the server did not become healthy (what to do, and its log).
        ConfigError: FOLIO_PREFECT_SERVER_START_S is not a number.
    """
    timeout_s = start_timeout()
    home = ensure_private_dir(home or default_home())
    idle = idle_s if idle_s is not None else float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S))
    (home / "leases").mkdir(exist_ok=True, mode=0o700)
    auth_string(home)  # before the supervisor starts: it reads it
    with flocked(home / "server.lock"):
        state = _read(home)
        running = bool(state and _alive(state))  # alive but not healthy yet: starting
        if running and state is not None and state.get("installation") != installation():
            raise ConfigError(
                f"the Prefect server in {home} was started by another folio installation "
                f"({state.get('installation')}); this one is {installation()}. Stop it "
                f"(python -m folio_prefect.deployments.local_server --stop --home {home}) or "
                f"give this installation a home of its own ({HOME_ENV}=another folder, or "
                f"unset it: each installation has its own by default)")
        started = not running
        if started or state is None:
            state = _spawn(home, idle)
        lease = home / "leases" / str(os.getpid())
        write_atomic(lease, json.dumps({"pid": os.getpid(), "start": proc_start_time(os.getpid())}))
    state = _wait_healthy(home, state, timeout_s=timeout_s, progress=progress)
    return str(state["url"]), started


def release(home: Path | None = None) -> None:
    """Drop this process's lease (the server stays for the next run)."""
    (((home or default_home()).absolute()) / "leases" / str(os.getpid())).unlink(missing_ok=True)


def stop(home: Path | None = None) -> bool:
    """Stop the server now; True if one was running."""
    home = (home or default_home()).absolute()
    state = _read(home)
    pid = state.get("supervisor_pid") if state else None
    if not state or not _alive(state) or not isinstance(pid, int) or not pid_owned(pid):
        return False
    os.kill(pid, signal.SIGTERM)
    return True


# --- the client side -------------------------------------------------------------------------


def _read(home: Path) -> dict[str, object] | None:
    try:
        data: dict[str, object] = json.loads((home / "server.json").read_text())
        return data
    except (OSError, ValueError):
        return None


def _alive(state: dict[str, object]) -> bool:
    pid, start = state.get("supervisor_pid"), state.get("supervisor_start")
    return isinstance(pid, int) and pid_alive(pid, start if isinstance(start, int) else None) \
        and pid_owned(pid)


def _verified(state: dict[str, object]) -> bool:
    """The server the state names is the process folio started, and it alone listens on
    the port: checked from the kernel's tables before any request is sent."""
    pid, port = state.get("server_pid"), state.get("port")
    return (isinstance(pid, int) and isinstance(port, int) and pid_owned(pid)
            and process_holds_listener(pid, port))


def _healthy(url: object) -> bool:
    # the standard library, not httpx: the server is this machine's plain-HTTP one, and an
    # httpx client builds a TLS context (the CA bundle loaded) on every call, a tenth of
    # a second of every CLI run's start
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy
    try:
        with opener.open(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):  # URLError, HTTPError and timeouts are OSErrors
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spawn(home: Path, idle_s: float) -> dict[str, object]:
    """Start the supervisor (the caller holds ``server.lock``, which the supervisor takes
    before it first writes the state: this first state is in place by then)."""
    argv = [sys.executable, "-m", "folio_prefect.deployments.local_server", "--serve", "--home", str(home),
            "--idle", str(idle_s)]
    root = str(Path(__file__).resolve().parent.parent)
    # none of the run's secrets (a PDF password, a DSN, S3 keys) in a process that lives on
    env = child_env(PYTHONPATH=os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    env.pop("PREFECT_API_URL", None)
    with (home / "server.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                cwd=home)
    state: dict[str, object] = {"supervisor_pid": proc.pid,
                                "supervisor_start": proc_start_time(proc.pid),
                                "installation": installation(), "started": time.time()}
    write_atomic(home / "server.json", json.dumps(state))
    return state


def _wait_healthy(home: Path, state: dict[str, object], *, timeout_s: float,
                  progress: Progress | None = None,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, object]:
    """Wait until the server is proven folio's (:func:`_verified`) and answers, while its
    supervisor lives, up to ``timeout_s``; ``progress`` every :data:`PROGRESS_S` (and once
    at the start when it is not up yet). Returns the state, with the URL the supervisor
    chose (it changes when the first port was taken)."""
    start = clock()
    told = None
    while True:
        current = _read(home)
        if current is not None and current.get("supervisor_pid") == state.get("supervisor_pid"):
            state = current
        url = str(state.get("url") or "")
        if url and _verified(state) and _healthy(url):
            return state
        waited = clock() - start
        if not _alive(state):
            why = "its process exited"
            break
        if waited >= timeout_s:
            why = f"it did not answer within {timeout_s:.0f} s ({START_ENV} sets the wait)"
            break
        if progress is not None and (told is None or waited - told >= PROGRESS_S):
            told = waited
            progress(waited, url)
        sleep(0.2)
    url = str(state.get("url") or "(no port yet)")
    log = home / "server.log"
    raise TransientError(
        f"the local Prefect server at {url} did not start: {why}; log {log}"
        f"{': ' + _last_words(log) if _last_words(log) else ''}. Run again (a slow first "
        f"start goes on in the background), set {START_ENV} higher, or use "
        f"{MODE_ENV}=ephemeral or PREFECT_API_URL")


def _last_words(log: Path) -> str:
    """The log's last line that says something (Prefect's start-up banner is ASCII art,
    which read as the reason when the tail was quoted)."""
    try:
        lines = log.read_text(errors="replace").splitlines()[-200:]
    except OSError:
        return ""
    for line in reversed(lines):
        text = line.strip()
        if sum(ch.isalpha() for ch in text) >= max(8, len(text) // 3):
            return text[-200:]
    return ""


# --- the supervisor ----------------------------------------------------------------------------


def ui_supported() -> bool:
    """Whether this FastAPI can serve Prefect's UI. Prefect 3.9 mounts it with
    ``FastAPI.frontend``, which older FastAPI releases lack although Prefect's requirements
    allow them (vLLM 0.26 installs one): its server then dies at start-up."""
    from fastapi import FastAPI

    return hasattr(FastAPI, "frontend")


def ui_enabled() -> bool:
    """Whether the local server serves Prefect's UI: as PREFECT_UI_ENABLED says when it is
    set, else where this FastAPI can serve it."""
    setting = os.environ.get("PREFECT_UI_ENABLED")
    if setting is not None:
        return setting.strip().lower() not in ("false", "0", "no", "off")
    return ui_supported()


def server_env(home: Path, port: int | None = None) -> dict[str, str]:
    """The server's environment: its own home, none of the run's secrets, its login
    required (``PREFECT_SERVER_API_AUTH_STRING``, from the home's ``auth`` file), browsers'
    cross-origin requests only from its own UI; the UI off where it cannot start (unless
    PREFECT_UI_ENABLED says otherwise), so a GPU host's runs still get their API."""
    env = child_env(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                    PREFECT_SERVER_API_AUTH_STRING=auth_string(home))
    if port is not None:
        env["PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS"] = f"http://127.0.0.1:{port}"
    if "PREFECT_UI_ENABLED" not in os.environ and not ui_supported():
        env["PREFECT_UI_ENABLED"] = "false"
        print("folio: this FastAPI cannot serve Prefect's UI (Prefect needs FastAPI.frontend): "
              "the local server serves its API only", file=sys.stderr, flush=True)
    return env


def _publish(home: Path, **fields: object) -> None:
    """Add ``fields`` to the state, if it is still this supervisor's."""
    with flocked(home / "server.lock"):
        state = _read(home) or {}
        if state.get("supervisor_pid") not in (None, os.getpid()):
            return
        state.update({"supervisor_pid": os.getpid(),
                      "supervisor_start": proc_start_time(os.getpid()),
                      "installation": installation(), **fields})
        write_atomic(home / "server.json", json.dumps(state))


def _start_verified(home: Path, stopping: dict[str, bool]) -> subprocess.Popen[bytes] | None:
    """Start ``prefect server start`` on a free port and wait until its process alone
    listens there; when it exits first (another process took the port between the pick
    and the start), try another port, :data:`PORT_ATTEMPTS` times in all."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        port = _free_port()
        url = f"http://127.0.0.1:{port}/api"
        _publish(home, port=port, url=url, server_pid=None)
        server = subprocess.Popen(
            [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
             "--port", str(port)], env=server_env(home, port), cwd=home,
            stdin=subprocess.DEVNULL, start_new_session=True)
        verdict = ListenerVerdict.NONE
        while server.poll() is None and not stopping["now"]:
            verdict = listener_verdict(server.pid, port)
            if verdict is ListenerVerdict.OURS:
                _publish(home, port=port, url=url, server_pid=server.pid)
                return server
            if verdict is ListenerVerdict.FOREIGN:  # taken first: it would never be ours
                _stop_group(server)
                break
            time.sleep(0.2)
        if stopping["now"]:
            return server
        print(f"folio: the Prefect server on port {port} "
              + ("found another process listening there" if verdict is ListenerVerdict.FOREIGN
                 else f"exited (code {server.returncode}) before listening")
              + f" (attempt {attempt} of {PORT_ATTEMPTS})", flush=True)
    return None


def serve(home: Path, idle_s: float) -> int:
    """Run ``prefect server start`` until no lease has been held for ``idle_s``."""
    stopping = {"now": False}

    def on_signal(*_: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    server = _start_verified(home, stopping)
    idle_since = time.monotonic()
    try:
        while server is not None and not stopping["now"] and server.poll() is None:
            if _live_leases(home):
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > idle_s:
                break
            time.sleep(1.0)
    finally:
        if server is not None:
            _stop_group(server)
        state = _read(home)
        if state and state.get("supervisor_pid") == os.getpid():
            (home / "server.json").unlink(missing_ok=True)
    return 0 if server is not None else 1


def _live_leases(home: Path) -> int:
    live = 0
    for lease in (home / "leases").glob("*"):
        try:
            data = json.loads(lease.read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(int(data["pid"]), data.get("start")):
            live += 1
        else:
            lease.unlink(missing_ok=True)
    return live


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", default=str(default_home()))
    ap.add_argument("--serve", action="store_true", help="(internal) run the supervisor")
    ap.add_argument("--idle", type=float, default=DEFAULT_IDLE_S)
    ap.add_argument("--stop", action="store_true", help="stop the running server")
    args = ap.parse_args()
    home = ensure_private_dir(Path(args.home))
    if args.serve:
        return serve(home, args.idle)
    if args.stop:
        print("stopped" if stop(home) else "no server running")
        return 0
    print(attach(home)[0])
    release(home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
