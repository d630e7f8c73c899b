"""Every name folio gives to what it keeps under an output location (``out``), beside the
documents' own folders. One place, so that a new kind of record cannot collide with an
old one, and a person reading a bucket can look up what each folder is.

Document folders are ``{stem}-{id12}/`` (:func:`folio.io.keys.doc_slug`): the content id
at the end keeps a document named ``_index.pdf`` apart from these names.
"""

from __future__ import annotations

#: done-index: one record per (content hash, configuration), so a renamed or re-uploaded
#: copy of a document is answered "cached" (:func:`folio.output.outputs.find_done`)
INDEX = "_index"
#: one record per quarantined document: why, and whether a retry may help
QUARANTINE = "_quarantine"
#: what each S3 source version's bytes hash to (ETag, size, time -> sha256), so a rerun
#: over a prefix answers an unchanged done object without downloading it
#: (:mod:`folio.io.source_index`)
SOURCES = "_sources"
#: the default vector store (LanceDB) when none is configured
VECTORS = "_vectors"
#: Great Expectations Data Docs of documents with quarantined pages (local outputs only)
DATA_DOCS = "_data_docs"
#: the sweep's leases on source documents (:mod:`folio.claims`)
CLAIMS = "_claims"
#: the sweep's done ledger: one record per source version and configuration
LEDGER = "_ledger"
#: the sweep's last failure per source: retried, never done
FAILED = "_failed"
#: one record per source naming its live version, at a path mirroring the source's URI
#: (``_live/s3_{bucket}/{key}.json``, ``_live/file/{path}.json``), so the sources indexed
#: under a root are one listing (:mod:`folio.index`)
LIVE = "_live"
#: which sources use a document folder (``_folder_sources/{folder}/{hash of source}``): a
#: folder leaves with the last of them (the same bytes and file name under two sources)
FOLDER_SOURCES = "_folder_sources"
#: probe objects of the pre-run write check (:mod:`folio.checks.run_checks`), deleted after it
CHECKS = "_checks"

#: every record folder above, for the listings that must not take folio's own files for
#: documents when the outputs lie under a source (folio.io.sources.is_own)
RECORD_FOLDERS = frozenset({INDEX, QUARANTINE, SOURCES, VECTORS, DATA_DOCS, CLAIMS, LEDGER,
                            FAILED, LIVE, FOLDER_SOURCES, CHECKS})
