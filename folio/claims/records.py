"""The sweep's records: a claim (lease) on a source document, a done record, a failure,
and the names they are kept under (hashes of the source URI and version)."""

from __future__ import annotations

import hashlib

from pydantic import BaseModel, Field

from folio.io.s3 import ObjectRef

__all__ = ["Claim", "DoneRecord", "Failure", "fingerprint", "key_hash"]


def key_hash(uri: str) -> str:
    """A fixed-length, always-safe object name for a source URI."""
    return hashlib.sha256(uri.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def fingerprint(etag: str, size: int) -> str:
    """What identifies one version of a source without reading it: its ETag and size."""
    return hashlib.sha256(f"{etag.strip()}\0{size}".encode()).hexdigest()[:16]


def object_fp(obj: ObjectRef) -> str:
    """The fingerprint of a listed source object."""
    return fingerprint(obj.etag, obj.size)


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
        return fingerprint(self.source_etag, self.source_size) == object_fp(obj)


def dump(model: BaseModel) -> bytes:
    """A record as it is stored: compact JSON."""
    return model.model_dump_json().encode()


def ref_of(claim: Claim) -> ObjectRef:
    """The source version a claim was made for."""
    bucket, _, key = claim.source.removeprefix("s3://").partition("/")
    return ObjectRef(bucket=bucket, key=key, size=claim.source_size, etag=claim.source_etag)
