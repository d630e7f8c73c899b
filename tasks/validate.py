from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.models import DocumentResult
from folio.pipeline import Services, validate_document


@task(name="validate-pages", cache_policy=NO_CACHE)
def validate_pages(doc: DocumentResult, services: Services) -> DocumentResult:
    """Great Expectations suite over the pages; failing pages are quarantined."""
    return validate_document(doc, services)
