"""The ingestion flows: a batch of sources, or one document (for UI runs and triggers)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.artifacts import create_markdown_artifact
from prefect.futures import PrefectFuture
from prefect.task_runners import ThreadPoolTaskRunner

from flows.options import EngineName, RouteMode, build_config
from folio.models import DocumentResult
from folio.pipeline import Services
from folio.report import build_report, markdown_summary
from tasks.discover import discover_sources
from tasks.load import load
from tasks.ocr import ocr_pages
from tasks.prepare import prepare_document
from tasks.validate import validate_pages

#: each document holds up to four threads (one per stage; later stages wait on earlier ones)
THREADS_PER_DOCUMENT = 4


@flow(
    name="folio-ingest",
    description="Ingest PDFs from local paths or s3:// prefixes into outputs and a vector store.",
    task_runner=ThreadPoolTaskRunner(max_workers=2 * THREADS_PER_DOCUMENT),
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
    services = Services(config, out)
    try:
        refs = discover_sources(sources, config.s3)
        get_run_logger().info("%d PDF(s) to ingest into %s", len(refs), out)
        futures: list[PrefectFuture[DocumentResult]] = []
        for ref in refs:  # stage futures chain per document; documents overlap
            prep = prepare_document.submit(ref, services)
            ocr = ocr_pages.submit(prep, services)
            futures.append(load.submit(validate_pages.submit(ocr, services), services))
        docs = [f.result() for f in futures]
    finally:
        services.close()
    return finish_run(docs, started=started, out=out, report=report)


@flow(name="folio-ingest-document", description="Ingest one PDF (UI runs and triggers).")
def ingest_document(
    source: str,
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteMode = "auto",
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest one PDF (a local path or an s3:// URI) and return its report line."""
    started = time.monotonic()
    config = build_config(engine=engine, route=route, reprocess=reprocess, settings=settings)
    services = Services(config, out)
    try:
        refs = discover_sources([source], config.s3)
        docs = [load(validate_pages(ocr_pages(prepare_document(r, services), services), services),
                     services) for r in refs]
    finally:
        services.close()
    return finish_run(docs, started=started, out=out, report=None)


def finish_run(
    docs: list[DocumentResult], *, started: float, out: str, report: str | None
) -> dict[str, Any]:
    """Check the accounting, publish the summary artifact, write the report."""
    for doc in docs:
        if doc.page_count and doc.pages:
            doc.check_accounting()
    summary = build_report(docs, seconds=time.monotonic() - started, out=out)
    create_markdown_artifact(markdown_summary(summary), key="folio-run-summary",
                             description="folio ingestion summary")
    if report:
        path = Path(report)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(summary, indent=2))
    return summary
