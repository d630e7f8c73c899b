"""What a finished batch's run says about each of its documents, recorded in the ledger."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from folio.claims.keeper import ClaimKeeper
from folio.claims.ledger import ClaimLedger
from folio.claims.records import Claim
from folio.settings.config import S3Settings

__all__ = ["line_from_outputs", "line_outcome", "record_lines", "report_lines"]


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
    from folio.output.outputs import find_done, read_quarantine

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
