from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.errors import TransientError
from folio.io.sources import Discovery, discover_entries
from folio.settings.config import S3Settings, SourceSettings


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
def discover_sources(uris: list[str], s3: S3Settings,
                     scope: SourceSettings | None = None, own: list[str] | None = None
                     ) -> Discovery:
    """List every entry under local paths and s3:// prefixes (within ``scope``'s globs,
    the rest counted; nothing under the run's ``own`` output and work folders)."""
    return discover_entries(uris, s3, scope, own or ())
