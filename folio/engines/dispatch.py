"""Pages spread over several engines of one model: each request goes to the engine with
the fewest outstanding requests, and each engine keeps its own in-flight budget.

Why least-outstanding and not round-robin: engines of one host differ in speed (a GPU
shared with another job, a server warming up, one restarting), and a page's cost varies
with its length; sending each page where the fewest wait keeps every engine's batch full
without queueing pages behind the slowest one.

An engine whose connection fails is set aside (no new pages) until it answers its health
check again: a restarting server rejoins, a dead one stays out, and the pages it held are
sent again to the others by the caller (:class:`folio.engines.openai_engine.OpenAIEngine`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from folio.gpu.vllm_server import Endpoint

__all__ = ["Dispatcher", "EngineSlot", "NoEngineError"]

log = logging.getLogger(__name__)


class NoEngineError(Exception):
    """No engine was healthy for the whole wait."""


class EngineSlot:
    """One engine: its endpoint, its own budget, the requests it holds now and in all."""

    def __init__(self, index: int, endpoint: Endpoint, limit: int) -> None:
        self.index = index
        self.endpoint = endpoint
        self.limit = max(1, limit)
        self.outstanding = 0
        self.sent = 0
        self.healthy = True
        # a shared server's bound across the processes attached to it (SharedEndpoint)
        shared = getattr(endpoint, "semaphore", None)
        self.cross_process: Any = shared() if callable(shared) else None

    def __repr__(self) -> str:
        state = "up" if self.healthy else "down"
        return f"EngineSlot({self.index}, {self.endpoint.base_url}, {self.outstanding}/{self.limit}, {state})"


class Dispatcher:
    """Leases engines to requests: the healthy engine with a free slot and the fewest
    outstanding requests (relative to its budget), waiting while every engine is full.

    Args:
        endpoints: the engines, one per server.
        limits: each engine's in-flight budget (default: the endpoint's ``in_flight``).
        recheck_s: how often an engine set aside is probed for health.
    """

    def __init__(self, endpoints: Sequence[Endpoint], limits: Sequence[int] | None = None,
                 *, recheck_s: float = 1.0) -> None:
        if not endpoints:
            raise ValueError("a dispatcher needs at least one endpoint")
        sizes = list(limits) if limits is not None else [e.in_flight for e in endpoints]
        self.slots = [EngineSlot(i, e, n) for i, (e, n) in enumerate(zip(endpoints, sizes, strict=True))]
        self.recheck_s = recheck_s
        self._cond = threading.Condition()
        self._closed = False

    @property
    def in_flight(self) -> int:
        """Requests all engines together hold at most: what the page scheduler keeps out."""
        return sum(slot.limit for slot in self.slots)

    def _pick(self) -> EngineSlot | None:
        free = [s for s in self.slots if s.healthy and s.outstanding < s.limit]
        if not free:
            return None
        return min(free, key=lambda s: (s.outstanding / s.limit, s.sent, s.index))

    @contextmanager
    def lease(self, timeout_s: float) -> Iterator[EngineSlot]:
        """An engine for one request, held for the ``with`` block.

        Raises:
            NoEngineError: for ``timeout_s``, no engine was healthy (full ones are waited
                for without limit: they free a slot when a request ends).
        """
        slot = self._acquire(timeout_s)
        try:
            if slot.cross_process is not None:
                with slot.cross_process:
                    yield slot
            else:
                yield slot
        finally:
            with self._cond:
                slot.outstanding -= 1
                self._cond.notify_all()

    def _acquire(self, timeout_s: float) -> EngineSlot:
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                slot = self._pick()
                if slot is not None:
                    slot.outstanding += 1
                    slot.sent += 1
                    return slot
                if any(s.healthy for s in self.slots):
                    self._cond.wait()  # all busy: a request ending frees a slot
                    continue
                left = deadline - time.monotonic()
                if left <= 0:
                    raise NoEngineError(
                        f"no engine answered for {timeout_s:.0f} s: "
                        + ", ".join(s.endpoint.base_url for s in self.slots))
                self._cond.wait(min(left, self.recheck_s))

    def set_aside(self, slot: EngineSlot, reason: str) -> None:
        """Send ``slot`` no new requests until its health check passes again."""
        with self._cond:
            if not slot.healthy:
                return
            slot.healthy = False
            others = sum(1 for s in self.slots if s.healthy)
            log.warning("engine %s set aside (%s); %d other(s) take its pages",
                        slot.endpoint.base_url, reason, others)
        threading.Thread(target=self._watch, args=(slot,), daemon=True,
                         name=f"folio-engine-watch-{slot.index}").start()

    def _watch(self, slot: EngineSlot) -> None:
        """Probe a set-aside engine until it answers (a restarted server rejoins)."""
        while not self._closed and not slot.endpoint.wait_ready(self.recheck_s):
            time.sleep(self.recheck_s)
        with self._cond:
            if self._closed:
                return
            slot.healthy = True
            log.info("engine %s is back", slot.endpoint.base_url)
            self._cond.notify_all()

    def close(self) -> None:
        """Stop probing engines set aside (their threads end within ``recheck_s``)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
