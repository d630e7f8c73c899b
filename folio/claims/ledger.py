"""The ledger of claims, done records and failures under an output location (see the
package doc for the layout and the exactly-once argument)."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Container
from typing import Any

from pydantic import ValidationError

from folio.claims.done_set import DoneSet
from folio.claims.records import (
    Claim,
    DoneRecord,
    Failure,
    dump,
    key_hash,
    object_fp,
    ref_of,
)
from folio.io.layout import CLAIMS, FAILED, LEDGER
from folio.io.s3 import ObjectRef
from folio.io.sinks import Sink, open_sink
from folio.settings.config import S3Settings

__all__ = ["ClaimLedger", "Clock"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: how often a claimer retries when the claim object vanishes between create and read
_RACE_RETRIES = 3


class ClaimLedger:
    """Claims, done records and failures for one pipeline configuration.

    Example:
        >>> ledger = ClaimLedger(LocalSink(tmp), "cfg1")  # doctest: +SKIP
        >>> claim = ledger.try_claim(obj, owner="sweep-a", lease_s=300)  # doctest: +SKIP
        >>> ledger.complete(claim, sha256=digest, outcome="ok")  # doctest: +SKIP
    """

    def __init__(self, store: Sink, config_hash: str, *, clock: Clock = time.time) -> None:
        self.store = store
        self.config_hash = config_hash
        self.clock = clock

    @classmethod
    def for_output(
        cls, out: str, s3: S3Settings, config_hash: str, *, clock: Clock = time.time
    ) -> ClaimLedger:
        return cls(open_sink(out, s3), config_hash, clock=clock)

    # paths
    def claim_path(self, uri: str) -> str:
        return f"{CLAIMS}/{self.config_hash}/{key_hash(uri)}.json"

    def done_path(self, obj: ObjectRef) -> str:
        return f"{LEDGER}/{self.config_hash}/{key_hash(obj.uri)}-{object_fp(obj)}.json"

    def failed_path(self, uri: str) -> str:
        return f"{FAILED}/{self.config_hash}/{key_hash(uri)}.json"

    # --- done ---------------------------------------------------------------------------
    def done_names(self) -> DoneSet:
        """``{kh}-{fp}`` of every done record, by listing (one request per 1000 records),
        held in 8 bytes each (:class:`~folio.claims.done_set.DoneSet`)."""
        prefix = f"{LEDGER}/{self.config_hash}/"
        return DoneSet(name[len(prefix):].removesuffix(".json") for name in self.store.names(prefix))

    def is_done(self, obj: ObjectRef, names: Container[str] | None = None) -> bool:
        """Done with this config and this source version: from a listing, or one HEAD."""
        if names is not None:
            return f"{key_hash(obj.uri)}-{object_fp(obj)}" in names
        return self.store.exists(self.done_path(obj))

    def done_record(self, obj: ObjectRef) -> DoneRecord | None:
        found = self.store.read(self.done_path(obj))
        return None if found is None else DoneRecord.model_validate_json(found[0])

    def complete(
        self, claim: Claim, *, sha256: str = "", doc_id: str = "", outcome: str = "ok",
        cached: bool = False,
    ) -> DoneRecord:
        """Record the document done (first), clear its failure, then release the claim."""
        record = DoneRecord(
            source=claim.source, source_etag=claim.source_etag, source_size=claim.source_size,
            config_hash=self.config_hash, sha256=sha256, doc_id=doc_id, outcome=outcome,
            cached=cached, owner=claim.owner, batch=claim.batch, completed_at=self.clock(),
        )
        self.store.write_bytes(self.done_path(ref_of(claim)), dump(record))
        self.store.delete(self.failed_path(claim.source))
        self.release(claim)
        return record

    # --- failures -----------------------------------------------------------------------
    def failure(self, uri: str) -> Failure | None:
        found = self.store.read(self.failed_path(uri))
        if found is None:
            return None
        try:
            return Failure.model_validate_json(found[0])
        except ValidationError:
            return None

    def failed_names(self) -> set[str]:
        """``kh`` of every document with a failure record."""
        prefix = f"{FAILED}/{self.config_hash}/"
        return {name[len(prefix):].removesuffix(".json") for name in self.store.names(prefix)}

    def fail(self, claim: Claim, reason: str, *, retryable: bool) -> Failure:
        """Record why the document failed (attempts counted per source version), then
        release the claim so that the next sweep retries it. Never marks it done."""
        previous = self.failure(claim.source)
        attempts = 1
        if previous is not None and previous.same_version(ref_of(claim)):
            attempts = previous.attempts + 1
        record = Failure(
            source=claim.source, source_etag=claim.source_etag, source_size=claim.source_size,
            config_hash=self.config_hash, reason=reason, retryable=retryable, attempts=attempts,
            owner=claim.owner, batch=claim.batch, failed_at=self.clock(),
        )
        self.store.write_bytes(self.failed_path(claim.source), dump(record))
        self.release(claim)
        return record

    def should_retry(self, obj: ObjectRef, max_attempts: int) -> bool:
        """Transient failures are always retried; a document that failed on its own
        merits (bad input) only ``max_attempts`` times per source version."""
        failure = self.failure(obj.uri)
        return (failure is None or failure.retryable or not failure.same_version(obj)
                or failure.attempts < max_attempts)

    # --- claims -------------------------------------------------------------------------
    def current(self, uri: str) -> Claim | None:
        """The claim as stored now (None when there is none)."""
        return self._read_claim(self.claim_path(uri))

    def _read_claim(self, path: str) -> Claim | None:
        found = self.store.read(path)
        if found is None:
            return None
        body, etag = found
        try:
            return Claim.model_validate_json(body).model_copy(update={"etag": etag})
        except ValidationError:  # damaged: anyone may take it over (with the same CAS)
            return Claim(source="", config_hash=self.config_hash, owner="?", token="",
                         acquired_at=0.0, expires_at=0.0, etag=etag)

    def try_claim(self, obj: ObjectRef, owner: str, lease_s: float) -> Claim | None:
        """Claim ``obj`` for ``lease_s`` seconds; None when someone else holds it.

        A claim that expired or was released is taken over with a compare-and-swap on
        the ETag just read, so of two takers exactly one wins.
        """
        path = self.claim_path(obj.uri)
        for _ in range(_RACE_RETRIES):
            now = self.clock()
            claim = Claim(
                source=obj.uri, source_etag=obj.etag, source_size=obj.size,
                config_hash=self.config_hash, owner=owner, token=uuid.uuid4().hex,
                acquired_at=now, expires_at=now + lease_s,
            )
            etag = self.store.create(path, dump(claim))
            if etag is not None:
                return claim.model_copy(update={"etag": etag})
            held = self._read_claim(path)
            if held is None:
                continue  # released and deleted in between: try to create it again
            if held.held_at(now):
                return None
            claim = claim.model_copy(update={
                "takeovers": held.takeovers + 1,
                "previous_batch": "" if held.released else held.batch,
                "previous_owner": held.owner,
            })
            etag = self.store.replace(path, dump(claim), held.etag)
            return claim.model_copy(update={"etag": etag}) if etag else None
        return None

    def _swap(self, claim: Claim, new: Claim) -> Claim | None:
        """Replace our claim object with ``new``; None when it is not ours any more."""
        path = self.claim_path(claim.source)
        body = dump(new)
        etag = self.store.replace(path, body, claim.etag) if claim.etag else None
        if etag is None:  # a stale or guessed ETag: check that the claim is still ours
            held = self._read_claim(path)
            if held is None or held.token != claim.token or held.released:
                return None
            etag = self.store.replace(path, body, held.etag)
        return new.model_copy(update={"etag": etag}) if etag else None

    def renew(self, claim: Claim, lease_s: float, *, batch: str | None = None) -> Claim | None:
        """Extend the lease (and record the batch the document goes out in); None when
        the claim was lost (taken over after it expired)."""
        update: dict[str, Any] = {"expires_at": self.clock() + lease_s}
        if batch is not None:
            update["batch"] = batch
        return self._swap(claim, claim.model_copy(update=update))

    def release(self, claim: Claim) -> bool:
        """Give the claim up (a tombstone anyone may take over at once); False when it
        was not ours any more."""
        tombstone = claim.model_copy(update={"released": True, "expires_at": self.clock()})
        return self._swap(claim, tombstone) is not None
