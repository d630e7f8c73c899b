"""Per-document output files, the done-index that makes runs idempotent, and quarantine.

Layout under a sink (local folder or S3 prefix)::

    {slug}/document.md      page markdown; ``<!-- page N -->`` before each page (N from 1)
    {slug}/document.json    the DocumentResult: pages, blocks, attempts, outcomes
    {slug}/pages.jsonl      one JSON object per page

Every page a person reads about is numbered from 1, as it is cited: ``page`` in
document.json and pages.jsonl (``page_number`` too, its name before), the markdown's
comments, the chunks' ``page_start``/``page_end``/``boxes``. ``PageResult.index`` (from 0)
stays inside the pipeline; :func:`document_json` and :func:`read_document_json` translate.
    _index/{sha256}-{config_hash}.json   written last, by :func:`mark_done`
    _quarantine/{sha256}.json            documents that could not be processed, with why

The done-index is keyed by content and config, not by name: a renamed copy of a finished
PDF is found done, and a config change that alters outputs processes it again. It is
written by :func:`mark_done` after *everything* for the document succeeded (files,
vectors), so a crash in between means a redo, never a document marked done with parts
missing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from folio.io.keys import doc_slug, safe_key
from folio.io.layout import INDEX, QUARANTINE
from folio.io.sinks import Sink
from folio.models import DocumentOutcome, DocumentResult, PageOutcome, PageResult

__all__ = [
    "document_folder",
    "find_done",
    "index_path",
    "mark_done",
    "quarantine_path",
    "read_document_json",
    "read_quarantine",
    "render_markdown",
    "render_pages_jsonl",
    "document_json",
    "write_document",
    "write_document_json",
    "write_quarantine",
]

log = logging.getLogger(__name__)

MARKDOWN = "document.md"
JSON = "document.json"
PAGES = "pages.jsonl"
INDEX_VERSION = 1


def document_folder(doc: DocumentResult) -> str:
    """The folder (sink-relative) holding one document's files."""
    return doc_slug(doc.source, doc.doc_id)


def index_path(sha256: str, config_hash: str) -> str:
    return f"{INDEX}/{safe_key(sha256)}-{safe_key(config_hash)}.json"


def _quarantine_name(doc: DocumentResult) -> str:
    """The content hash, or (unreadable source: no hash) a hash of the source URI."""
    if doc.sha256:
        return safe_key(doc.sha256)
    return "source-" + hashlib.sha256(doc.source.encode()).hexdigest()[:32]


def quarantine_path(doc: DocumentResult) -> str:
    return f"{QUARANTINE}/{_quarantine_name(doc)}.json"


def _comment(text: str) -> str:
    """Text that cannot close an HTML comment or break its line."""
    return " ".join(text.replace("--", "- -").split())


def _page_markdown(page: PageResult) -> str:
    header = f"<!-- page {page.index + 1} -->"
    if page.outcome == PageOutcome.QUARANTINED:
        return f"{header}\n<!-- quarantined: {_comment(page.reason)} -->\n"
    body = page.markdown.strip()
    return f"{header}\n\n{body}\n" if body else f"{header}\n"


def render_markdown(doc: DocumentResult) -> str:
    """All pages in order, each after an HTML comment that names its page number."""
    pages = sorted(doc.pages, key=lambda p: p.index)
    return "\n".join(_page_markdown(p) for p in pages)


def _page_record(doc: DocumentResult, page: PageResult) -> dict[str, Any]:
    return {
        "doc_id": doc.doc_id,
        "source": doc.source,
        "page": page.index + 1,
        "page_number": page.index + 1,  # the 1-based page's name before ``page`` was
        "outcome": page.outcome.value,
        "reason": page.reason,
        "route": page.route,
        "engine": page.engine,
        "model": page.model,
        "width_pt": page.width_pt,
        "height_pt": page.height_pt,
        "markdown": page.markdown,
        # read, and no text on it (nothing drawn, or a drawing OCR found no words in)
        "blank": page.blank,
        "notes": page.notes,
        "blocks": [b.model_dump(mode="json") for b in page.blocks],
    }


def render_pages_jsonl(doc: DocumentResult) -> str:
    """One compact JSON object per page, in page order (easy to stream or grep)."""
    pages = sorted(doc.pages, key=lambda p: p.index)
    return "".join(json.dumps(_page_record(doc, p), ensure_ascii=False) + "\n" for p in pages)


def document_json(doc: DocumentResult) -> str:
    """document.json: the DocumentResult, each page's 0-based ``index`` written as
    ``page`` from 1 (first in its object), so the file numbers pages as everything else a
    person reads does."""
    data = doc.model_dump(mode="json")
    data["pages"] = [{"page": page.pop("index") + 1, **page} for page in data["pages"]]
    return json.dumps(data, indent=1, ensure_ascii=False)


def read_document_json(body: str) -> DocumentResult:
    """The DocumentResult of a document.json: pages by ``page`` (from 1), or by ``index``
    (from 0) as folio wrote them before.

    Raises:
        ValueError: not JSON, or not a DocumentResult (pydantic's ValidationError).
    """
    data = json.loads(body)
    for page in data.get("pages", []) if isinstance(data, dict) else []:
        if isinstance(page, dict) and "index" not in page and "page" in page:
            page["index"] = int(page.pop("page")) - 1
    return DocumentResult.model_validate(data)


def _output_paths(doc: DocumentResult) -> dict[str, str]:
    folder = document_folder(doc)
    return {
        "markdown": f"{folder}/{MARKDOWN}",
        "json": f"{folder}/{JSON}",
        "pages": f"{folder}/{PAGES}",
    }


def write_document(sink: Sink, doc: DocumentResult, *, with_json: bool = True
                   ) -> dict[str, str]:
    """Write the document's files; returns ``{"markdown", "json", "pages"}`` -> URI.

    A quarantined document also gets its ``_quarantine`` record (key ``"quarantine"``).
    One whose bytes were never read (no ``doc_id``) gets only that record. This does not
    mark the document done: call :func:`mark_done` once its vectors are stored too.
    ``with_json=False`` leaves document.json (the file that tells the outcome) to
    :func:`write_document_json`, which the load stage calls after the vectors and the
    done marker, so that no document.json says ``ok`` before they exist.
    """
    uris: dict[str, str] = {}
    if doc.doc_id:
        paths = _output_paths(doc)
        uris = {name: sink.uri(rel) for name, rel in paths.items()}
        sink.write_text(paths["markdown"], render_markdown(doc))
        sink.write_text(paths["pages"], render_pages_jsonl(doc))
        if with_json:
            write_document_json(sink, doc, uris)
    if doc.outcome == DocumentOutcome.QUARANTINED:
        uris["quarantine"] = write_quarantine(sink, doc)
    return uris


def write_document_json(sink: Sink, doc: DocumentResult, uris: dict[str, str]) -> None:
    """document.json, naming every output file (the last of a document's files)."""
    stored = doc.model_copy(update={"outputs": {**doc.outputs, **uris}})
    sink.write_text(_output_paths(doc)["json"], document_json(stored))


def write_quarantine(sink: Sink, doc: DocumentResult) -> str:
    """Record why a document failed, so a later run or a person can retry it."""
    record = {
        "source": doc.source,
        "doc_id": doc.doc_id,
        "sha256": doc.sha256,
        "config_hash": doc.config_hash,
        "outcome": doc.outcome.value,
        "reason": doc.reason,
        "retryable": doc.retryable,
        "time_limit_s": doc.time_limit_s,
        "page_count": doc.page_count,
        "format": doc.format,
        "quarantined_at": datetime.now(UTC).isoformat(),
    }
    return sink.write_text(quarantine_path(doc), json.dumps(record, indent=1))


def read_quarantine(sink: Sink, doc: DocumentResult) -> dict[str, Any] | None:
    """The quarantine record written for this document's bytes (or source), if any."""
    text = sink.read_text(quarantine_path(doc))
    return None if text is None else dict(json.loads(text))


def _summary(doc: DocumentResult, outputs: dict[str, str]) -> dict[str, Any]:
    return {
        "version": INDEX_VERSION,
        "sha256": doc.sha256,
        "config_hash": doc.config_hash,
        "doc_id": doc.doc_id,
        "source": doc.source,
        "outcome": doc.outcome.value,
        "page_count": doc.page_count,
        "pages_ok": doc.pages_ok,
        "pages_fallback": doc.pages_fallback,
        "pages_quarantined": doc.pages_quarantined,
        "engine": doc.engine,
        "chunks": doc.chunks,
        "vector_table": doc.vector_table,
        "outputs": outputs,
        "paths": _output_paths(doc),
        "completed_at": datetime.now(UTC).isoformat(),
    }


def mark_done(sink: Sink, doc: DocumentResult, outputs: dict[str, str] | None = None) -> str:
    """Write the done-index entry (last step of a document); returns its URI.

    Clears an earlier quarantine record of the same bytes: the retry succeeded.

    Raises:
        ValueError: the document is quarantined or failed transiently (not done), or
            has no content hash.
    """
    if doc.outcome == DocumentOutcome.QUARANTINED or doc.retryable:
        raise ValueError(f"{doc.source}: a {doc.outcome.value} document is not done")
    if not (doc.sha256 and doc.doc_id and doc.config_hash):
        raise ValueError(f"{doc.source}: sha256, doc_id and config_hash are needed")
    files = {k: v for k, v in (outputs or doc.outputs).items() if k != "quarantine"}
    entry = _summary(doc, files or {k: sink.uri(v) for k, v in _output_paths(doc).items()})
    uri = sink.write_text(index_path(doc.sha256, doc.config_hash), json.dumps(entry, indent=1))
    if sink.exists(quarantine_path(doc)):
        sink.delete_prefix(quarantine_path(doc))
    return uri


def find_done(sink: Sink, sha256: str, config_hash: str) -> DocumentResult | None:
    """The stored result of an earlier run for these bytes + config (``cached=True``).

    None when there is no index entry, or it or its document.json is missing or
    unreadable: the document is then simply processed again.
    """
    text = sink.read_text(index_path(sha256, config_hash))
    if text is None:
        return None
    try:
        entry = json.loads(text)
        body = sink.read_text(str(entry["paths"]["json"]))
        if body is None:
            log.warning("done-index %s points to a missing document.json", sha256[:12])
            return None
        doc = read_document_json(body)
    except (ValueError, KeyError, TypeError, ValidationError) as exc:
        log.warning("done-index entry %s unreadable (%s); reprocessing", sha256[:12], exc)
        return None
    if (doc.sha256, doc.config_hash) != (sha256, config_hash):
        return None  # the folder holds another settings' result now: not this one's

    return doc.model_copy(
        update={
            "cached": True,
            "outputs": dict(entry.get("outputs", {})),
            "chunks": int(entry.get("chunks", doc.chunks)),
            "vector_table": str(entry.get("vector_table", doc.vector_table)),
        }
    )
