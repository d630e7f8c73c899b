"""What a sweep sweeps: the PDFs under an S3 prefix, listed page by page."""

from __future__ import annotations

from collections.abc import Iterator

from folio.io import s3 as s3io
from folio.io.s3 import ObjectRef
from folio.settings.config import S3Settings

__all__ = ["list_pdfs"]


def list_pdfs(uri: str, s3: S3Settings, *, page_size: int = 1000) -> Iterator[ObjectRef]:
    """Every ``.pdf`` under ``s3://bucket/prefix`` as a folder (``in`` lists ``in/...`` and
    the key ``in`` itself, never ``inbox/...``), streamed page by page in key order."""
    bucket, prefix = s3io.parse_s3_uri(uri)
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    client = s3io.client_for(s3)
    for obj in s3io.list_objects(client, bucket, prefix, page_size=page_size):
        if obj.key.lower().endswith(".pdf") and (obj.key == prefix or obj.key.startswith(folder)):
            yield obj
