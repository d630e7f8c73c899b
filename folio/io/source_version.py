"""The version of what a trigger names, read where the trigger runs, so that its
idempotency key (:attr:`folio.settings.run_config.IngestRequest.key`) changes when the
source's bytes do: a RAG job that triggers a document again after editing it gets a new
run, and a retried trigger of the same bytes gets the run it already started.

A version is a digest of every entry the request names, as the run's own discovery lists
them (:func:`folio.io.sources.discover_entries`, with the request's S3 settings and globs):
each entry's URI and size, and its S3 ETag or its local modification time. Reading it costs
a ``stat`` per local file or one listing of the prefix (an S3 ``ListObjectsV2`` page per
1000 keys): no byte of a document is read here; a touched but unchanged file gets a new
run, whose document is answered from its done marker (by content hash) without work.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING

from folio.errors import ConfigError

if TYPE_CHECKING:
    from folio.settings.run_config import IngestRequest

log = logging.getLogger(__name__)


def source_version(request: IngestRequest) -> str | None:
    """A digest of the entries the request names (module doc). None when the sources
    cannot be listed for a reason the run will report itself (a path that does not
    exist, a bucket that is not there): the key stays the request's, so retries of it
    still start one run. When S3 or the disk cannot be read for a transient reason, the
    version is the time of the call: a new run, never an old one reused by mistake."""
    from folio.io.sources import discover_entries
    from folio.settings.run_config import resolve_config

    try:
        config = resolve_config(engine=request.engine, route=request.route,
                                reprocess=request.reprocess, settings=request.settings)
        scope = config.sources.model_copy(update={
            name: values for name, values in (("include", request.include),
                                              ("exclude", request.exclude)) if values})
        refs = discover_entries(request.normalized().sources, config.s3, scope).refs
    except ConfigError as err:
        log.info("no version for %s (%s): keyed without one", request.sources, err)
        return None
    except Exception as err:  # S3 or the disk: never reuse an old run on a guess
        log.warning("the version of %s could not be read (%s): starting a new run",
                    request.sources, err)
        return f"unread-{time.time_ns()}"
    digest = hashlib.sha256()
    for ref in refs:
        stamp = ref.etag or (ref.mtime.isoformat() if ref.mtime else "")
        digest.update(f"{ref.uri}\0{ref.size}\0{stamp}\0{ref.skip or ''}\n".encode())
    return f"{len(refs)}-{digest.hexdigest()[:32]}"
