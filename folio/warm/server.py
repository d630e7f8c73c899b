"""The warm server: imports the modules it is told once, then forks a child per request.

    python -m folio.warm.server SOCKET PRELOAD IDLE_S

Started by :mod:`folio.warm.client` (never by hand), in a session of its own, with its
caller's environment less secrets (:func:`folio.warm.identity.server_env`). A request's
own environment goes to its child through a pipe the server never reads
(:mod:`folio.warm.wire`). It listens on
``SOCKET`` (a folder only this user can enter; a connection from another user is closed
unread), imports the comma-separated ``PRELOAD`` modules, and then only forks: it never
runs a request itself. It ends after ``IDLE_S`` seconds without a request or a child.

Single-threaded on purpose, so that a fork copies no lock another thread holds: BLAS is
held to one thread here (OpenBLAS starts workers at numpy's import). LanceDB's background
event loop is the one thread a preload may start; LanceDB restarts it in a forked child
itself (``os.register_at_fork``), and the server never uses LanceDB, so the loop is idle
when a child is forked. A preload module may define ``after_fork()``: it runs in each
child once the caller's environment and working folder are in place (Prefect's settings
are read again there, for instance).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import io
import json
import os
import runpy
import selectors
import signal
import socket
import struct
import sys
import time
import traceback
import warnings
from types import ModuleType
from typing import NoReturn

from folio.child_processes import exited_children
from folio.warm.identity import code_stamp
from folio.warm.wire import ENV_FD, MAX_FDS, MAX_REQUEST, SOCKET_ENV, Request, read_env, send_int

#: thread-count variables of the BLAS libraries numpy may be built with
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
#: how long a connected client may take to send its request
REQUEST_TIMEOUT_S = 10.0


class Server:
    def __init__(self, path: str, preload: list[str], idle_s: float) -> None:
        self.path = path
        self.idle_s = idle_s
        self.modules: list[ModuleType] = []
        for name in BLAS_THREADS:
            os.environ.setdefault(name, "1")
        # LanceDB says so at every fork; the server never uses LanceDB (module docstring)
        warnings.filterwarnings("ignore", message="lancedb fork support", category=RuntimeWarning)
        for name in preload:
            self.modules.append(importlib.import_module(name))
        # the preloaded objects out of the collector's sight: a child's collections walked
        # every one of them, writing to (so copying) the pages it shares with the server
        gc.freeze()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead server's (the client holds the start lock)
        old = os.umask(0o177)
        try:
            self.sock.bind(path)
        finally:
            os.umask(old)
        self.sock.listen(64)
        self.inode = os.stat(path).st_ino
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        # retired (a newer server runs newer code): no new requests, out once idle
        self.retiring = False
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "retiring", True))
        self.children: dict[int, socket.socket] = {}  # pid -> its client's connection
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.sock, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        self.last = time.monotonic()

    def serve(self) -> None:
        try:
            while self.children or (time.monotonic() - self.last < self.idle_s
                                    and not self.retiring):
                if self.retiring and self.sock.fileno() >= 0:
                    self._stop_listening()
                for key, _ in self.selector.select(timeout=min(60.0, self.idle_s)):
                    if key.fileobj is self.sock:
                        self._accept()
                    elif key.fileobj == self.wake_r:
                        os.read(self.wake_r, 4096)
                        self._reap()
                    else:
                        self._client_event(key.data)
                if self.sock.fileno() >= 0 and self._replaced():
                    # our socket was removed (a cleaner of /tmp) or another server took its
                    # name: no new requests; the runs in progress finish first
                    self.retiring = True
        finally:
            self._close()

    # --- requests ------------------------------------------------------------------------
    def _accept(self) -> None:
        conn, _ = self.sock.accept()
        self.last = time.monotonic()
        fds: list[int] = []
        try:
            uid = struct.unpack("3i", conn.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
            if uid != os.geteuid():
                raise PermissionError(f"a connection from uid {uid}")
            conn.settimeout(REQUEST_TIMEOUT_S)
            data, fds, _, _ = socket.recv_fds(conn, MAX_REQUEST, MAX_FDS)
            request = Request.decode(data)
            if len(fds) <= ENV_FD:
                raise ValueError("a request without standard streams and environment")
            pid = self._fork(request, fds, conn)
        except (OSError, ValueError, TypeError) as err:
            print(f"folio warm server: request refused: {err}", file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                send_int(conn, 0)
            conn.close()
            return
        for fd in fds:
            os.close(fd)
        # what the server ran, for whoever looks at its log (never the environment)
        print(f"folio warm server: {pid} runs {request.target} in {request.cwd}",
              file=sys.stderr, flush=True)
        # counted among the children before the answer: a caller gone by now makes the
        # answer fail, and its child must be killed, not left running when an error
        # ends the server (it was: orphaned, nothing waiting for it)
        self.children[pid] = conn
        try:
            send_int(conn, pid)
        except OSError:  # the caller is gone: as when its connection closes later
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        conn.setblocking(False)
        self.selector.register(conn, selectors.EVENT_READ, pid)

    def _fork(self, request: Request, fds: list[int], conn: socket.socket) -> int:
        ready_r, ready_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            private = [self.sock.fileno(), self.wake_r, self.wake_w, self.selector.fileno(),
                       ready_r, *(c.fileno() for c in self.children.values()), conn.fileno()]
            _child(request, fds, ready_w, private, self.modules, self.path)
        os.close(ready_w)
        os.read(ready_r, 1)  # its own group (or session) first: a kill by group reaches it
        os.close(ready_r)
        return pid

    def _client_event(self, pid: int) -> None:
        conn = self.children.get(pid)
        if conn is None:
            return
        try:
            data = conn.recv(16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the client is gone: its child must not outlive it
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def _reap(self) -> None:
        for pid, status in exited_children():
            self.last = time.monotonic()
            conn = self.children.pop(pid, None)
            if conn is not None:
                self.selector.unregister(conn)
                with contextlib.suppress(OSError):
                    conn.setblocking(True)
                    send_int(conn, os.waitstatus_to_exitcode(status))
                conn.close()

    # --- lifetime ------------------------------------------------------------------------
    def _replaced(self) -> bool:
        try:
            return os.stat(self.path).st_ino != self.inode
        except OSError:
            return True

    def _stop_listening(self) -> None:
        self.selector.unregister(self.sock)
        if not self._replaced():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
        self.sock.close()

    def _close(self) -> None:
        if self.sock.fileno() >= 0:
            self._stop_listening()
        stamp = self.path.removesuffix(".sock") + ".json"
        with contextlib.suppress(OSError, ValueError):
            with open(stamp) as fh:
                if json.load(fh).get("pid") == os.getpid():
                    os.unlink(stamp)
        for pid, conn in self.children.items():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
            conn.close()


def _child(request: Request, fds: list[int], ready_w: int, private: list[int],
           modules: list[ModuleType], path: str) -> NoReturn:
    """In the forked child: become the caller's process, run the request, never return."""
    code, by_signal = 70, 0
    try:
        if request.new_session:
            os.setsid()
        else:
            os.setpgid(0, 0)
        os.write(ready_w, b"1")
        os.close(ready_w)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for fd in private:
            with contextlib.suppress(OSError):
                os.close(fd)
        env = read_env(fds[ENV_FD])
        extras = fds[ENV_FD + 1:]
        _take_streams(fds[:3], extras)
        os.umask(request.umask)
        _take_placement(request)
        os.chdir(request.cwd)
        os.environ.clear()
        os.environ.update(env)
        os.environ[SOCKET_ENV] = path  # its helpers are forked here too
        _reopen_std_streams()
        numbers = {f"{{extra{i}}}": str(fd) for i, fd in enumerate(extras)}
        sys.argv = [numbers.get(a, a) for a in request.argv]
        _name_process(request.target)
        if request.path0:
            sys.path[0] = request.path0
        for module in modules:
            hook = getattr(module, "after_fork", None)
            if callable(hook):
                hook()
        code = _run(request)
    except SystemExit as stop:
        code = _exit_code(stop)
    except KeyboardInterrupt:  # Ctrl-C (relayed to this group) not handled by the command
        traceback.print_exc()
        code, by_signal = 128 + signal.SIGINT, signal.SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        # the interpreter's own ending, as a process of its own would have it
        with contextlib.suppress(BaseException):
            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        if by_signal:  # as Python ends on an uncaught KeyboardInterrupt: by the signal
            signal.signal(by_signal, signal.SIG_DFL)
            os.kill(os.getpid(), by_signal)
        os._exit(code)


def _take_placement(request: Request) -> None:
    """The caller's CPU affinity and niceness (a forked child has the server's): a
    niceness lower than the server's needs privileges and is left as it is."""
    if request.cpus and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError, ValueError):
            os.sched_setaffinity(0, request.cpus)
    if request.nice is not None:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, request.nice)


def _name_process(target: str) -> None:
    """``folio:<module>`` as the child's name (``/proc/PID/comm``, what ``top`` and
    ``ps -o comm`` show; 15 bytes at most): every child's command line is the server's,
    so without it a flow run, a page worker and a validation child all read as the warm
    server (``folio:engine``: a worker's flow run, ``folio:cli``: a ``folio`` command,
    ``folio:zygote``: page workers, ``folio:validatio``: Great Expectations)."""
    module = target.partition(":")[0]
    name = f"folio:{module.rpartition('.')[2]}".encode()[:15]
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the name stays
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME


def _run(request: Request) -> int:
    if request.kind == "module":
        with warnings.catch_warnings():  # "found in sys.modules": preloaded, on purpose
            warnings.filterwarnings("ignore", category=RuntimeWarning, module="runpy")
            runpy.run_module(request.target, run_name="__main__", alter_sys=True)
        return 0
    module, _, name = request.target.partition(":")
    result = getattr(importlib.import_module(module), name)()
    return result if isinstance(result, int) else 0


def _exit_code(stop: SystemExit) -> int:
    if stop.code is None:
        return 0
    if isinstance(stop.code, int):
        return stop.code
    print(stop.code, file=sys.stderr)
    return 1


def _take_streams(streams: list[int], extras: list[int]) -> None:
    """The caller's stdin, stdout and stderr as this process's 0, 1 and 2."""
    for target, fd in enumerate(streams):
        if fd != target:
            os.dup2(fd, target)
    for fd in streams:
        if fd > 2 and fd not in extras:
            os.close(fd)
    for fd in extras:
        os.set_inheritable(fd, False)


def _reopen_std_streams() -> None:
    """``sys.stdin/stdout/stderr`` made again for the new 0, 1 and 2, as the interpreter
    makes them at its start (a terminal's stdout is line-buffered, a file's is not;
    ``PYTHONUNBUFFERED`` and ``PYTHONIOENCODING`` count)."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, _, errors = (os.environ.get("PYTHONIOENCODING") or "").partition(":")
    for name, fd, mode in (("stdin", 0, "r"), ("stdout", 1, "w"), ("stderr", 2, "w")):
        try:
            tty = os.isatty(fd)
            raw = io.FileIO(fd, mode + "b", closefd=False)
            buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
            stream = io.TextIOWrapper(
                buffered, encoding=encoding or "utf-8",
                errors=errors or ("backslashreplace" if name == "stderr" else "strict"),
                line_buffering=(tty or name == "stderr") and mode == "w",
                write_through=unbuffered and mode == "w")
        except OSError:
            continue
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def main() -> None:
    path, preload, idle_s = sys.argv[1], sys.argv[2], float(sys.argv[3])
    server = Server(path, [m for m in preload.split(",") if m], idle_s)
    print(f"folio warm server {os.getpid()}: ready on {path}", file=sys.stderr, flush=True)
    # who runs which code, for the next server to retire this one when the code changes
    stamp = {"pid": os.getpid(), "code": code_stamp()}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600),
              "w") as fh:
        json.dump(stamp, fh)
    os.replace(tmp, path.removesuffix(".sock") + ".json")
    server.serve()


if __name__ == "__main__":
    main()
