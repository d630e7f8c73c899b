from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.io.sources import SourceRef
from folio.models import DocumentResult
from folio.pipeline import PreparedDocument, Services, start_document


@task(name="prepare-document", cache_policy=NO_CACHE, task_run_name="prepare {ref.name}")
def prepare_document(ref: SourceRef, services: Services) -> PreparedDocument | DocumentResult:
    """Fetch, hash, skip if done, probe; repair or compress with Ghostscript."""
    return start_document(ref, services)
