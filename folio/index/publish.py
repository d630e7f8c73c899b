"""A document's new version goes live: the steps of the load stage around its writes.

Order (so that a reader, a search or a crash never sees a wrong picture):

1. :func:`begin`: read the source's live record; mark the new folder as used by the
   source; when the new version writes into the live one's folder (a settings change:
   same bytes, same folder) remove its document.json first, so it never tells the old
   version's ``ok`` beside the new version's files.
2. the load stage writes markdown and pages, then the vectors: the store replaces every
   row of the source (the old version's too) in that write;
3. the done marker, then document.json (the first file to say ``ok``);
4. :func:`publish`: the live record names the new version; the old version's folder
   leaves (:func:`folio.index.retire.release_folder`).
"""

from __future__ import annotations

import logging

from folio.index.live import LiveRecord, read_live, write_live
from folio.index.retire import release_folder, use_folder
from folio.io.sinks import Sink
from folio.models import DocumentResult
from folio.output.outputs import JSON, document_folder
from folio.stores.base import VectorStore

__all__ = ["begin", "drop_version", "publish"]

log = logging.getLogger(__name__)


def begin(sink: Sink, doc: DocumentResult) -> LiveRecord | None:
    """Step 1; returns the live record before this version (None: none yet)."""
    previous = read_live(sink, doc.source)
    folder = document_folder(doc)
    use_folder(sink, folder, doc.source)
    if previous is not None and previous.folder == folder:
        sink.delete(f"{folder}/{JSON}")
    return previous


def publish(sink: Sink, doc: DocumentResult, previous: LiveRecord | None) -> None:
    """Step 4: this version is the source's live one; the old one's folder leaves."""
    folder = document_folder(doc)
    write_live(sink, LiveRecord(
        source=doc.source, sha256=doc.sha256, config_hash=doc.config_hash, doc_id=doc.doc_id,
        folder=folder, chunks=doc.chunks, vector_table=doc.vector_table))
    if previous is not None and previous.folder != folder:
        release_folder(sink, previous.folder, doc.source)


def drop_version(sink: Sink, store: VectorStore, doc: DocumentResult) -> None:
    """The source's new bytes are quarantined for good (``retryable: false``): the old
    version's rows and outputs describe bytes that are gone, so they leave too, and the
    record says the source is quarantined. (A transient failure keeps the old version:
    the next run replaces it.)"""
    previous = read_live(sink, doc.source)
    if previous is None or previous.state == "quarantined":
        return
    if previous.state == "live":
        store.delete_sources([doc.source])
        release_folder(sink, previous.folder, doc.source)
    write_live(sink, LiveRecord(source=doc.source, sha256=doc.sha256,
                                config_hash=doc.config_hash, doc_id=doc.doc_id,
                                state="quarantined"))
