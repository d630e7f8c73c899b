"""Everything folio keeps under an output location, a local folder or an S3 prefix,
goes through this one interface: outputs, the done-index, quarantine records, and the
sweep's claims, done ledger and failures (:mod:`folio.claims`). The names folio uses
under it are in :mod:`folio.io.layout`.

Paths given to a sink are relative (``slug/document.md``) and checked; a reader never
sees half a file: local writes go to a temp file and are renamed into place, and S3 PUTs
are atomic by nature. Conditional writes (create-if-absent, compare-and-swap on an ETag)
are S3's ``If-None-Match`` / ``If-Match`` there, a hard link and a file lock here.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from folio.errors import ConfigError, StorageError
from folio.io import nofollow
from folio.io import s3 as s3io
from folio.io.keys import check_relpath
from folio.settings.config import S3Settings

log = logging.getLogger(__name__)

__all__ = ["LocalSink", "S3Sink", "Sink", "open_sink"]


@runtime_checkable
class Sink(Protocol):
    """A place to write output files; every method takes a path relative to its root."""

    def write_bytes(self, relpath: str, data: bytes) -> str:
        """Write (replace) atomically; returns :meth:`uri`."""
        ...

    def write_text(self, relpath: str, text: str) -> str: ...

    def write_if_absent(self, relpath: str, data: bytes) -> bool:
        """Create only if nothing is there yet; False when it already existed."""
        ...

    def read_text(self, relpath: str) -> str | None:
        """The file's text, or None when it does not exist."""
        ...

    def exists(self, relpath: str) -> bool: ...

    def uri(self, relpath: str) -> str:
        """A local path or ``s3://`` URI a person or another tool can open."""
        ...

    def delete_prefix(self, relpath: str) -> int:
        """Delete a file or a whole folder; returns how many files went."""
        ...

    # small records with conditions (the sweep's claims and ledger)
    def create(self, relpath: str, data: bytes) -> str | None:
        """Create only if absent; the new object's ETag, or None when it existed."""
        ...

    def read(self, relpath: str) -> tuple[bytes, str] | None:
        """The bytes and their ETag, or None when absent."""
        ...

    def replace(self, relpath: str, data: bytes, etag: str) -> str | None:
        """Replace only if the ETag is still ``etag``; the new ETag, or None when the
        object changed or vanished. The ETag may be a local guess: a later ``replace``
        with it may fail though nobody else wrote, and callers then re-read and retry."""
        ...

    def delete(self, relpath: str) -> None:
        """Delete one file (nothing when it is already gone)."""
        ...

    def names(self, prefix: str) -> Iterator[str]:
        """Paths (relative to the sink) of every file under the folder ``prefix``."""
        ...


def _md5_etag(body: bytes) -> str:
    """The ETag S3 gives a single-part upload without SSE-KMS (MinIO, R2, moto alike)."""
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


class LocalSink:
    """Outputs in a local folder (created on first write)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser().absolute()

    def __repr__(self) -> str:
        return f"LocalSink({str(self.root)!r})"

    def _path(self, relpath: str) -> Path:
        return self.root / check_relpath(relpath)

    def _no_links(self, path: Path) -> None:
        """Refuse to write through a symbolic link inside the output folder: one planted
        there (``out/docs -> /home/someone/.ssh``) would take folio's writes elsewhere.
        The output folder itself may be a link (the user named it); the file's own name
        is replaced, never followed (``os.replace``).

        Raises:
            StorageError: a folder between the output folder and ``path`` is a link.
        """
        current = self.root
        for part in path.relative_to(self.root).parts[:-1]:
            current = current / part
            if current.is_symlink():
                raise StorageError(f"write {path}: {current} is a symbolic link inside the "
                                   "output folder; folio does not write through links there")

    def _temp_copy(self, path: Path, data: bytes) -> Path:
        """A fully written, fsynced temp file next to ``path`` (same file system).

        Created with mode 0666 for the kernel to apply the umask, as to any new file:
        ``mkstemp``'s 0600 went with the rename into every output, which the service
        serving document.md and pages.jsonl then could not read.
        """
        self._no_links(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
                break
            except FileExistsError:  # a name another writer drew: draw again
                continue
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
        except BaseException:
            os.unlink(tmp)
            raise
        return Path(tmp)

    def write_bytes(self, relpath: str, data: bytes) -> str:
        path = self._path(relpath)
        try:
            tmp = self._temp_copy(path, data)
            os.replace(tmp, path)
        except OSError as exc:
            raise StorageError(f"write {path}: {exc.strerror or type(exc).__name__}") from exc
        return str(path)

    def write_text(self, relpath: str, text: str) -> str:
        return self.write_bytes(relpath, text.encode("utf-8"))

    def write_if_absent(self, relpath: str, data: bytes) -> bool:
        """Atomic create: ``link`` of a complete temp file fails if the name exists."""
        path = self._path(relpath)
        try:
            tmp = self._temp_copy(path, data)
        except OSError as exc:
            raise StorageError(f"write {path}: {exc.strerror or type(exc).__name__}") from exc
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        except OSError as exc:
            raise StorageError(f"write {path}: {exc.strerror or type(exc).__name__}") from exc
        finally:
            tmp.unlink(missing_ok=True)
        return True

    def read_text(self, relpath: str) -> str | None:
        try:
            return self._path(relpath).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"read {self._path(relpath)}: {exc.strerror}") from exc

    def exists(self, relpath: str) -> bool:
        return self._path(relpath).exists()

    def uri(self, relpath: str) -> str:
        return str(self._path(relpath))

    def delete_prefix(self, relpath: str) -> int:
        # never through a link between the output folder and the leaf (folio.io.nofollow)
        return nofollow.remove(self.root, check_relpath(relpath))

    @staticmethod
    def _etag(body: bytes) -> str:
        return hashlib.sha256(body).hexdigest()

    def create(self, relpath: str, data: bytes) -> str | None:
        return self._etag(data) if self.write_if_absent(relpath, data) else None

    def read(self, relpath: str) -> tuple[bytes, str] | None:
        path = self._path(relpath)
        try:
            body = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"read {path}: {exc.strerror or type(exc).__name__}") from exc
        return body, self._etag(body)

    def replace(self, relpath: str, data: bytes, etag: str) -> str | None:
        """Compare-and-swap under a lock file beside the record: safe between the
        processes of one host (laptops; a fleet shares an S3 prefix instead)."""
        path = self._path(relpath)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._no_links(path)
            # never through a link planted at the lock's name (it would create its target)
            fd = os.open(path.with_name(f".{path.name}.lock"),
                         os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
            with os.fdopen(fd, "a") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                current = self.read(relpath)
                if current is None or current[1] != etag:
                    return None
                os.replace(self._temp_copy(path, data), path)
        except OSError as exc:
            raise StorageError(f"write {path}: {exc.strerror or type(exc).__name__}") from exc
        return self._etag(data)

    def delete(self, relpath: str) -> None:
        nofollow.unlink(self.root, check_relpath(relpath))

    def names(self, prefix: str) -> Iterator[str]:
        base = self._path(prefix.rstrip("/"))
        if not base.is_dir():
            return
        try:  # a listing through a planted link would list another folder: none
            self._no_links(base / "-")
        except StorageError as exc:
            log.warning("%s: not listed", exc)
            return
        if base.is_symlink():
            log.warning("%s is a symbolic link inside the output folder: not listed", base)
            return
        for folder, _, files in os.walk(base):
            for name in files:
                if not name.startswith("."):  # temp and lock files
                    yield (Path(folder) / name).relative_to(self.root).as_posix()


class S3Sink:
    """Outputs under ``s3://bucket/prefix/``."""

    def __init__(self, bucket: str, prefix: str, client: Any) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = client

    def __repr__(self) -> str:
        return f"S3Sink('s3://{self.bucket}/{self.prefix}')"

    def _key(self, relpath: str) -> str:
        rel = check_relpath(relpath)
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def write_bytes(self, relpath: str, data: bytes) -> str:
        key = self._key(relpath)
        s3io.put_bytes(self.client, self.bucket, key, data, content_type=_content_type(key))
        return f"s3://{self.bucket}/{key}"

    def write_text(self, relpath: str, text: str) -> str:
        return self.write_bytes(relpath, text.encode("utf-8"))

    def write_if_absent(self, relpath: str, data: bytes) -> bool:
        return s3io.put_if_absent(self.client, self.bucket, self._key(relpath), data)

    def read_text(self, relpath: str) -> str | None:
        return s3io.get_text(self.client, self.bucket, self._key(relpath))

    def exists(self, relpath: str) -> bool:
        return s3io.head_object(self.client, self.bucket, self._key(relpath)) is not None

    def uri(self, relpath: str) -> str:
        return f"s3://{self.bucket}/{self._key(relpath)}"

    def delete_prefix(self, relpath: str) -> int:
        key = self._key(relpath)
        removed = s3io.delete_prefix(self.client, self.bucket, key + "/")
        if s3io.head_object(self.client, self.bucket, key) is not None:
            s3io.delete_object(self.client, self.bucket, key)
            removed += 1
        return removed

    def create(self, relpath: str, data: bytes) -> str | None:
        return _md5_etag(data) if self.write_if_absent(relpath, data) else None

    def read(self, relpath: str) -> tuple[bytes, str] | None:
        # HEAD before GET: the ETag is never newer than the body, so a swap based on a
        # body that changed in between fails instead of overwriting unseen data
        key = self._key(relpath)
        head = s3io.head_object(self.client, self.bucket, key)
        if head is None:
            return None
        body = s3io.get_bytes(self.client, self.bucket, key)
        return None if body is None else (body, head.etag)

    def replace(self, relpath: str, data: bytes, etag: str) -> str | None:
        ok = s3io.put_if_match(self.client, self.bucket, self._key(relpath), data, etag)
        return _md5_etag(data) if ok else None

    def delete(self, relpath: str) -> None:
        s3io.delete_object(self.client, self.bucket, self._key(relpath))

    def names(self, prefix: str) -> Iterator[str]:
        strip = len(f"{self.prefix}/") if self.prefix else 0
        for ref in s3io.list_objects(self.client, self.bucket, self._key(prefix.rstrip("/")) + "/"):
            yield ref.key[strip:]


_CONTENT_TYPES = {
    ".md": "text/markdown; charset=utf-8",
    ".json": "application/json",
    ".jsonl": "application/x-ndjson",
    ".txt": "text/plain; charset=utf-8",
    ".png": "image/png",  # figure crops (folio.figures): a browser shows them
    ".jpg": "image/jpeg",
}


def _content_type(key: str) -> str | None:
    return _CONTENT_TYPES.get(os.path.splitext(key)[1].lower())


def open_sink(dest: str, s3: S3Settings) -> Sink:
    """A sink for ``dest``: ``s3://bucket/prefix``, a local folder, or ``file://`` path.

    Raises:
        ConfigError: an unsupported scheme or a local destination that is a file.
    """
    scheme, sep, rest = dest.partition("://")
    if sep and scheme.lower() == "s3":
        bucket, prefix = s3io.parse_s3_uri(dest)
        return S3Sink(bucket, prefix, s3io.client_for(s3))
    if sep and scheme.lower() != "file":
        raise ConfigError(f"unsupported output {dest!r}: use a local folder or s3://bucket/prefix")
    root = Path(rest if sep else dest).expanduser()
    if root.exists() and not root.is_dir():
        raise ConfigError(f"output {dest!r} exists and is not a folder")
    return LocalSink(root)
