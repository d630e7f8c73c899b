"""The cross-process in-flight bound of a shared server: a counting semaphore of flocked
slot files, one object per server per process.

Why: every flow run attached to one shared vLLM server (:mod:`folio.gpu.shared_server`)
must share the server's in-flight budget, and those runs are separate processes; a
``threading`` semaphore bounds only its own process. The slot files, their fork
handling and the per-process cache are a mechanism of their own, apart from the
supervisor state and leases.
"""

from __future__ import annotations

import fcntl
import logging
import os
import random
import threading
import time
import weakref
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["SlotSemaphore", "slot_semaphore"]

_SEMAPHORE_INSTANCES: weakref.WeakSet[SlotSemaphore] = weakref.WeakSet()


class SlotSemaphore:
    """A counting semaphore across processes: ``slots`` files, each held with a
    non-blocking ``flock``. Same API as the ``threading.BoundedSemaphore`` an engine uses
    (``with sem:``, ``acquire(blocking, timeout)``, ``release()``), so every run attached to
    one server shares one in-flight bound. A process that dies holding slots frees them: the
    kernel drops its locks.

    flock belongs to the open file description, and this process keeps one per slot, so two
    threads here would both "get" the same slot; an in-process set of held slots prevents it.

    Example:
        >>> import tempfile
        >>> sem = SlotSemaphore(Path(tempfile.mkdtemp()), 1)
        >>> with sem:
        ...     sem.acquire(blocking=False)
        False
    """

    def __init__(self, directory: Path, slots: int) -> None:
        if slots < 1:
            raise ValueError("slots must be >= 1")
        self.directory = Path(directory)
        self.slots = slots
        self.directory.mkdir(parents=True, exist_ok=True)
        self._reset()
        _SEMAPHORE_INSTANCES.add(self)

    def _reset(self) -> None:
        # this process's own bound, waited on without polling: a run keeps more page threads
        # than slots (pages encoded or parsed outside a slot), and those beyond the slots
        # must sleep until one frees instead of scanning every slot file every few ms
        self._gate = threading.Semaphore(self.slots)
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        self._held: set[int] = set()  # held or being tried by a thread of this process
        self._by_thread: dict[int, list[int]] = {}

    def _after_fork_in_child(self) -> None:
        """A forked child shares the parent's open file descriptions: unlocking them would
        free the parent's slots, so they are only closed (the parent keeps its locks)."""
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._reset()

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        """Take a slot; False when none came free in ``timeout`` (or at once, non-blocking).
        Slots are tried from a random start; between full passes it sleeps 5-20 ms."""
        if not blocking and timeout is not None:
            raise ValueError("can't specify timeout for non-blocking acquire")
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        if not self._gate.acquire(blocking, timeout if deadline is not None else None):
            return False  # this process's threads hold every slot
        while True:
            slot = self._try_all()
            if slot is not None:
                return True
            if not blocking:
                self._gate.release()
                return False
            pause = random.uniform(0.005, 0.02)
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._gate.release()
                    return False
                pause = min(pause, remaining)
            time.sleep(pause)

    def release(self) -> None:
        """Free a slot: this thread's latest, else (a release from another thread, as
        threading semaphores allow) any this process holds. ValueError if none."""
        me = threading.get_ident()
        with self._lock:
            holder = me if me in self._by_thread else next(iter(self._by_thread), None)
            if holder is None:
                raise ValueError("SlotSemaphore released too many times")
            slots = self._by_thread[holder]
            slot = slots.pop()
            if not slots:
                del self._by_thread[holder]
            # unlock before forgetting it: another thread of ours must not flock this
            # description while it is still locked (that would "succeed")
            fcntl.flock(self._fds[slot], fcntl.LOCK_UN)
            self._held.discard(slot)
        self._gate.release()

    @property
    def held(self) -> int:
        """Slots this process holds."""
        with self._lock:
            return sum(len(v) for v in self._by_thread.values())

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"SlotSemaphore({str(self.directory)!r}, slots={self.slots})"

    def _try_all(self) -> int | None:
        start = random.randrange(self.slots)
        for i in range(self.slots):
            slot = (start + i) % self.slots
            with self._lock:
                if slot in self._held:
                    continue
                self._held.add(slot)
                fd = self._fds.get(slot)
                if fd is None:
                    try:
                        fd = os.open(self.directory / f"slot-{slot}",
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                    except OSError:
                        self._held.discard(slot)
                        raise
                    self._fds[slot] = fd
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another process holds it
                with self._lock:
                    self._held.discard(slot)
                continue
            except BaseException:
                with self._lock:
                    self._held.discard(slot)
                raise
            with self._lock:
                self._by_thread.setdefault(threading.get_ident(), []).append(slot)
            return slot
        return None


_SLOT_CACHE: dict[tuple[str, str], SlotSemaphore] = {}
_SLOT_CACHE_LOCK = threading.Lock()


def slot_semaphore(state_dir: Path, key: str, slots: int) -> SlotSemaphore:
    """The in-flight bound of server ``key``, one object per process (each object keeps
    its own file descriptions, so two objects in one process would not exclude each other's
    threads). The first caller's ``slots`` stays; a different later one is logged. Across
    processes, different ``slots`` bound the total by the largest."""
    cache_key = (str(Path(state_dir).resolve()), key)
    with _SLOT_CACHE_LOCK:
        sem = _SLOT_CACHE.get(cache_key)
        if sem is None:
            sem = SlotSemaphore(Path(state_dir) / f"{key}.slots", slots)
            _SLOT_CACHE[cache_key] = sem
        elif sem.slots != slots:
            log.warning("in-flight slots for %s stay %d (asked %d)", key, sem.slots, slots)
        return sem


def _after_fork_in_child() -> None:
    global _SLOT_CACHE_LOCK
    _SLOT_CACHE_LOCK = threading.Lock()
    for sem in list(_SEMAPHORE_INSTANCES):
        sem._after_fork_in_child()


os.register_at_fork(after_in_child=_after_fork_in_child)
