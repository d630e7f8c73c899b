"""Who works on which source document, and which are done: a ledger beside the outputs.

A sweep over a bucket prefix must scale to any number of documents and to several sweeps
and workers at once without processing a document twice or losing one. The ledger lives
under the output sink (S3 prefix or local folder)::

    _claims/{cfg}/{kh}.json          the lease on one source document: one holder at a time
    _ledger/{cfg}/{kh}-{fp}.json     done: this version of the source, with config ``cfg``
    _failed/{cfg}/{kh}.json          the last failure (reason, attempts): retried, never done

``kh`` hashes the source URI (so any key, odd characters included, is a safe name) and
``fp`` the source's ETag and size (an overwritten source is not done any more). ``cfg`` is
the pipeline config hash. The done ledger is read by *listing* ``_ledger/{cfg}/`` (1000
names a request), so a sweep never downloads a document to learn that it is done; only
documents missing from it are claimed and sent to the pipeline, which still checks its own
content-hash done-index (:func:`folio.outputs.find_done`) and answers "cached" for a
renamed or re-uploaded copy.

Claims use S3 conditional writes: creation with ``If-None-Match: *`` (one creator wins),
takeover of an expired or released claim with ``If-Match`` on the ETag just read (one
taker wins). A claim carries a lease (wall-clock expiry, so hosts' clocks must agree to
well within the lease) that its holder renews while the work runs, and the batch it was
sent in, so that whoever takes over a dead holder's claim can find that batch's run and
wait for it instead of starting the document a second time.

Exactly-once ordering: ``complete`` writes the done record *before* releasing the claim,
and a claimer re-checks the done record *after* winning the claim, so a document is never
started again once done; ``fail`` releases without a done record, so the next sweep
retries it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from pydantic import BaseModel, Field, ValidationError

from folio.config import S3Settings
from folio.io import s3 as s3io
from folio.io.layout import CLAIMS, FAILED, LEDGER
from folio.io.s3 import ObjectRef
from folio.io.sinks import Sink, open_sink

__all__ = [
    "Claim",
    "ClaimKeeper",
    "ClaimLedger",
    "DoneRecord",
    "Failure",
    "fingerprint",
    "key_hash",
    "line_from_outputs",
    "line_outcome",
    "list_pdfs",
    "record_lines",
    "report_lines",
]

log = logging.getLogger(__name__)

Clock = Callable[[], float]

#: how often a claimer retries when the claim object vanishes between create and read
_RACE_RETRIES = 3


def key_hash(uri: str) -> str:
    """A fixed-length, always-safe object name for a source URI."""
    return hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def fingerprint(etag: str, size: int) -> str:
    """What identifies one version of a source without reading it: its ETag and size."""
    return hashlib.sha256(f"{etag.strip()}\0{size}".encode()).hexdigest()[:16]


def _object_fp(obj: ObjectRef) -> str:
    return fingerprint(obj.etag, obj.size)


# --- records ---------------------------------------------------------------------------


class Claim(BaseModel):
    """The lease on one source document, as stored (``etag`` is ours, not stored)."""

    source: str
    source_etag: str = ""
    source_size: int = 0
    config_hash: str
    owner: str
    token: str
    acquired_at: float
    expires_at: float
    batch: str = ""  # the batch (child run) the document was last sent in
    previous_batch: str = ""  # the batch of the holder this claim was taken over from
    previous_owner: str = ""
    takeovers: int = 0
    released: bool = False
    etag: str = Field("", exclude=True)

    def held_at(self, now: float) -> bool:
        return not self.released and self.expires_at > now


class DoneRecord(BaseModel):
    source: str
    source_etag: str
    source_size: int
    config_hash: str
    sha256: str = ""
    doc_id: str = ""
    outcome: str = ""
    cached: bool = False  # the pipeline found it done already (its content done-index)
    owner: str = ""
    batch: str = ""
    completed_at: float = 0.0


class Failure(BaseModel):
    source: str
    source_etag: str
    source_size: int
    config_hash: str
    reason: str
    retryable: bool
    attempts: int = 1
    owner: str = ""
    batch: str = ""
    failed_at: float = 0.0

    def same_version(self, obj: ObjectRef) -> bool:
        return fingerprint(self.source_etag, self.source_size) == _object_fp(obj)


def _dump(model: BaseModel) -> bytes:
    return model.model_dump_json().encode()


# --- the ledger ---------------------------------------------------------------------------


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
        return f"{LEDGER}/{self.config_hash}/{key_hash(obj.uri)}-{_object_fp(obj)}.json"

    def failed_path(self, uri: str) -> str:
        return f"{FAILED}/{self.config_hash}/{key_hash(uri)}.json"

    # --- done ---------------------------------------------------------------------------
    def done_names(self) -> set[str]:
        """``{kh}-{fp}`` of every done record, by listing (about 70 bytes per document)."""
        prefix = f"{LEDGER}/{self.config_hash}/"
        return {name[len(prefix):].removesuffix(".json") for name in self.store.names(prefix)}

    def is_done(self, obj: ObjectRef, names: set[str] | None = None) -> bool:
        """Done with this config and this source version: from a listing, or one HEAD."""
        if names is not None:
            return f"{key_hash(obj.uri)}-{_object_fp(obj)}" in names
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
        self.store.write_bytes(self.done_path(_ref(claim)), _dump(record))
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
        if previous is not None and previous.same_version(_ref(claim)):
            attempts = previous.attempts + 1
        record = Failure(
            source=claim.source, source_etag=claim.source_etag, source_size=claim.source_size,
            config_hash=self.config_hash, reason=reason, retryable=retryable, attempts=attempts,
            owner=claim.owner, batch=claim.batch, failed_at=self.clock(),
        )
        self.store.write_bytes(self.failed_path(claim.source), _dump(record))
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
            etag = self.store.create(path, _dump(claim))
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
            etag = self.store.replace(path, _dump(claim), held.etag)
            return claim.model_copy(update={"etag": etag}) if etag else None
        return None

    def _swap(self, claim: Claim, new: Claim) -> Claim | None:
        """Replace our claim object with ``new``; None when it is not ours any more."""
        path = self.claim_path(claim.source)
        body = _dump(new)
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


def _ref(claim: Claim) -> ObjectRef:
    bucket, _, key = claim.source.removeprefix("s3://").partition("/")
    return ObjectRef(bucket=bucket, key=key, size=claim.source_size, etag=claim.source_etag)


# --- listing --------------------------------------------------------------------------


def list_pdfs(uri: str, s3: S3Settings, *, page_size: int = 1000) -> Iterator[ObjectRef]:
    """Every ``.pdf`` under ``s3://bucket/prefix`` as a folder (``in`` lists ``in/...`` and
    the key ``in`` itself, never ``inbox/...``), streamed page by page in key order."""
    bucket, prefix = s3io.parse_s3_uri(uri)
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    client = s3io.client_for(s3)
    for obj in s3io.list_objects(client, bucket, prefix, page_size=page_size):
        if obj.key.lower().endswith(".pdf") and (obj.key == prefix or obj.key.startswith(folder)):
            yield obj


# --- keeping leases alive -----------------------------------------------------------------


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


# --- reading a child run's report ---------------------------------------------------------


def line_outcome(line: dict[str, Any] | None) -> tuple[bool, str, bool]:
    """``(done, reason, retryable)`` for one document line of an ``ingest`` report.

    Done means what the pipeline marked done: ok or partial, and not a transient failure.
    """
    if line is None:
        return False, "no outcome: the document is missing from the run's report", True
    retryable = bool(line.get("retryable"))
    if line.get("outcome") in ("ok", "partial") and not retryable:
        return True, "", False
    return False, str(line.get("reason") or line.get("outcome") or "unknown"), retryable


def report_lines(report: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The report's document lines by source URI."""
    docs = (report or {}).get("documents") or []
    return {str(d.get("source")): d for d in docs if isinstance(d, dict)}


def record_lines(
    ledger: ClaimLedger, keeper: ClaimKeeper, uris: Iterable[str],
    lines: dict[str, dict[str, Any]],
) -> dict[str, list[str]]:
    """Complete or fail each document of a finished batch from its report line.

    Returns the URIs by what happened: ``processed``, ``cached`` (done before, by content
    hash), ``failed``, ``missing`` (no line: left claimed for the caller to resend or
    fail) and ``lost`` (the claim was taken over: its new holder records it).
    """
    result: dict[str, list[str]] = {
        k: [] for k in ("processed", "cached", "failed", "missing", "lost")}
    for uri in uris:
        line = lines.get(uri)
        if line is None:
            result["missing"].append(uri)
            continue
        claim = keeper.take(uri)
        if claim is None:
            result["lost"].append(uri)
            continue
        done, reason, retryable = line_outcome(line)
        if done:
            ledger.complete(claim, sha256=str(line.get("sha256") or ""),
                            doc_id=str(line.get("doc_id") or ""),
                            outcome=str(line.get("outcome")), cached=bool(line.get("cached")))
            result["cached" if line.get("cached") else "processed"].append(uri)
        else:
            ledger.fail(claim, reason, retryable=retryable)
            result["failed"].append(uri)
    return result


def line_from_outputs(
    claim: Claim, *, out: str, s3: S3Settings, work_dir: Path
) -> dict[str, Any] | None:
    """A report line rebuilt from the pipeline's own records, for a run whose report
    cannot be read (results not persisted): download and hash the source, then look
    for its content done-index entry or quarantine record. None when neither exists.
    """
    from folio.io.sinks import open_sink
    from folio.io.sources import SourceRef, fetch
    from folio.models import DocumentResult
    from folio.outputs import find_done, read_quarantine

    ref = SourceRef(uri=claim.source, size=claim.source_size, name="source.pdf",
                    etag=claim.source_etag or None)
    work_dir.mkdir(parents=True, exist_ok=True)
    local = fetch(ref, work_dir, s3)
    try:
        digest = hashlib.sha256(local.read_bytes()).hexdigest()
    finally:
        local.unlink(missing_ok=True)
    sink = open_sink(out, s3)
    done = find_done(sink, digest, claim.config_hash)
    if done is not None:
        return {"source": claim.source, "sha256": digest, "doc_id": done.doc_id,
                "outcome": done.outcome.value, "retryable": False, "cached": True}
    record = read_quarantine(sink, DocumentResult(source=claim.source, sha256=digest))
    if record is None:
        return None
    return {"source": claim.source, "sha256": digest, "outcome": "quarantined",
            "reason": record.get("reason", ""), "retryable": bool(record.get("retryable"))}
