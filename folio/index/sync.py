"""``--sync``: the rows, outputs and records of sources gone from the run's roots leave.

Plan (:func:`gone_sources`): the records of the sources indexed under each root are one
listing of ``_live/`` (:mod:`folio.index.live`); those whose name is not the record name
of a discovered source are gone. Nothing outside the roots is ever listed, and a root
under which discovery found no document at all is refused (:func:`check_roots`): an empty
prefix from a typo must not wipe an index.

Apply (:func:`remove_sources`): each gone source's record is read (its folder), the
source is looked for once more (a source put back since the listing stays), then its
rows leave the store in one write for all of them, its folder (once no other source uses
it), its S3 version record and, last, its live record: a sync stopped half-way is
finished by the next one.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel

from folio.errors import ConfigError
from folio.index.live import LiveRecord, live_path, live_prefix, not_folios
from folio.index.retire import release_folder
from folio.io.sinks import Sink
from folio.io.source_index import version_path
from folio.settings.config import S3Settings
from folio.stores.base import VectorStore

__all__ = ["SyncResult", "check_roots", "gone_sources", "remove_sources", "source_exists",
           "sync_roots"]

log = logging.getLogger(__name__)

#: gone sources a run without ``--sync`` names in its report and summary (the rest counted)
GONE_NAMED = 20


class SyncResult(BaseModel):
    """What ``--sync`` found and did (the report's ``sync``)."""

    roots: list[str]
    indexed: int = 0  # sources with a live record under the roots
    #: their URIs: all of them with ``--sync``, else the first :data:`GONE_NAMED` (the
    #: rest only counted: naming each costs a read of its record)
    gone: list[str] = []
    gone_count: int = 0
    removed: list[str] = []
    kept: list[str] = []  # found again, or rewritten by another run since the listing
    #: records folio did not write (``path: why``): reported, never obeyed
    refused: list[str] = []
    rows_removed: int = 0
    dry_run: bool = False
    applied: bool = False


def _covers(root: str, uri: str) -> bool:
    path = live_path(uri)
    return path == live_path(root) or path.startswith(live_prefix(root))


def check_roots(roots: Sequence[str], present: Sequence[str]) -> None:
    """Refuse a root under which discovery found no document.

    Raises:
        ConfigError: such a root (exit 2): a typo's empty prefix must not wipe an index.
    """
    for root in roots:
        if not any(_covers(root, uri) for uri in present):
            raise ConfigError(
                f"--sync: {root!r} lists no document at all; refusing to remove every "
                "source indexed under it (check the path; to empty an index, delete its "
                "output location)")


def gone_sources(sink: Sink, roots: Sequence[str], present: Iterable[str]
                 ) -> tuple[int, list[str]]:
    """``(indexed, gone record paths)`` under ``roots``: one listing per root, no read."""
    have = {live_path(uri) for uri in present}
    listed: set[str] = set()
    for root in roots:
        exact = live_path(root)  # a root that names one file
        if sink.exists(exact):
            listed.add(exact)
        listed.update(n for n in sink.names(live_prefix(root)) if n.endswith(".json"))
    return len(listed), sorted(listed - have)


def source_exists(uri: str, head: Callable[[str], bool] | None = None) -> bool:
    """Whether the source is there now (a local file, or an S3 object via ``head``)."""
    if uri.startswith("s3://"):
        return head(uri) if head else False
    return os.path.isfile(uri.removeprefix("file://"))


def read_records(sink: Sink, paths: Sequence[str]) -> tuple[list[LiveRecord], list[str]]:
    """The records at ``paths`` that folio wrote, and ``path: why`` for each it did not
    (:func:`folio.index.live.not_folios`): those are reported and left alone."""
    records, refused = [], []
    for path in paths:
        text = sink.read_text(path)
        if text is None:
            continue  # removed meanwhile (another sync)
        try:
            record = LiveRecord.model_validate_json(text)
        except ValueError:
            log.warning("unreadable live record %s: left for a person to look at", path)
            continue
        why = not_folios(path, record)
        if why is None:
            records.append(record)
        else:
            log.warning("live record %s was not written by folio (%s): not obeyed", path, why)
            refused.append(f"{path}: {why}")
    return records, refused


def remove_sources(sink: Sink, store: VectorStore, records: Sequence[LiveRecord], *,
                   started: datetime, head: Callable[[str], bool] | None = None,
                   busy: Callable[[str], bool] | None = None, present: Sequence[str] = (),
                   ) -> tuple[list[str], list[str], int]:
    """Remove the rows, folders and records of these gone sources; ``(removed, kept,
    rows removed)``. A source found again, whose record a run rewrote after ``started``
    (the listing's time), or that ``busy`` says someone holds (a sweep's claim), is kept;
    no file of ``present`` (the run's sources) is ever removed."""
    doomed: list[LiveRecord] = []
    kept: list[str] = []
    for record in records:
        rewritten = record.updated_at and datetime.fromisoformat(record.updated_at) >= started
        if rewritten or source_exists(record.source, head) or (busy and busy(record.source)):
            kept.append(record.source)
        else:
            doomed.append(record)
    rows = store.delete_sources([r.source for r in doomed]) if doomed else 0
    sources = frozenset(present)
    for record in doomed:
        release_folder(sink, record.folder, record.source, sources)
        if record.source.startswith("s3://"):
            sink.delete(version_path(record.source))
        sink.delete(live_path(record.source))
    return [r.source for r in doomed], kept, rows


def now() -> datetime:
    """The sync's start, against which records rewritten meanwhile are told apart."""
    return datetime.now(UTC)


def s3_head(s3: S3Settings) -> Callable[[str], bool]:
    """Whether an S3 source exists now (one HEAD)."""
    from folio.io import s3 as s3io

    client = s3io.client_for(s3)

    def head(uri: str) -> bool:
        bucket, key = s3io.parse_s3_uri(uri)
        return s3io.head_object(client, bucket, key) is not None

    return head


def sync_roots(sink: Sink, store: Callable[[], VectorStore], roots: Sequence[str],
               present: Sequence[str], *, apply: bool, dry_run: bool, started: datetime,
               s3: S3Settings, busy: Callable[[str], bool] | None = None) -> SyncResult:
    """The run's sync step: without ``apply``, count the indexed sources gone from the
    roots (one listing per root); with it, check the roots (:func:`check_roots`), read
    the gone sources' records and, unless ``dry_run``, remove them."""
    result = SyncResult(roots=list(roots), dry_run=dry_run)
    if apply:
        check_roots(roots, present)
    result.indexed, paths = gone_sources(sink, roots, present)
    result.gone_count = len(paths)
    if not apply:
        named, _ = read_records(sink, sorted(paths)[:GONE_NAMED])
        result.gone = [r.source for r in named]
        return result
    if not paths:
        return result
    records, result.refused = read_records(sink, paths)
    result.gone = [r.source for r in records]
    if dry_run:
        return result
    result.removed, result.kept, result.rows_removed = remove_sources(
        sink, store(), records, started=started, head=s3_head(s3), busy=busy, present=present)
    result.applied = True
    return result
