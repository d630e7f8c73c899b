"""Where documents come from: local files and folders, or ``s3://bucket/prefix``.

Discovery is cheap and deterministic (sorted, de-duplicated), so two runs over the same
inputs see the same entries in the same order; fetching is separate so the pipeline can
fetch lazily, one document at a time.

Every entry under a source is listed, whatever its name: what it is is decided from its
content once fetched (:mod:`folio.formats.detect`), and what folio does not read ends as
a ``skipped`` outcome with its reason, never dropped. Entries that are no file of the
source are listed with the reason already set (:attr:`SourceRef.skip`): a symlink to a
file outside the source, a broken symlink, a symlink to a folder (never followed), a
FIFO, socket or device. The team's own ``include``/``exclude`` globs
(:class:`~folio.settings.config.SourceSettings`) leave entries out; those are counted
(:attr:`Discovery.excluded`), not listed. S3 keys ending in ``/`` are folder markers, not
entries. The run's own locations (its output folder or prefix and its work folder, when
they lie inside a source: ``folio ingest . --out out``) are not inputs and not listed.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import stat as stat_mod
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from folio.errors import ConfigError
from folio.io import s3 as s3io
from folio.io.keys import safe_key
from folio.io.layout import RECORD_FOLDERS
from folio.io.source_open import copy_checked
from folio.settings.config import S3Settings, SourceSettings

__all__ = ["Discovery", "SourceRef", "discover", "discover_entries", "fetch", "in_scope",
           "is_own", "list_s3_entries", "own_locations"]


class SourceRef(BaseModel, frozen=True):
    """One input entry before it is read: enough to fetch it and report on it."""

    uri: str  # absolute local path, or s3://bucket/key
    size: int
    name: str  # file name (last key segment), for display only: never used as a path
    etag: str | None = None  # S3 only
    mtime: datetime | None = None
    #: set when the entry is listed but cannot be read as a file of the source: the
    #: reason of its ``skipped`` outcome ("symlink to a file outside the source")
    skip: str | None = None
    #: a local file's identity as listed (device, inode) and its source folder's real
    #: path: the file read is checked to be this one, inside it (folio.io.source_open)
    device: int | None = None
    inode: int | None = None
    root: str | None = None
    #: listed through a link (one to a file inside the source, or named by the user)
    link: bool = False

    @property
    def is_s3(self) -> bool:
        return self.uri.startswith("s3://")


class Discovery(BaseModel):
    """What the sources hold: every entry to report on, and how many the globs left out."""

    refs: list[SourceRef]
    excluded: int = 0


def in_scope(relative: str, scope: SourceSettings) -> bool:
    """Whether an entry at ``relative`` (below its source folder or prefix, ``/``
    separated) is looked at: it matches an include glob (when there are any) and no
    exclude glob. fnmatch's rules, case-sensitive: ``*`` also crosses ``/``."""
    if scope.include and not any(fnmatch.fnmatchcase(relative, g) for g in scope.include):
        return False
    return not any(fnmatch.fnmatchcase(relative, g) for g in scope.exclude)


def _local_ref(path: Path, skip: str | None = None, root: Path | None = None) -> SourceRef:
    try:
        stat = path.stat() if skip is None else path.lstat()
    except OSError:
        stat = path.lstat()
    readable = skip is None
    return SourceRef(
        uri=str(path),
        size=stat.st_size if readable else 0,
        name=path.name,
        mtime=datetime.fromtimestamp(stat.st_mtime).astimezone(),
        skip=skip,
        device=stat.st_dev if readable else None,
        inode=stat.st_ino if readable else None,
        root=str(root) if readable and root is not None else None,
        link=readable and path.is_symlink(),
    )


def _inside(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except (ValueError, OSError):
        return False
    return True


def _why_not_readable(path: Path, real_root: Path) -> str | None:
    """Why a listed entry is no file of the source to read; None for a regular file
    (or a symlink to one inside the source)."""
    if path.is_symlink():
        if not path.exists():
            return "broken symlink"
        if path.is_dir():
            return "symlink to a folder (folders are not followed through links)"
        if not _inside(path, real_root):
            return "symlink to a file outside the source"
    try:
        mode = path.stat().st_mode
    except OSError as err:
        return f"cannot be read: {err.strerror or err}"
    if not stat_mod.S_ISREG(mode):
        return "not a regular file"
    return None


#: folio's record folders right under an output location (folio.io.layout)
#: a document's output folder, ``{stem}-{id12}`` (folio.io.keys.doc_slug), and its files
_DOC_FOLDER = re.compile(r"[^/]+-[0-9a-f]{12}")
_DOC_FILES = frozenset({"document.md", "document.json", "pages.jsonl"})


def own_locations(uris: Iterable[str]) -> list[str]:
    """The run's own locations (outputs, work folder) as folders ending in ``/``: a local
    one resolved, an S3 one as ``s3://bucket/prefix/``."""
    found: list[str] = []
    for uri in uris:
        if not uri:
            continue
        if uri.lower().startswith("s3://"):
            found.append(uri.rstrip("/") + "/")
        elif "://" not in uri or uri.startswith("file://"):
            path = Path(uri.removeprefix("file://")).expanduser().absolute().resolve()
            found.append(str(path).rstrip("/") + "/")
    return found


def is_own(entry: str, source: str, own: Iterable[str]) -> bool:
    """Whether ``entry`` (a path or URI under the ``source`` folder, both as strings,
    the source ending in ``/``) is one of the run's own files: anything under an own
    location inside the source; where the outputs *are* the source (or above it), what
    folio writes there: its record folders (``_index/``, ``_claims/``, ...) and the
    files of its document folders."""
    for mine in own:
        if not entry.startswith(mine):
            continue
        if mine.startswith(source) and mine != source:
            return True
        rel = entry[len(mine):]
        first, _, rest = rel.partition("/")
        # a document folder's files, its figure crops (folio.figures) included
        if first in RECORD_FOLDERS or (
                (rest in _DOC_FILES or rest.startswith("figures/"))
                and _DOC_FOLDER.fullmatch(first) is not None):
            return True
    return False


def _walk(root: Path, scope: SourceSettings, excluded: list[int],
          own: list[str]) -> Iterator[SourceRef]:
    """Every entry under ``root``: regular files, and the rest with their skip reason;
    symlinked folders are listed, never entered (no escaping the tree, no loops)."""
    real_root = root.resolve()
    source = str(real_root).rstrip("/") + "/"
    inside = {mine for mine in own if mine.startswith(source) and mine != source}
    for folder, dirs, files in os.walk(root, followlinks=False):
        real_folder = Path(folder).resolve()
        dirs[:] = sorted(d for d in dirs if (Path(folder) / d).is_symlink()
                         or f"{real_folder / d}/" not in inside)
        names = list(files) + [d for d in dirs if (Path(folder) / d).is_symlink()]
        for name in names:
            path = Path(folder) / name
            if own and is_own(str(real_folder / name), source, own):
                continue
            if not in_scope(path.relative_to(root).as_posix(), scope):
                excluded[0] += 1
                continue
            yield _local_ref(path, _why_not_readable(path, real_root), real_root)


def _iter_local(uri: str, scope: SourceSettings, excluded: list[int],
                own: list[str]) -> Iterator[SourceRef]:
    text = uri.removeprefix("file://")
    path = Path(text).expanduser().absolute()
    if path.is_dir():
        yield from _walk(path, scope, excluded, own)
    elif path.exists() or path.is_symlink():
        # named explicitly: taken whatever its name, outside any glob
        yield _local_ref(path, _why_not_readable(path, path.resolve().parent)
                         if not path.is_symlink() else _named_link(path), path.resolve().parent)
    else:
        raise ConfigError(f"input not found: {uri!r} (no such file or folder)")


def _named_link(path: Path) -> str | None:
    """A symlink named as a source is the user's own choice: followed to a file."""
    if not path.exists():
        return "broken symlink"
    return None if path.is_file() else "not a regular file"


def list_s3_entries(uri: str, s3: S3Settings, *, page_size: int = 1000,
                    scope: SourceSettings | None = None,
                    on_excluded: Callable[[s3io.ObjectRef], None] | None = None,
                    own: Iterable[str] = ()) -> Iterator[s3io.ObjectRef]:
    """Every object under ``s3://bucket/prefix`` read as a folder (``in`` lists ``in/...``
    and the key ``in`` itself, never ``inbox/...``), streamed page by page in key order, as
    S3 answers. Keys ending in ``/`` are folder markers; nothing under the run's ``own``
    locations is listed (outputs under the source prefix); those ``scope``'s globs leave
    out go to ``on_excluded`` instead. A run's discovery and a sweep's listing both read
    a prefix through this one function."""
    mine = own_locations(own)
    bucket, prefix = s3io.parse_s3_uri(uri)
    folder = prefix if not prefix or prefix.endswith("/") else prefix + "/"
    client = s3io.client_for(s3)
    for obj in s3io.list_objects(client, bucket, prefix, page_size=page_size):
        exact = obj.key == prefix
        if obj.key.endswith("/") or not (exact or obj.key.startswith(folder)):
            continue  # a folder marker, or a sibling (inbox/ under in)
        if mine and is_own(obj.uri, f"s3://{bucket}/{folder}", mine):
            continue
        if scope is not None and not exact and not in_scope(obj.key[len(folder):], scope):
            if on_excluded is not None:
                on_excluded(obj)
            continue
        yield obj


def _iter_s3(uri: str, settings: S3Settings, scope: SourceSettings,
             excluded: list[int], own: list[str]) -> Iterator[SourceRef]:
    def count(_: s3io.ObjectRef) -> None:
        excluded[0] += 1

    for obj in list_s3_entries(uri, settings, scope=scope, on_excluded=count, own=own):
        yield SourceRef(uri=obj.uri, size=obj.size, name=obj.key.rsplit("/", 1)[-1],
                        etag=obj.etag or None, mtime=obj.last_modified)


def _iter_one(uri: str, settings: S3Settings, scope: SourceSettings | None = None,
              excluded: list[int] | None = None, own: Iterable[str] = ()
              ) -> Iterator[SourceRef]:
    scope = scope if scope is not None else SourceSettings()
    excluded = excluded if excluded is not None else [0]
    mine = own_locations(own)
    if not uri.strip():  # Path("") is the current folder: a stray "" would ingest it
        raise ConfigError("an empty input: give a file, a folder or s3://bucket/prefix")
    scheme, sep, _ = uri.partition("://")
    if not sep or scheme.lower() == "file":
        return _iter_local(uri, scope, excluded, mine)
    if scheme.lower() == "s3":
        return _iter_s3(uri, settings, scope, excluded, mine)
    raise ConfigError(f"unsupported input {uri!r}: use a local path or s3://bucket/prefix")


def _unique(refs: Iterable[SourceRef]) -> list[SourceRef]:
    seen: set[str] = set()
    out = []
    for ref in refs:
        if ref.uri not in seen:
            seen.add(ref.uri)
            out.append(ref)
    return out


def discover_entries(uris: list[str], s3: S3Settings,
                     scope: SourceSettings | None = None, own: Iterable[str] = ()
                     ) -> Discovery:
    """Every entry named by ``uris``, in argument order, each listed once, and the count
    the globs of ``scope`` left out; nothing under the run's ``own`` locations (its
    output and work folders, local paths or s3:// prefixes).

    A local file is taken as is; a local folder yields every entry under it recursively
    (sorted); ``s3://bucket/prefix`` yields every key under it.

    Raises:
        ConfigError: a local path does not exist, an unsupported scheme, or the bucket
            is missing / not accessible.
        StorageError: S3 could not be reached.
    """
    if not uris:
        raise ConfigError("no inputs given")
    excluded = [0]
    own = list(own)
    refs = _unique(ref for uri in uris for ref in sorted(
        _iter_one(uri, s3, scope, excluded, own), key=lambda r: r.uri))
    return Discovery(refs=refs, excluded=excluded[0])


def discover(uris: list[str], s3: S3Settings,
             scope: SourceSettings | None = None) -> list[SourceRef]:
    """The entries of :func:`discover_entries`, without the excluded count."""
    return discover_entries(uris, s3, scope).refs


def has_documents(uris: list[str], s3: S3Settings,
                  scope: SourceSettings | None = None, own: Iterable[str] = ()) -> bool:
    """Whether any of ``uris`` holds an entry in scope, reading only as far as the first
    (a check before a run: the run lists everything itself).

    Raises:
        ConfigError, StorageError: as :func:`discover`.
    """
    if not uris:
        raise ConfigError("no inputs given")
    found = False
    for uri in uris:  # every source is checked, so a missing one is reported
        found = next(_iter_one(uri, s3, scope, None, list(own)), None) is not None or found
    return found


def fetch(ref: SourceRef, dest_dir: Path, s3: S3Settings, max_bytes: int | None = None) -> Path:
    """A private copy of the document's bytes in ``dest_dir``: a download, or a local file
    read through one descriptor checked to be the file discovery listed
    (:func:`folio.io.source_open.copy_checked`; SourceChangedError when it is not).

    Copies are named ``{hash of the URI}-{safe name}``, so names that sanitise to the same
    one never overwrite each other.
    """
    tag = hashlib.sha256(ref.uri.encode()).hexdigest()[:12]
    dest = dest_dir / f"{tag}-{safe_key(ref.name)}"
    if not ref.is_s3:
        identity = (ref.device, ref.inode) if ref.device is not None and ref.inode is not None \
            else None
        return copy_checked(ref.uri.removeprefix("file://"), dest, identity=identity,
                            root=ref.root, link_ok=ref.link, max_bytes=max_bytes)
    bucket, key = s3io.parse_s3_uri(ref.uri)
    return s3io.download_file(s3io.client_for(s3), bucket, key, dest)
