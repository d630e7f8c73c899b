from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.errors import TransientError
from folio.io.sources import SourceRef, discover
from folio.settings.config import S3Settings


def retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """Retry infrastructure trouble only; a wrong path or bucket fails at once."""
    try:
        state.result()
    except TransientError:
        return True
    except Exception:
        return False
    return False


@task(name="discover-sources", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=5,
      retry_condition_fn=retry_transient)
def discover_sources(uris: list[str], s3: S3Settings) -> list[SourceRef]:
    """List the PDFs under local paths and s3:// prefixes."""
    return discover(uris, s3)
