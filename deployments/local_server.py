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

Layout under ``home`` (``~/.folio/prefect`` by default): ``server.json`` (pid, port, URL),
``server.lock``, ``leases/<pid>`` (one per running CLI), ``server.log`` and Prefect's own
database.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from folio.errors import TransientError
from folio.process_files import flocked, pid_alive, proc_start_time, write_atomic

MODE_ENV = "FOLIO_PREFECT_SERVER"
IDLE_ENV = "FOLIO_PREFECT_SERVER_IDLE_S"
DEFAULT_IDLE_S = 1800.0
STARTUP_S = 90.0


def default_home() -> Path:
    return Path(os.environ.get("FOLIO_PREFECT_HOME", Path.home() / ".folio" / "prefect"))


def attach(home: Path | None = None, *, idle_s: float | None = None) -> tuple[str, bool]:
    """The API URL of this machine's folio Prefect server (started if none runs; the
    second value says whether this call started it), with a lease for this process until
    it exits or calls :func:`release`.

    Raises:
        TransientError: the server did not become healthy (its log's tail says why).
    """
    home = (home or default_home()).absolute()
    home.mkdir(parents=True, exist_ok=True)
    idle = idle_s if idle_s is not None else float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_S))
    (home / "leases").mkdir(exist_ok=True)
    with flocked(home / "server.lock"):
        state = _read(home)
        started = not (state and _alive(state))  # alive but not healthy yet: starting
        if started or state is None:
            state = _spawn(home, idle)
        lease = home / "leases" / str(os.getpid())
        write_atomic(lease, json.dumps({"pid": os.getpid(), "start": proc_start_time(os.getpid())}))
    _wait_healthy(home, state)
    return str(state["url"]), started


def release(home: Path | None = None) -> None:
    """Drop this process's lease (the server stays for the next run)."""
    (((home or default_home()).absolute()) / "leases" / str(os.getpid())).unlink(missing_ok=True)


def stop(home: Path | None = None) -> bool:
    """Stop the server now; True if one was running."""
    home = (home or default_home()).absolute()
    state = _read(home)
    pid = state.get("supervisor_pid") if state else None
    if not state or not _alive(state) or not isinstance(pid, int):
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
    return isinstance(pid, int) and pid_alive(pid, start if isinstance(start, int) else None)


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
    port = _free_port()
    url = f"http://127.0.0.1:{port}/api"
    argv = [sys.executable, "-m", "folio_prefect.deployments.local_server", "--serve", "--home", str(home),
            "--port", str(port), "--idle", str(idle_s)]
    root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (root, os.environ.get("PYTHONPATH", "")) if p)}
    env.pop("PREFECT_API_URL", None)
    with (home / "server.log").open("ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True, env=env,
                                cwd=home)
    state: dict[str, object] = {"supervisor_pid": proc.pid,
                                "supervisor_start": proc_start_time(proc.pid),
                                "port": port, "url": url, "started": time.time()}
    write_atomic(home / "server.json", json.dumps(state))
    return state


def _wait_healthy(home: Path, state: dict[str, object]) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if _healthy(state["url"]):
            return
        if not _alive(state):
            break
        time.sleep(0.2)
    tail = (home / "server.log").read_text(errors="replace")[-1500:] \
        if (home / "server.log").exists() else ""
    raise TransientError(f"the local Prefect server at {state['url']} did not start "
                         f"(log {home / 'server.log'}): {tail.strip()[-300:]}")


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


def server_env(home: Path) -> dict[str, str]:
    """The server's environment: its own home; the UI off where it cannot start (unless
    PREFECT_UI_ENABLED says otherwise), so a GPU host's runs still get their API."""
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    if "PREFECT_UI_ENABLED" not in os.environ and not ui_supported():
        env["PREFECT_UI_ENABLED"] = "false"
        print("folio: this FastAPI cannot serve Prefect's UI (Prefect needs FastAPI.frontend): "
              "the local server serves its API only", file=sys.stderr, flush=True)
    return env


def serve(home: Path, port: int, idle_s: float) -> int:
    """Run ``prefect server start`` until no lease has been held for ``idle_s``."""
    env = server_env(home)
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
         "--port", str(port)], env=env, cwd=home, stdin=subprocess.DEVNULL,
        start_new_session=True)
    stopping = {"now": False}

    def on_signal(*_: object) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    idle_since = time.monotonic()
    try:
        while not stopping["now"] and server.poll() is None:
            if _live_leases(home):
                idle_since = time.monotonic()
            elif time.monotonic() - idle_since > idle_s:
                break
            time.sleep(1.0)
    finally:
        _stop_group(server)
        state = _read(home)
        if state and state.get("supervisor_pid") == os.getpid():
            (home / "server.json").unlink(missing_ok=True)
    return 0


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
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--idle", type=float, default=DEFAULT_IDLE_S)
    ap.add_argument("--stop", action="store_true", help="stop the running server")
    args = ap.parse_args()
    home = Path(args.home).absolute()
    if args.serve:
        return serve(home, args.port, args.idle)
    if args.stop:
        print("stopped" if stop(home) else "no server running")
        return 0
    print(attach(home)[0])
    release(home)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
