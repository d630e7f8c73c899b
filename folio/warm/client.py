"""Reach (or start) the warm server and run something in a child of it.

:func:`run_command` is for a launcher (the ``folio`` command, a worker's flow-run
command): the child takes this process's standard streams, environment, working folder
and umask; signals sent to this process are passed on to it; its exit status becomes this
process's. :func:`spawn_module` starts a helper process of a run (the validation child,
the page-worker zygote) the same way, with pipes of the caller's choosing, and returns a
handle with what the caller uses of :class:`subprocess.Popen`.

Each returns None where no warm server can be used (``FOLIO_WARM=0``, not Linux, the
server would not start, the request was refused): the caller then starts Python as
before. Nothing is lost either way; only the start-up time differs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from folio.errors import FolioError
from folio.warm.identity import code_stamp, fingerprint, server_env, socket_dir
from folio.warm.wire import MAX_REQUEST, SOCKET_ENV, Request, recv_int, send_request

log = logging.getLogger(__name__)

ENABLE_ENV = "FOLIO_WARM"
IDLE_ENV = "FOLIO_WARM_IDLE_S"
#: True in a process forked by a warm server (set by :func:`enter_child`): its
#: own commands run where they are, its helpers are forked by the same server
IN_CHILD = False
#: the caller's parent, for its child: a warm child's own parent is the server, but a
#: flow run's shared GPU server must end with the worker that started the run's launcher
#: (flows/vllm_runner.flow_run_owner); the request carries it in :data:`PARENT_ENV`, which
#: :func:`enter_child` moves here (so the child's own children do not inherit it)
CALLER_PARENT_PID = 0
PARENT_ENV = "FOLIO_WARM_PARENT_PID"
DEFAULT_IDLE_S = 3600.0
#: how long a first request waits for a new server's imports (minutes on a crowded host)
START_TIMEOUT_S = 180.0
#: signals passed on to the child; a terminal's go to its whole process group
_RELAYED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCONT)
_TO_GROUP = (signal.SIGINT, signal.SIGQUIT, signal.SIGWINCH)


def enter_child() -> None:
    """Mark this process as a warm child (a preload's ``after_fork`` calls it, once the
    caller's environment is in place): its commands run where they are, its helpers are
    forked by the same server, and :func:`parent_pid` answers its caller's parent."""
    global IN_CHILD, CALLER_PARENT_PID
    parent = os.environ.pop(PARENT_ENV, "")
    CALLER_PARENT_PID = int(parent) if parent.isdigit() else 0
    IN_CHILD = True


def enabled() -> bool:
    """Whether requests go to a warm server (``FOLIO_WARM=0`` turns it off)."""
    off = os.environ.get(ENABLE_ENV, "1").strip().lower() in ("0", "false", "no", "off")
    return not off and sys.platform.startswith("linux") and hasattr(socket, "send_fds")


def connect(preload: Sequence[str]) -> socket.socket | None:
    """A connection to the server for this caller, started if need be; None if no
    server could be started (the reason is logged)."""
    folder = socket_dir()
    name = fingerprint(os.environ, preload)
    path = folder / f"{name}.sock"
    sock = _connect(path)
    if sock is not None:
        return sock
    lock = os.open(folder / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one starter; the others wait for its server
        return _connect(path) or _start(path, preload)
    finally:
        os.close(lock)


def run_command(kind: str, target: str, preload: Sequence[str],
                argv: Sequence[str] | None = None) -> int | None:
    """Run ``target`` in a warm child as this process would; its exit status (minus the
    signal that ended it), or None where the caller must run it itself."""
    if IN_CHILD or not enabled():
        return None
    request = Request(kind=kind, target=target, argv=list(argv or sys.argv),
                      cwd=os.getcwd(), umask=_umask(), path0=sys.path[0] if sys.path else "",
                      **_placement())
    data = request.encode()
    if len(data) > MAX_REQUEST:
        return None
    try:
        sock = connect(preload)
    except (OSError, FolioError) as err:  # an unsafe socket folder among them
        log.warning("warm server: %s; starting Python for this command", err)
        return None
    if sock is None:
        return None
    pending: list[int] = []
    pid = 0

    def relay(sig: int, _frame: object) -> None:
        if pid <= 0:
            pending.append(sig)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig in _TO_GROUP:
                os.killpg(pid, sig)
            else:
                os.kill(pid, sig)

    before = {sig: signal.signal(sig, relay) for sig in (*_RELAYED, *_TO_GROUP)}
    try:
        with sock:
            # the child takes this process's place: its parent is this process's parent
            send_request(sock, request, [0, 1, 2],
                         {**os.environ, PARENT_ENV: str(os.getppid())})
            pid = recv_int(sock) or 0
            if pid <= 0:
                return None  # refused before anything ran: the caller runs it
            for sig in pending:
                relay(sig, None)
            status = recv_int(sock)
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
    if status is None:
        print(f"folio: the warm server ended while process {pid} ran this command",
              file=sys.stderr)
        return 1
    return status


def parent_pid() -> int:
    """This process's parent as its caller sees it: ``os.getppid()``, but in a warm child
    the parent the process would have had without the warm server (a launcher's parent, a
    helper's caller)."""
    if IN_CHILD and CALLER_PARENT_PID > 0:
        return CALLER_PARENT_PID
    return os.getppid()


def exit_with(status: int) -> None:
    """End this process as the child ended: its exit code, or its signal."""
    if status < 0:
        sig = -status
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    raise SystemExit(status)


def _placement() -> dict[str, Any]:
    """This process's CPU affinity and niceness, for the child to take (wire.Request)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {"cpus": cpus, "nice": os.getpriority(os.PRIO_PROCESS, 0)}


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _retire_stale(ours: Path) -> None:
    """Ask the servers of this folder that run other code (an edited checkout, a new
    package) to stop taking requests and end once their children are done: each holds a
    few hundred MB, and nothing would ask them again."""
    mine = code_stamp()  # this process's code is the new server's: same stamp
    for stamp in ours.parent.glob("*.json"):
        if stamp.with_suffix(".sock") == ours:
            continue
        try:
            facts = json.loads(stamp.read_text())
            pid = int(facts["pid"])
            # that pid is still that server (never a reused pid: SIGUSR1 ends most programs)
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if facts.get("code") != mine and b"folio.warm.server" in command \
                    and str(stamp.with_suffix(".sock")).encode() in command:
                os.kill(pid, signal.SIGUSR1)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # gone already, or not a server's
        with contextlib.suppress(OSError):
            if not stamp.with_suffix(".sock").exists():
                stamp.unlink()


def _start(path: Path, preload: Sequence[str]) -> socket.socket | None:
    idle = os.environ.get(IDLE_ENV) or str(DEFAULT_IDLE_S)
    if sys.stderr.isatty():  # why this one command takes seconds longer than the next
        print("folio: starting the warm process later commands are forked from (once after "
              f"a start or an update; {ENABLE_ENV}=0 for none)", file=sys.stderr, flush=True)
    logfile = path.with_suffix(".log")
    fd = os.open(logfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "folio.warm.server", str(path), ",".join(preload), idle],
            env=server_env(os.environ), cwd="/", stdin=subprocess.DEVNULL, stdout=fd,
            stderr=fd, start_new_session=True)  # outlives this command; no terminal's signals
    finally:
        os.close(fd)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        sock = _connect(path)
        if sock is not None:
            proc.returncode = 0  # it runs on as a server: no "still running" warning
            _retire_stale(path)
            return sock
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    else:
        proc.kill()
    tail = logfile.read_text(errors="replace")[-2000:] if logfile.exists() else ""
    log.warning("the warm server did not start (%s): %s", proc.poll(), tail)
    return None


class WarmChild:
    """A helper process forked by the warm server, with what its callers use of
    :class:`subprocess.Popen`: ``pid``, ``stdin``, ``stdout``, ``poll``, ``wait``,
    ``kill``, ``returncode``. Its exit status comes over the connection (it is the
    server's child, not ours); closing the connection (this process ending) makes the
    server kill it."""

    def __init__(self, pid: int, sock: socket.socket, stdin: IO[bytes] | None,
                 stdout: IO[bytes] | None) -> None:
        self.pid = pid
        self.args = [f"warm child {pid}"]
        self.stdin = stdin
        self.stdout = stdout
        self.returncode: int | None = None
        self._sock = sock

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self._take(self._sock.recv(8, socket.MSG_DONTWAIT))
            except BlockingIOError:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._sock.settimeout(timeout)
            try:
                data = self._sock.recv(8)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self._sock.settimeout(None)
            self._take(data)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # never a reused pid: ours is known to be gone then
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _take(self, data: bytes) -> None:
        # end of file: the server is gone, and its children die with the connection
        self.returncode = int.from_bytes(data, "big", signed=True) if len(data) == 8 \
            else -signal.SIGKILL
        self._sock.close()


def spawn_module(module: str, args: Sequence[str], *, pipe_stdin: bool = False,
                 pipe_stdout: bool = False, stderr: int | None = None,
                 extra_fds: Sequence[int] = (), new_session: bool = False,
                 env: dict[str, str] | None = None) -> WarmChild | None:
    """``python -m module *args`` forked by the server that forked this process; None
    outside a warm child (or where the server refuses): the caller starts Python then.

    ``pipe_stdin``/``pipe_stdout``: a pipe to/from the child (``stdin``/``stdout`` of
    the handle), else /dev/null; ``stderr``: a descriptor for its stderr (else this
    process's); ``extra_fds`` are held by the child under their own numbers, named
    ``{extra0}``, ``{extra1}``... in ``args``."""
    path = os.environ.get(SOCKET_ENV)
    if not IN_CHILD or not path:
        return None
    ours: list[int] = []
    theirs: list[int] = []

    def stream(piped: bool, child_reads: bool) -> None:
        """The child's end of a pipe (ours kept), else /dev/null."""
        if not piped:
            theirs.append(os.open(os.devnull, os.O_RDONLY if child_reads else os.O_WRONLY))
            return
        r, w = os.pipe()
        theirs.append(r if child_reads else w)
        ours.append(w if child_reads else r)

    try:
        stream(pipe_stdin, child_reads=True)
        stream(pipe_stdout, child_reads=False)
        theirs.append(os.dup(stderr if stderr is not None else 2))
        request = Request(kind="module", target=module, argv=[module, *args],
                          cwd=os.getcwd(), umask=_umask(), path0=os.getcwd(),
                          new_session=new_session, **_placement())
        sock = _connect(Path(path))
        if sock is None:
            raise OSError(f"no warm server at {path}")
        try:
            send_request(sock, request, [*theirs, *extra_fds],
                         {**(env if env is not None else os.environ),
                          PARENT_ENV: str(os.getpid())})  # a helper: this is its parent
            pid = recv_int(sock) or 0
        except OSError:
            sock.close()
            raise
        if pid <= 0:
            sock.close()
            raise OSError("the warm server refused the request")
    except OSError as err:
        for fd in ours:
            os.close(fd)
        log.warning("warm server: %s; starting Python for %s", err, module)
        return None
    finally:
        for fd in theirs:
            os.close(fd)
    stdin = os.fdopen(ours.pop(0), "wb") if pipe_stdin else None
    stdout = os.fdopen(ours.pop(0), "rb") if pipe_stdout else None
    return WarmChild(pid, sock, stdin, stdout)
