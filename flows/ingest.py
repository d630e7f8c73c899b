"""The ingestion flows: a batch of sources, or one document (for UI runs and triggers)."""

from __future__ import annotations

import json
import time
from collections import deque
from pathlib import Path
from typing import Any, cast

from prefect import flow, get_run_logger
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from flows.options import EngineName, RouteMode, build_config
from folio.models import DocumentResult
from folio.pipeline import Services
from folio.report import build_report, markdown_summary
from folio.validation import preload as preload_validation
from tasks.discover import discover_sources
from tasks.load import load
from tasks.ocr import ocr_pages
from tasks.prepare import prepare_document
from tasks.validate import data_docs_dir, data_docs_index, validate_pages

#: each document holds up to four threads (one per stage; later stages wait on earlier ones);
#: documents in flight are bounded by ``limits.document_concurrency``, not by the pool
THREADS_PER_DOCUMENT = 4


@flow(
    name="folio-ingest",
    description="Ingest PDFs from local paths or s3:// prefixes into outputs and a vector store.",
    task_runner=cast(Any, ThreadPoolTaskRunner()),
)
def ingest(
    sources: list[str],
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteMode = "auto",
    reprocess: bool = False,
    report: str | None = None,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest every PDF under ``sources`` into ``out``.

    Args:
        sources: local files or folders, or s3://bucket/prefix URIs.
        out: a local folder or an s3://bucket/prefix for outputs (and the default vector store).
        engine: the OCR engine for pages without a trustworthy text layer.
        route: auto (trust good text layers), ocr (OCR every page) or text-layer (never OCR).
        reprocess: OCR again even when a document is already done with this configuration.
        report: also write the JSON run report to this local path.
        settings: overrides of any PipelineConfig field, as dotted keys ("render.max_dpi").
    """
    started = time.monotonic()
    config = build_config(engine=engine, route=route, reprocess=reprocess, settings=settings)
    if config.validation.enabled:
        preload_validation()
    services = Services(config, out)
    try:
        refs = discover_sources(sources, config.s3)
        get_run_logger().info("%d PDF(s) to ingest into %s", len(refs), out)
        window: deque[PrefectFuture[DocumentResult]] = deque()
        docs: list[DocumentResult] = []
        for ref in refs:  # stage futures chain per document; documents overlap
            if len(window) >= config.limits.document_concurrency:
                docs.append(window.popleft().result())  # bounded documents in flight
            # Prefect resolves futures passed as arguments; its stubs don't say so (Any)
            prep: Any = prepare_document.submit(ref, services)
            ocr: Any = ocr_pages.submit(prep, services)
            checked: Any = validate_pages.submit(ocr, services)
            window.append(load.submit(checked, services))
        docs += [f.result() for f in window]
    finally:
        services.close()
    return finish_run(docs, started=started, out=out, report=report,
                      data_docs=data_docs_dir(services))


@flow(name="folio-ingest-document", description="Ingest one PDF (UI runs and triggers).")
def ingest_document(
    source: str,
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteMode = "auto",
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest one PDF (a local path or an s3:// URI) and return the run report.

    Args:
        source: one PDF (a local path the worker can read, or s3://bucket/key); a
            folder or prefix works too and ingests everything under it.
        out: a local folder or an s3://bucket/prefix for outputs (and the default vector store).
        engine: the OCR engine for pages without a trustworthy text layer.
        route: auto (trust good text layers), ocr (OCR every page) or text-layer (never OCR).
        reprocess: OCR again even when the document is already done with this configuration.
        settings: overrides of any PipelineConfig field, as dotted keys ("render.max_dpi").
    """
    started = time.monotonic()
    config = build_config(engine=engine, route=route, reprocess=reprocess, settings=settings)
    services = Services(config, out)
    try:
        refs = discover_sources([source], config.s3)
        docs = [load(validate_pages(ocr_pages(prepare_document(r, services), services), services),
                     services) for r in refs]
    finally:
        services.close()
    return finish_run(docs, started=started, out=out, report=None,
                      data_docs=data_docs_dir(services))


def finish_run(
    docs: list[DocumentResult], *, started: float, out: str, report: str | None,
    data_docs: Path | None = None,
) -> dict[str, Any]:
    """Check the accounting, publish the artifacts a person reads, write the report."""
    for doc in docs:
        if doc.page_count and doc.pages:
            doc.check_accounting()
    summary = build_report(docs, seconds=time.monotonic() - started, out=out)
    index = data_docs_index(data_docs) if data_docs else None
    publish_artifacts(docs, summary, data_docs=index if index and index.is_file() else None)
    if report:
        path = Path(report)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2))
    return summary


def publish_artifacts(docs: list[DocumentResult], summary: dict[str, Any],
                      data_docs: Path | None) -> None:
    """The run summary (markdown, with links), a table of quarantined pages and why, and
    a link to the Great Expectations Data Docs."""
    create_markdown_artifact(
        markdown_summary(summary, links=True, data_docs=str(data_docs) if data_docs else None),
        key="folio-run-summary", description="folio ingestion summary")
    rows = quarantine_rows(docs)
    if rows:
        create_table_artifact(rows, key="folio-quarantine",
                              description=f"{len(rows)} quarantined page(s) and why")
    if data_docs:
        create_link_artifact(data_docs.as_uri(), link_text="Great Expectations Data Docs",
                             key="folio-data-docs",
                             description="validation results of the latest documents in this "
                                         "output folder (a file on the worker's machine)")


def quarantine_rows(docs: list[DocumentResult]) -> list[dict[str, Any]]:
    """One row per quarantined page (1-based page numbers, as a person counts), and one
    per document quarantined before its pages were known."""
    rows: list[dict[str, Any]] = []
    for doc in docs:
        pages = [p for p in doc.pages if p.outcome == "quarantined"]
        rows += [{"document": doc.source, "page": p.index + 1, "reason": p.reason or doc.reason,
                  "retryable": doc.retryable} for p in pages]
        if not pages and doc.outcome == "quarantined":
            rows.append({"document": doc.source, "page": None, "reason": doc.reason,
                         "retryable": doc.retryable})
    return rows
