"""Re-ingest documents regardless of the done index: after a model, prompt or chunking
change, or to rebuild a vector store. Vectors are replaced per document, not duplicated."""

from __future__ import annotations

from typing import Any

from prefect import flow

from folio.settings.vocabulary import EngineName, RouteRequest
from folio_prefect.flows.ingest import ingest


@flow(name="folio-reindex",
      description="Re-ingest given sources or a prefix with reprocess=True (replaces outputs "
                  "and vectors).")
def reindex(
    sources: list[str] | None = None,
    prefix: str | None = None,
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteRequest = "default",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``folio-ingest`` with ``reprocess=True`` over ``sources`` and ``prefix``.

    Args:
        sources: PDFs to re-ingest (local paths the worker can read, or s3:// URIs).
        prefix: a folder or s3://bucket/prefix: every PDF under it is re-ingested.
        out: the output folder or s3://bucket/prefix the documents were ingested into.
        engine: the OCR engine for pages without a trustworthy text layer.
        route: auto (trust good text layers), ocr (OCR every page) or text-layer (never OCR);
            default: ocr for a vision model (vllm, openai), auto for the others.
        settings: overrides of any PipelineConfig field, as dotted keys ("render.max_dpi").
    """
    targets = [*(sources or []), *([prefix] if prefix else [])]
    if not targets:
        raise ValueError("folio-reindex needs sources or a prefix")
    return ingest(sources=targets, out=out, engine=engine, route=route, reprocess=True,
                  settings=settings)
