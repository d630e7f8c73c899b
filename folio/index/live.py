"""The record of a source's live version, kept where a listing of a root finds it.

Identity is the source URI (an S3 URI, or a local file's absolute path); a version is
the content hash with the settings' hash. ``_live/...`` holds one small JSON record per
source, at a path that mirrors the URI segment by segment (percent-encoded), so that the
sources indexed under ``s3://bucket/in/`` are exactly the names listed under
``_live/s3_bucket/in/`` (1000 a request on S3): ``--sync`` diffs that listing against
the source listing without reading a record of a present source.

A source is *done* with the run's settings only when its record names these bytes and
these settings and the record's state is ``live``; a content done-index entry alone
(``_index/``) no longer is, since a settings change and back left one whose rows were
replaced.
"""

from __future__ import annotations

import hashlib
import logging
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ValidationError

from folio.io.keys import doc_slug
from folio.io.layout import LIVE
from folio.io.sinks import Sink

__all__ = ["LiveRecord", "live_path", "live_prefix", "not_folios", "read_live", "write_live"]

log = logging.getLogger(__name__)

#: characters kept as they are in a mirrored segment (all else percent-encoded)
_SAFE = "-_.~()+,=@ "
#: an encoded segment longer than this becomes a hash (file systems allow 255 bytes)
_MAX_SEGMENT = 180
#: a document id as folio makes it (the content hash's first 32 hex digits)
_DOC_ID = re.compile(r"[0-9a-f]{32}")


class LiveRecord(BaseModel):
    """One source's live version and where its outputs are."""

    source: str
    sha256: str
    config_hash: str
    doc_id: str
    #: ``live``: rows, outputs and done marker are this version's; ``quarantined``: the
    #: source's bytes could not be processed for good (no rows, no outputs kept)
    state: Literal["live", "quarantined"] = "live"
    folder: str = ""  # the document folder (sink-relative), "" when none
    chunks: int = 0
    vector_table: str = ""
    updated_at: str = ""


def _segment(part: str) -> str:
    if part in ("", ".", ".."):
        return "%" + part.replace(".", "2E") if part else "%"
    encoded = quote(part, safe=_SAFE)
    if encoded.startswith("."):  # a hidden name: a local listing skips it
        encoded = "%2E" + encoded[1:]
    if len(encoded.encode()) > _MAX_SEGMENT:
        encoded = "%-" + hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return encoded


def _parts(uri: str) -> list[str]:
    """``["s3_" + bucket, *key segments]`` or ``["file", *path segments]`` (a bucket's
    name never holds ``_``)."""
    if uri.startswith("s3://"):
        bucket, _, key = uri[5:].partition("/")
        return ["s3_" + bucket, *key.split("/")]
    path = Path(uri.removeprefix("file://")).expanduser().absolute().as_posix()
    return ["file", *path.lstrip("/").split("/")]


def live_path(uri: str) -> str:
    """The record's path for a source URI (deterministic: a present source's record
    name is computed, never listed)."""
    return f"{LIVE}/" + "/".join(_segment(p) for p in _parts(uri)) + ".json"


def live_prefix(root: str) -> str:
    """The folder of the records of every source under ``root`` (a folder or prefix,
    read as a folder: ``s3://b/in`` covers ``in/...``, never ``inbox/...``)."""
    parts = _parts(root)
    while len(parts) > 1 and parts[-1] == "":  # a trailing slash
        parts.pop()
    return f"{LIVE}/" + "/".join(_segment(p) for p in parts) + "/"


def read_live(sink: Sink, uri: str) -> LiveRecord | None:
    """The source's record; None when there is none, it is unreadable or folio did not
    write it (:func:`not_folios`): then the source is processed again, which writes a
    good one, and no folder the record names is ever released."""
    text = sink.read_text(live_path(uri))
    if text is None:
        return None
    try:
        record = LiveRecord.model_validate_json(text)
    except ValidationError:
        log.warning("unreadable live record of %s: processing it again", uri)
        return None
    why = not_folios(live_path(uri), record)
    if why is not None:  # planted by whoever can write the outputs: its folder not obeyed
        log.warning("live record of %s was not written by folio (%s): ignored", uri, why)
        return None
    return record


def write_live(sink: Sink, record: LiveRecord) -> None:
    stamped = record.model_copy(update={"updated_at": datetime.now(UTC).isoformat()})
    sink.write_text(live_path(record.source), stamped.model_dump_json(indent=1))


def not_folios(path: str, record: LiveRecord) -> str | None:
    """Why the record read at ``path`` is not one folio wrote (None: it is).

    Why: whoever can write inside the output folder (a shared inbox, an S3 prefix that is
    also the sources') can put a record there. ``--sync`` obeys a record only when what it
    names is what folio itself derives: the record's path from its source
    (:func:`live_path`, so the source lies under the root listed), and its folder from the
    source and the document id (:func:`folio.io.keys.doc_slug`), never a name of the
    writer's choosing (another folder, a source object, ``x/../..``).
    """
    if live_path(record.source) != path:
        return f"it names another source ({record.source!r})"
    if not record.folder:
        return None
    if _DOC_ID.fullmatch(record.doc_id) is None:
        return f"its document id {record.doc_id!r} is not one folio makes"
    if record.folder != doc_slug(record.source, record.doc_id):
        return f"its folder {record.folder!r} is not the one folio makes for the source"
    return None
