"""Great Expectations in a child process of the flow, off the flow's GIL.

Why: on a GPU run the flow's threads must keep sending pages while answers come back,
and GX is pure Python on pandas. At 1dabbb9 (one H200, olmOCR 2's shape) its runs were
13% of the flow's GIL samples and its import another 11%
(bench/results/engine_limit_runs/1dabbb9-olmocr2-default/summary.json). In a child both
happen on another interpreter: the flow builds the two small frames of a batch (pages,
blocks), sends them pickled, and gets back the failed expectations by (item, page).

The child lives as long as the flow process: it reads requests on stdin and exits when
stdin closes, so it never outlives its parent. A child that dies (out of memory, a bug in
a native library) is started again once for the same request; a second death is a
:class:`~folio.errors.WorkerCrashedError` with the tail of its stderr, and GX's own
failure on an expectation comes back as the :class:`~folio.errors.FolioError` it is.
Data Docs builds stay in the flow (they only run for documents with quarantined pages).

Protocol: each message is an 8-byte big-endian length, then a pickle. Both ends are
folio's own code; nothing from a document is unpickled that a document could shape
beyond the frames' values.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from folio.errors import FolioError, TimeoutExpired, WorkerCrashedError
from folio.security.redaction import child_env
from folio.warm import client as warm

if TYPE_CHECKING:
    import pandas as pd

    from folio.checks.validation_gx import ExpectationSpec, Table

log = logging.getLogger(__name__)

#: a batch's GX runs take about a second; a child silent this long is stuck
REPLY_TIMEOUT_S = 600.0
#: how long a child whose stdin was closed may take to exit before it is killed
STOP_WAIT_S = 20.0
_HEADER = 8


class ValidationChild:
    """One child process running GX, shared by the flow's threads (one request at a time:
    GX runs one at a time anyway)."""

    def __init__(self, reply_timeout_s: float = REPLY_TIMEOUT_S) -> None:
        self.reply_timeout_s = reply_timeout_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | warm.WarmChild | None = None
        self._stderr: IO[bytes] | None = None
        self.starts = 0  # children started, for tests and logs

    def start(self) -> None:
        """Start the child now (it imports GX while the flow works); idempotent."""
        with self._lock:
            self._ensure()

    def failures(self, frames: dict[Table, pd.DataFrame], specs: list[ExpectationSpec],
                 run_name: str) -> dict[tuple[int, int], list[str]]:
        """The failures :func:`folio.checks.validation_gx.failures_here` finds, found in the child.

        Raises:
            FolioError: GX itself failed on an expectation (``validation-error``).
            WorkerCrashedError: the child died twice on this request.
            TimeoutExpired: the child did not answer within ``reply_timeout_s``.
        """
        request = pickle.dumps((frames, specs, run_name), protocol=pickle.HIGHEST_PROTOCOL)
        with self._lock:
            for attempt in (1, 2):
                proc = self._ensure()
                try:
                    reply = self._exchange(proc, request)
                except (OSError, EOFError) as exc:
                    tail = self._stop()
                    if attempt == 2:
                        raise WorkerCrashedError(
                            f"validation child died twice ({exc}): {tail}") from exc
                    log.warning("validation child died (%s); starting another: %s", exc, tail)
                    continue
                status, *rest = reply
                if status == "ok":
                    failures: dict[tuple[int, int], list[str]] = rest[0]
                    return failures
                code, message = rest
                raise FolioError(message, code=code)
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            self._stop()

    # --- the parent's side -------------------------------------------------------------
    def _ensure(self) -> subprocess.Popen[bytes] | warm.WarmChild:
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        # a file, not a pipe, so a chatty child never blocks on it
        self._stderr = tempfile.TemporaryFile()
        # forked by the warm server where this process is one of its children (GX is
        # imported there already: no 3-4 s import), else a new interpreter
        self._proc = warm.spawn_module(
            "folio.checks.validation_child", [], pipe_stdin=True, pipe_stdout=True,
            stderr=self._stderr.fileno(), env=child_env(),
        ) or subprocess.Popen(
            [sys.executable, "-m", "folio.checks.validation_child"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=child_env(),
        )
        self.starts += 1
        log.debug("validation child pid %d started", self._proc.pid)
        return self._proc

    def _exchange(self, proc: subprocess.Popen[bytes] | warm.WarmChild, request: bytes) -> Any:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(len(request).to_bytes(_HEADER, "big") + request)
        proc.stdin.flush()
        deadline = time.monotonic() + self.reply_timeout_s
        fd = proc.stdout.fileno()
        size = int.from_bytes(_read_exact(fd, _HEADER, deadline, self._kill), "big")
        return pickle.loads(_read_exact(fd, size, deadline, self._kill))

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()

    def _stop(self) -> str:
        """End the child (closing its stdin ends a healthy one); its stderr's tail."""
        tail = ""
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                # a healthy child exits at once; on a machine loaded tenfold its
                # interpreter's teardown (pandas, GX) took over 5 s
                proc.wait(timeout=STOP_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if self._stderr is not None:
            self._stderr.seek(0)
            tail = self._stderr.read()[-600:].decode(errors="replace").strip()
            self._stderr.close()
            self._stderr = None
        return tail or "(no output)"


def _read_exact(fd: int, size: int, deadline: float, on_timeout: Any) -> bytes:
    chunks: list[bytes] = []
    left = size
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while left:
            wait = deadline - time.monotonic()
            if wait <= 0 or not selector.select(wait):
                on_timeout()
                raise TimeoutExpired(f"validation child did not answer in time ({size} bytes)")
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the validation child closed its output")
            chunks.append(chunk)
            left -= len(chunk)
    return b"".join(chunks)


class ChildPool:
    """The flow process's validation children, each serving one request at a time.

    Why more than one: the last documents of a GPU run end within seconds of each other,
    and with one child each waited for the batch before its own (40 documents validated
    after the engine's last page, 2-2.5 s each, on one H200). With two, a batch starts as
    soon as it gathers while the one before it is still running.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: list[ValidationChild] = []
        self._free: queue.SimpleQueue[ValidationChild] = queue.SimpleQueue()

    def ensure(self, n: int) -> ChildPool:
        """At least ``n`` children (not started yet: :meth:`start`, or the first request)."""
        with self._lock:
            while len(self._children) < n:
                child = ValidationChild()
                self._children.append(child)
                self._free.put(child)
        return self

    @property
    def children(self) -> list[ValidationChild]:
        with self._lock:
            return list(self._children)

    def start(self) -> None:
        """Start every child now (each imports GX while the flow works); idempotent."""
        for child in self.children:
            child.start()

    def failures(self, frames: dict[Table, pd.DataFrame], specs: list[ExpectationSpec],
                 run_name: str) -> dict[tuple[int, int], list[str]]:
        """:meth:`ValidationChild.failures` in the first child free (waits for one)."""
        child = self._free.get()
        try:
            return child.failures(frames, specs, run_name)
        finally:
            self._free.put(child)


_SHARED = ChildPool()


def shared_children(n: int = 1) -> ChildPool:
    """The process's validation children, at least ``n`` of them (one pool per flow
    process; a run asking for more than an earlier run did adds children)."""
    return _SHARED.ensure(max(1, n))


# --- the child's side ------------------------------------------------------------------
def _serve(inp: IO[bytes], out: IO[bytes]) -> None:
    import great_expectations  # noqa: F401  (imported before the first request arrives)

    from folio.checks import validation_gx

    while True:
        header = inp.read(_HEADER)
        if len(header) < _HEADER:
            return  # the parent closed stdin (or died): done
        frames, specs, run_name = pickle.loads(inp.read(int.from_bytes(header, "big")))
        try:
            reply: tuple[Any, ...] = ("ok", validation_gx.failures_here(frames, specs, run_name)[0])
        except FolioError as err:
            reply = ("error", err.code, str(err))
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(len(data).to_bytes(_HEADER, "big") + data)
        out.flush()


def main() -> None:
    # the protocol owns the real stdout; anything GX or pandas prints goes to stderr
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    main()
