from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.config import S3Settings
from folio.io.sources import SourceRef, discover


@task(name="discover-sources", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5)
def discover_sources(uris: list[str], s3: S3Settings) -> list[SourceRef]:
    """List the PDFs under local paths and s3:// prefixes (retried: listing is I/O)."""
    return discover(uris, s3)
