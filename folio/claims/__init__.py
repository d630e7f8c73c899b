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
content-hash done-index (:func:`folio.output.outputs.find_done`) and answers "cached" for a
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

from folio.claims.keeper import ClaimKeeper
from folio.claims.ledger import ClaimLedger, Clock
from folio.claims.outcomes import line_from_outputs, line_outcome, record_lines, report_lines
from folio.claims.records import Claim, DoneRecord, Failure, fingerprint, key_hash

__all__ = [
    "Claim",
    "ClaimKeeper",
    "ClaimLedger",
    "Clock",
    "DoneRecord",
    "Failure",
    "fingerprint",
    "key_hash",
    "line_from_outputs",
    "line_outcome",
    "record_lines",
    "report_lines",
]
