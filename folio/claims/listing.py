"""What a sweep sweeps: every object under an S3 prefix, listed page by page.

Every object, not only ``.pdf`` keys: what each is is decided from its content by the
batch that reads it, and a format folio does not read ends ``skipped`` in its report
(recorded as done, so the next sweep does not send it again). Keys ending in ``/`` are
folder markers; the team's include/exclude globs leave keys out, counted by the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

from folio.io import s3 as s3io
from folio.io.s3 import ObjectRef
from folio.io.sources import in_scope, is_own, own_locations
from folio.settings.config import S3Settings, SourceSettings

__all__ = ["list_entries", "list_pdfs"]


def list_entries(uri: str, s3: S3Settings, *, page_size: int = 1000,
                 scope: SourceSettings | None = None,
                 on_excluded: Callable[[ObjectRef], None] | None = None,
                 own: Sequence[str] = ()) -> Iterator[ObjectRef]:
    """Every object under ``s3://bucket/prefix`` as a folder (``in`` lists ``in/...`` and
    the key ``in`` itself, never ``inbox/...``), streamed page by page in key order;
    those ``scope``'s globs leave out go to ``on_excluded`` instead, and nothing under
    the sweep's ``own`` output prefix is listed (outputs under the prefix swept)."""
    mine = own_locations(own)
    bucket, prefix = s3io.parse_s3_uri(uri)
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    client = s3io.client_for(s3)
    for obj in s3io.list_objects(client, bucket, prefix, page_size=page_size):
        exact = obj.key == prefix
        if obj.key.endswith("/") or not (exact or obj.key.startswith(folder)):
            continue
        if mine and is_own(obj.uri, f"s3://{bucket}/{folder}", mine):
            continue
        if scope is not None and not exact and not in_scope(obj.key[len(folder):], scope):
            if on_excluded is not None:
                on_excluded(obj)
            continue
        yield obj


#: the earlier name (it listed ``.pdf`` keys only), for callers not yet renamed
list_pdfs = list_entries
