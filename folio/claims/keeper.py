"""Keeping a sweep's leases alive while its batches run."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from types import TracebackType
from typing import Self

from folio.claims.ledger import ClaimLedger
from folio.claims.records import Claim

__all__ = ["ClaimKeeper"]

log = logging.getLogger(__name__)


class ClaimKeeper:
    """Renews every held claim in a background thread while work is in flight.

    Why a thread: a batch's run can take far longer than a lease; the lease only has to
    outlive the gap between renewals, so a dead holder is detected within one lease
    while a live one keeps its documents however long they take. Operations on one
    claim are serialised with its renewal (``take`` removes it from renewal first).
    """

    def __init__(self, ledger: ClaimLedger, lease_s: float, *, interval_s: float | None = None) -> None:
        self.ledger = ledger
        self.lease_s = lease_s
        self.interval_s = interval_s if interval_s is not None else max(lease_s / 3.0, 0.2)
        self._held: dict[str, Claim] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: set[str] = set()

    def __enter__(self) -> Self:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="folio-claim-keeper", daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def add(self, claim: Claim) -> None:
        with self._lock:
            self._held[claim.source] = claim

    def held(self) -> list[str]:
        with self._lock:
            return list(self._held)

    def held_claim(self, uri: str) -> Claim | None:
        with self._lock:
            return self._held.get(uri)

    def take(self, uri: str) -> Claim | None:
        """Stop renewing ``uri`` and hand its latest claim over (None if lost)."""
        with self._lock:
            return self._held.pop(uri, None)

    def assign(self, uris: Iterable[str], batch: str) -> list[Claim]:
        """Renew with the batch id just before sending the batch; drops lost claims."""
        kept = []
        for uri in uris:
            with self._lock:
                claim = self._held.get(uri)
                if claim is None:
                    continue
                renewed = self.ledger.renew(claim, self.lease_s, batch=batch)
                self._keep(uri, renewed)
            if renewed is not None:
                kept.append(renewed)
        return kept

    def _keep(self, uri: str, renewed: Claim | None) -> None:
        if renewed is None:
            self._held.pop(uri, None)
            self.lost.add(uri)
            log.warning("claim on %s was lost (taken over after its lease expired)", uri)
        else:
            self._held[uri] = renewed

    def renew_all(self) -> None:
        for uri in self.held():
            if self._stop.is_set():
                return
            with self._lock:
                claim = self._held.get(uri)
                if claim is None:
                    continue
                try:
                    renewed = self.ledger.renew(claim, self.lease_s)
                except Exception:  # storage trouble: keep the claim, retry next round
                    log.warning("renewing the claim on %s failed", uri, exc_info=True)
                    continue
                self._keep(uri, renewed)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.renew_all()
