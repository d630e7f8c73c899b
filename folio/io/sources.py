"""Where PDFs come from: local files and folders, or ``s3://bucket/prefix``.

Discovery is cheap and deterministic (sorted, de-duplicated), so two runs over the same
inputs see the same documents in the same order; fetching is separate so the pipeline can
fetch lazily, one document at a time.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from folio.errors import ConfigError
from folio.io import s3 as s3io
from folio.io.keys import safe_key
from folio.settings.config import S3Settings

__all__ = ["SourceRef", "discover", "fetch"]


class SourceRef(BaseModel, frozen=True):
    """One input document before it is read: enough to fetch it and report on it."""

    uri: str  # absolute local path, or s3://bucket/key
    size: int
    name: str  # file name (last key segment), for display only: never used as a path
    etag: str | None = None  # S3 only
    mtime: datetime | None = None

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")


def _is_pdf_name(name: str) -> bool:
    return name.lower().endswith(".pdf")


def _local_ref(path: Path) -> SourceRef:
    stat = path.stat()
    return SourceRef(
        uri=str(path),
        size=stat.st_size,
        name=path.name,
        mtime=datetime.fromtimestamp(stat.st_mtime).astimezone(),
    )


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (ValueError, OSError):
        return False
    return True


def _walk_pdfs(root: Path) -> Iterator[Path]:
    """``*.pdf`` (any case) under ``root``; symlinked folders are not entered and
    symlinked files only count when they point inside ``root`` (no escaping the tree)."""
    real_root = root.resolve()
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in files:
            path = Path(folder) / name
            if not _is_pdf_name(name) or not path.is_file():
                continue
            if path.is_symlink() and not _inside(path, real_root):
                continue
            yield path


def _iter_local(uri: str) -> Iterator[SourceRef]:
    text = uri.removeprefix("file://")
    path = Path(text).expanduser().absolute()
    if path.is_file():
        yield _local_ref(path)  # named explicitly: taken whatever its extension
    elif path.is_dir():
        yield from (_local_ref(p) for p in _walk_pdfs(path))
    else:
        raise ConfigError(f"input not found: {uri!r} (no such file or folder)")


def _iter_s3(uri: str, settings: S3Settings) -> Iterator[SourceRef]:
    """PDF keys under a prefix, read as a folder: ``s3://b/in`` lists ``in/...`` and an
    exact key ``in``, never ``inbox/...``; page by page, as S3 answers."""
    bucket, prefix = s3io.parse_s3_uri(uri)
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    client = s3io.client_for(settings)
    for obj in s3io.list_objects(client, bucket, prefix):
        if _is_pdf_name(obj.key) and (obj.key == prefix or obj.key.startswith(folder)):
            yield SourceRef(uri=obj.uri, size=obj.size, name=obj.key.rsplit("/", 1)[-1],
                            etag=obj.etag or None, mtime=obj.last_modified)


def _iter_one(uri: str, settings: S3Settings) -> Iterator[SourceRef]:
    if not uri.strip():  # Path("") is the current folder: a stray "" would ingest it
        raise ConfigError("an empty input: give a PDF, a folder or s3://bucket/prefix")
    scheme, sep, _ = uri.partition("://")
    if not sep or scheme.lower() == "file":
        return _iter_local(uri)
    if scheme.lower() == "s3":
        return _iter_s3(uri, settings)
    raise ConfigError(f"unsupported input {uri!r}: use a local path or s3://bucket/prefix")


def _discover_one(uri: str, settings: S3Settings) -> list[SourceRef]:
    return sorted(_iter_one(uri, settings), key=lambda r: r.uri)


def _unique(refs: Iterable[SourceRef]) -> list[SourceRef]:
    seen: set[str] = set()
    out = []
    for ref in refs:
        if ref.uri not in seen:
            seen.add(ref.uri)
            out.append(ref)
    return out


def discover(uris: list[str], s3: S3Settings) -> list[SourceRef]:
    """All input documents named by ``uris``, in argument order, each listed once.

    A local file is taken as is; a local folder yields its ``*.pdf`` recursively
    (sorted); ``s3://bucket/prefix`` yields the ``.pdf`` keys under it.

    Raises:
        ConfigError: a local path does not exist, an unsupported scheme, or the bucket
            is missing / not accessible.
        StorageError: S3 could not be reached.
    """
    if not uris:
        raise ConfigError("no inputs given")
    return _unique(ref for uri in uris for ref in _discover_one(uri, s3))


def has_documents(uris: list[str], s3: S3Settings) -> bool:
    """Whether any of ``uris`` holds a document, reading only as far as the first (a check
    before a run: the run lists everything itself).

    Raises:
        ConfigError, StorageError: as :func:`discover`.
    """
    if not uris:
        raise ConfigError("no inputs given")
    found = False
    for uri in uris:  # every source is checked, so a missing one is reported
        found = next(_iter_one(uri, s3), None) is not None or found
    return found


def fetch(ref: SourceRef, dest_dir: Path, s3: S3Settings) -> Path:
    """A local path with the document's bytes: the file itself, or a download.

    Downloads are named ``{hash of the URI}-{safe name}`` in ``dest_dir``, so keys that
    sanitise to the same name never overwrite each other.
    """
    if not ref.is_s3:
        return Path(ref.uri)
    bucket, key = s3io.parse_s3_uri(ref.uri)
    tag = hashlib.sha256(ref.uri.encode()).hexdigest()[:12]
    dest = dest_dir / f"{tag}-{safe_key(ref.name)}"
    return s3io.download_file(s3io.client_for(s3), bucket, key, dest)
