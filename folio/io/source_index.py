"""What each version of an S3 source hashes to, kept beside the outputs (``_sources/``).

Why: the done-index is keyed by content (:func:`folio.output.outputs.find_done`), so learning
that a listed object is done used to take its download and a sha256 over its bytes:
a rerun over a prefix of unchanged, finished documents downloaded all of them again.
S3's listing already says which version each key holds (ETag, size, LastModified), so
one small record per key, ``_sources/{sha256(uri)[:32]}.json`` = that version's content
hash, lets a rerun go from the listing to the done-index without touching the source.

Correctness: a record is used only when the listed ETag, size *and* time all equal the
recorded ones; an overwritten object (even with the same bytes) has a new time, so it is
downloaded and hashed again and its record replaced. A record is written only after the
download, and only when a HEAD after the hashing still shows the listed ETag and size,
so the hash recorded for a version is that version's (an object replaced between the
listing and the download is simply not recorded). Local files are not recorded: hashing
a local file costs no transfer.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import datetime

from pydantic import BaseModel, ValidationError

from folio.io import s3 as s3io
from folio.io.layout import SOURCES
from folio.io.sinks import Sink
from folio.io.sources import SourceRef
from folio.settings.config import S3Settings

__all__ = ["SourceVersion", "known_sha256", "record_sha256", "version_path"]

log = logging.getLogger(__name__)


class SourceVersion(BaseModel):
    """One source object's version as listed, and the sha256 of its bytes."""

    source: str
    etag: str
    size: int
    last_modified: datetime | None
    sha256: str

    def matches(self, ref: SourceRef) -> bool:
        """The listed object is this version: same ETag, size and time."""
        return (ref.etag is not None and self.etag.strip() == ref.etag.strip()
                and self.size == ref.size and self.last_modified is not None
                and ref.mtime is not None and self.last_modified == ref.mtime)


def version_path(uri: str) -> str:
    """The record's path under the output location: a fixed-length hash of the URI."""
    return f"{SOURCES}/{hashlib.sha256(uri.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.json"


def _recordable(ref: SourceRef) -> bool:
    return ref.is_s3 and bool(ref.etag) and ref.mtime is not None


def known_sha256(sink: Sink, ref: SourceRef) -> str | None:
    """The content hash of the listed version of ``ref``, when a run recorded it; None for
    local files, unknown keys, a changed object or a damaged record (then: download)."""
    if not _recordable(ref):
        return None
    text = sink.read_text(version_path(ref.uri))
    if text is None:
        return None
    try:
        record = SourceVersion.model_validate_json(text)
    except ValidationError:
        log.warning("unreadable source record for %s: downloading it", ref.uri)
        return None
    return record.sha256 if record.source == ref.uri and record.matches(ref) else None


def record_sha256(sink: Sink, ref: SourceRef, sha256: str, s3: S3Settings) -> bool:
    """Record that the listed version of ``ref`` hashes to ``sha256`` (just downloaded and
    hashed), unless the object is no longer that version; True when recorded."""
    if not _recordable(ref):
        return False
    bucket, key = s3io.parse_s3_uri(ref.uri)
    now = s3io.head_object(s3io.client_for(s3), bucket, key)
    if now is None or now.etag.strip() != (ref.etag or "").strip() or now.size != ref.size:
        return False  # replaced since the listing: the bytes may be either version's
    record = SourceVersion(source=ref.uri, etag=ref.etag or "", size=ref.size,
                           last_modified=ref.mtime, sha256=sha256)
    sink.write_text(version_path(ref.uri), json.dumps(record.model_dump(mode="json")))
    return True
