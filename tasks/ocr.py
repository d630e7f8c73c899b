from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.models import DocumentResult
from folio.pipeline import PreparedDocument, Services, ocr_document


def _name(parameters: dict[str, object]) -> str:
    prep = parameters["prep"]
    doc = prep.result if isinstance(prep, PreparedDocument) else prep
    return f"ocr {getattr(doc, 'source', '?').rsplit('/', 1)[-1]}"


@task(name="ocr-pages", cache_policy=NO_CACHE, task_run_name=_name)  # type: ignore[arg-type]
def ocr_pages(prep: PreparedDocument | DocumentResult, services: Services) -> DocumentResult:
    """Render, route and OCR every page of one document (one task per document)."""
    return ocr_document(prep, services)
