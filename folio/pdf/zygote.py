"""Fork page workers from one pre-imported process instead of starting Python each time.

Starting ``python -m folio.pdf.worker_child`` costs about half a second of CPU (interpreter,
pydantic, pypdfium2 and PIL imports) for every probe and every page batch. Dozens of
documents starting at once spend seconds of every core on it, and on a GPU box that is
what keeps the first pages from the GPU. The zygote is one single-threaded child of the
parent that imports the page worker once and then forks a fresh child per request: the
same isolation (a process of its own in a process group of its own, ``RLIMIT_AS`` set in
the child, killed with its group), a few milliseconds to start.

Page workers can yield the CPU to a co-located server (``limits.worker_nice``, off by
default). They are bulk work (rendering, a text layer, the layout model); a vLLM server's
front end on the same host decodes the images the GPU waits for, and at a run's start
folio's render burst runs beside it. With ``nice`` above 0 the zygote leads a session of
its own, sets that session's scheduler autogroup and its own nice value to ``nice``
(:mod:`folio.cpu_priority`), and every child inherits both. Linux's autogroups (on by
default on most distributions) share a busy CPU equally between sessions, whatever the
nice values inside them, so the session is what makes the courtesy reach the server's;
one session for all page workers, not one each: a session per child weighed as much as
the whole server (olmOCR 2 on one H200: the pipeline at 0.919x of the server's own
pages/s, against 0.943x with the children in folio's session).

Why off by default: on that H200's 16 cores the render burst left cores free (10-14 busy
at its peak) and nice 10 measured the same as 0 (bench/results/engine_limit_issue29.json,
``nice_note``); and on a crowded host the niced workers yield to everything, folio's own
embedding threads and other programs included, so the GPU can wait for pages (two of the
suite's scheduler tests starved that way on two busy cores). With ``nice`` 0 the zygote
stays in folio's session.

Protocol, over an ``AF_UNIX`` ``SOCK_SEQPACKET`` pair (one send is one message): the parent
sends a header (op, cwd, environment) and the request with three file descriptors (the
child's stdout, its stderr and the write end of a status pipe); the zygote forks, answers
the child's pid once the child is in a process group of its own (so the parent can kill it by
process group at once), and when it reaps the child writes its exit code to the status pipe.
When the parent goes away (end of file on the socket) the zygote kills every child it
started and exits; a child dies with the zygote (``PR_SET_PDEATHSIG``).

``FOLIO_WORKER_START=exec`` turns it off: every child is a new interpreter.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from typing import IO, Any, NoReturn

from folio.child_processes import exited_children
from folio.cpu_priority import lower_this_process, lower_this_session
from folio.security.redaction import child_env
from folio.warm import client as warm

log = logging.getLogger(__name__)

MODE_ENV = "FOLIO_WORKER_START"
_MAX_MESSAGE = 1 << 20
_PID_BYTES = 8
_CODE_BYTES = 4


class ZygoteUnavailable(Exception):
    """The zygote could not fork a child (gone, or the request did not fit); use exec."""


class ForkedChild:
    """A child forked by the zygote, with the part of :class:`subprocess.Popen` the page
    worker uses: ``pid``, ``stdout``, ``poll()``, ``wait()``, ``returncode``."""

    def __init__(self, pid: int, stdout_fd: int, status_fd: int) -> None:
        self.pid = pid
        self.stdout: IO[bytes] = os.fdopen(stdout_fd, "rb", buffering=0)
        self._status = status_fd
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            poller = select.poll()  # not select.select: descriptors above 1023 are common here
            poller.register(self._status, select.POLLIN)
            if poller.poll(0):
                self._read_status()
        return self.returncode

    def wait(self) -> int:
        if self.returncode is None:
            self._read_status()
        assert self.returncode is not None
        return self.returncode

    def _read_status(self) -> None:
        data = b""
        while len(data) < _CODE_BYTES:
            chunk = os.read(self._status, _CODE_BYTES - len(data))
            if not chunk:
                break
            data += chunk
        os.close(self._status)
        # no status: the zygote died first, and the child with it (PR_SET_PDEATHSIG)
        self.returncode = (int.from_bytes(data, "big", signed=True) if len(data) == _CODE_BYTES
                           else -signal.SIGKILL)


class Zygote:
    """The parent's handle on one zygote process, whose children run at ``nice``."""

    def __init__(self, nice: int = 0) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # forked by the warm server where this process is one of its children (the
            # page worker's modules are imported there already), else a new interpreter
            proc = warm.spawn_module(
                "folio.pdf.zygote", ["{extra0}", str(nice)], extra_fds=[theirs.fileno()],
                new_session=nice > 0, env=child_env(),
            )
            self._proc: subprocess.Popen[Any] | warm.WarmChild = proc or subprocess.Popen(
                [sys.executable, "-m", "folio.pdf.zygote", str(theirs.fileno()), str(nice)],
                pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=child_env(),  # the run's secrets stay in the run (the password: stdin)
                # either way a Ctrl-C to the parent's group is the parent's to handle; a
                # session of its own when its autogroup is to yield (module docstring)
                **({"start_new_session": True} if nice > 0 else {"process_group": 0}),
            )
        finally:
            theirs.close()
        self.nice = nice
        self._sock = ours
        self._lock = threading.Lock()
        self._owner = os.getpid()

    def alive(self) -> bool:
        return self._owner == os.getpid() and self._proc.poll() is None

    def spawn(self, op: str, payload: bytes, stderr_fd: int) -> ForkedChild:
        """Fork a page worker running ``op`` on ``payload`` (its stdin, in exec mode)."""
        header = json.dumps({"op": op, "cwd": os.getcwd(), "env": _environment()}).encode()
        message = len(header).to_bytes(4, "big") + header + payload
        out_r, out_w = os.pipe()
        status_r, status_w = os.pipe()
        try:
            with self._lock:
                socket.send_fds(self._sock, [message], [out_w, stderr_fd, status_w])
                reply = self._sock.recv(_PID_BYTES)
        except OSError as err:
            os.close(out_r)
            os.close(status_r)
            raise ZygoteUnavailable(str(err)) from err
        finally:
            os.close(out_w)
            os.close(status_w)
        pid = int.from_bytes(reply, "big", signed=True) if len(reply) == _PID_BYTES else 0
        if pid <= 0:
            os.close(out_r)
            os.close(status_r)
            raise ZygoteUnavailable("the zygote did not fork" if reply else "the zygote is gone")
        return ForkedChild(pid, out_r, status_r)

    def close(self) -> None:
        self._sock.close()  # end of file: the zygote kills its children and exits
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def _environment() -> dict[str, str]:
    """The child's environment: os.environ without the run's secrets (a page worker parses
    hostile files: it must hold no password, key or login; the PDF password reaches it on
    stdin). Another thread changing os.environ mid-copy makes the copy retry."""
    while True:
        try:
            return child_env(dict(os.environ))
        except RuntimeError:  # "dictionary changed size during iteration"
            continue


#: this process's zygotes by the nice value of their children (one, unless two
#: configurations with different ``limits.worker_nice`` run in one process)
_zygotes: dict[int, Zygote] = {}
_broken = False
_guard = threading.Lock()


def spawn(op: str, payload: bytes, stderr_fd: int, nice: int = 0) -> ForkedChild | None:
    """A forked page worker at ``nice``, or None when the caller should start an
    interpreter instead (``FOLIO_WORKER_START=exec``, not Linux, the zygote could not be
    started, or it failed this request: the next request starts a new one)."""
    zygote = _running(nice)
    if zygote is None:
        return None
    try:
        return zygote.spawn(op, payload, stderr_fd)
    except ZygoteUnavailable as err:
        log.warning("page worker zygote: %s; starting an interpreter for this child", err)
        with _guard:
            if _zygotes.get(nice) is zygote:
                zygote.close()
                del _zygotes[nice]
        return None


def prestart(nice: int = 0) -> None:
    """Start the zygote for children at ``nice`` now, without waiting for it: its imports
    (half a second to a second of one core) then overlap the run's own start instead of
    delaying the first probe, which every document's preparation waits on."""
    _running(nice)


def _running(nice: int) -> Zygote | None:
    """The live zygote for ``nice``, started if need be; None when children are to be
    started as interpreters (``FOLIO_WORKER_START=exec``, not Linux, no zygote starts)."""
    global _broken
    if os.environ.get(MODE_ENV, "fork") == "exec" or sys.platform != "linux" or _broken:
        return None
    with _guard:
        zygote = _zygotes.get(nice)
        if zygote is None or not zygote.alive():
            try:
                zygote = _zygotes[nice] = Zygote(nice)
            except OSError as err:
                log.warning("page worker zygote did not start (%s); starting interpreters", err)
                _broken = True
                return None
        return zygote


def current(nice: int = 0) -> Zygote | None:
    """The zygote that forks children at ``nice``, if one has started."""
    with _guard:
        return _zygotes.get(nice)


@atexit.register
def shutdown() -> None:
    """Stop this process's zygotes (and every child they still have)."""
    with _guard:
        for zygote in _zygotes.values():
            if zygote.alive():
                zygote.close()
        _zygotes.clear()


# --- the zygote process ---------------------------------------------------------------------


def serve(fd: int, nice: int = 0) -> None:
    """The zygote's loop: fork a child per request, report exits, stop at end of file.
    With ``nice`` above 0 (in a session of its own) its children yield the CPU."""
    if nice > 0:
        lower_this_session(nice)
        lower_this_process(nice)
    _preload_numpy()
    from folio.pdf import worker_child  # the point of the zygote: imported once, here

    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)  # SIGCHLD wakes the selector
    signal.signal(signal.SIGCHLD, lambda *_: None)
    status_fds: dict[int, int] = {}
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while True:
            ready = {key.fileobj for key, _ in selector.select()}
            if wake_r in ready:
                os.read(wake_r, 4096)
                _reap(status_fds)
            if sock in ready:
                data, fds, _, _ = socket.recv_fds(sock, _MAX_MESSAGE, 3)
                if not data:
                    break  # the parent is gone
                private = [sock.fileno(), wake_r, wake_w, selector.fileno()]
                pid = _fork(data, fds, status_fds, private, worker_child.run)
                sock.send(pid.to_bytes(_PID_BYTES, "big", signed=True))
    for pid in status_fds:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _reap(status_fds: dict[int, int]) -> None:
    for pid, status in exited_children():
        fd = status_fds.pop(pid, None)
        if fd is not None:
            try:
                os.write(fd, os.waitstatus_to_exitcode(status).to_bytes(_CODE_BYTES, "big", signed=True))
            except OSError:
                pass  # the parent closed its end: nobody is waiting
            os.close(fd)


def _fork(data: bytes, fds: list[int], status_fds: dict[int, int], private: list[int],
          run: Callable[[str, bytes], int]) -> int:
    """Fork one child; its pid, or 0 when the request was bad or fork failed."""
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return 0
    out_w, err_fd, status_w = fds
    size = int.from_bytes(data[:4], "big")
    header, payload = json.loads(data[4:4 + size]), data[4 + size:]
    ready_r, ready_w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        pid = -1
    if pid == 0:  # the child
        _child(header, payload, out_w, err_fd, ready_w,
               [*private, *status_fds.values(), status_w, ready_r], run)
    for fd in (ready_w, out_w, err_fd):
        os.close(fd)
    if pid < 0:
        os.close(ready_r)
        os.close(status_w)
        return 0
    os.read(ready_r, 1)  # its own process group first: the parent kills it by group
    os.close(ready_r)
    status_fds[pid] = status_w
    return pid


def _child(header: dict[str, object], payload: bytes, out_w: int, err_fd: int, ready_w: int,
           close: list[int], run: Callable[[str, bytes], int]) -> NoReturn:
    """In the forked child: become a page worker, never return."""
    code = 70
    try:
        os.setpgid(0, 0)
        os.write(ready_w, b"1")
        os.close(ready_w)
        _die_with_parent()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in close:
            os.close(fd)
        os.dup2(out_w, 1)
        os.dup2(err_fd, 2)
        os.close(out_w)
        os.close(err_fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(str(header["cwd"]))
        env = header["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        code = run(str(header["op"]), payload)
        sys.stdout.flush()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


#: thread-count variables of the BLAS libraries numpy may be built with
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _preload_numpy() -> None:
    """Import numpy once here for the children's layout model (a quarter of a second of
    CPU in every child otherwise: as much as detecting a page), with its BLAS held to
    the calling thread: OpenBLAS starts worker threads on import, and the zygote must
    stay single-threaded to fork safely. The layout model's pre- and post-processing is
    elementwise and never uses BLAS threads. onnxruntime is not preloaded: it starts a
    thread of its own on import (folio.pdf.page_layout imports it in the child)."""
    for name in _BLAS_THREADS:
        os.environ[name] = "1"  # this process only; children get the parent's environment
    import numpy  # noqa: F401


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this child when the (single-threaded) zygote dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 0)
