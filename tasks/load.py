from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.models import DocumentResult
from folio.pipeline import Services, load_document


@task(name="load-document", cache_policy=NO_CACHE)
def load(doc: DocumentResult, services: Services) -> DocumentResult:
    """Outputs to the sink, chunks + embeddings to the vector store, then the done marker."""
    return load_document(doc, services)
