"""Object keys and file names built from untrusted input (source file names, S3 keys).

A source called ``../../etc/passwd`` or ``a\\x00b.pdf`` must not write outside the output
folder, break an S3 key or confuse a shell; names must also stay readable, so sanitising
keeps letters of any script and only replaces what is dangerous. Pure functions.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["MAX_KEY_BYTES", "check_relpath", "doc_slug", "safe_key"]

#: cap on one sanitised component, in UTF-8 bytes (file systems allow 255; leave room
#: for suffixes such as ``.part`` and temp-file prefixes)
MAX_KEY_BYTES = 120
_HASH_LEN = 10
_SLUG_STEM_BYTES = 60

# Windows device names: harmless on S3, but a sink folder may be synced to Windows.
_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"}
    | {f"com{i}" for i in range(1, 10)}
    | {f"lpt{i}" for i in range(1, 10)}
)
_ALLOWED_PUNCT = frozenset("-_.")
_UNDERSCORES = re.compile(r"_{2,}")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_LEN]


def _keep(ch: str) -> bool:
    """Letters, digits and combining marks of any script, plus ``- _ .``."""
    return ch in _ALLOWED_PUNCT or unicodedata.category(ch)[0] in "LNM"


def _clean(name: str) -> str:
    chars = [ch if _keep(ch) else "_" for ch in name]
    cleaned = _UNDERSCORES.sub("_", "".join(chars))
    # no hidden files, no "." / "..", no leading "-" (read as an option by CLI tools),
    # no trailing dots or spaces (Windows drops them)
    return cleaned.strip("._-")


def _truncate_utf8(text: str, limit: int) -> str:
    """The longest prefix of ``text`` that fits ``limit`` UTF-8 bytes, on a char boundary."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def _split_ext(name: str) -> tuple[str, str]:
    stem, dot, ext = name.rpartition(".")
    if dot and stem and 0 < len(ext) <= 8 and ext.isalnum():
        return stem, "." + ext
    return name, ""


def safe_key(name: str, *, max_bytes: int = MAX_KEY_BYTES) -> str:
    """One safe path component / object-key segment made from an untrusted ``name``.

    NFC-normalised; path separators, control characters and other reserved characters
    become ``_``; no ``..``, no leading dot or dash, never empty. When the result must be
    truncated to ``max_bytes`` (UTF-8), a hash of the full name is kept before the
    extension so that long names sharing a prefix stay distinct. Replacement itself can
    map different names to one key (``a?b`` and ``a*b``): callers that need uniqueness
    add an id (see :func:`doc_slug`).

    Example:
        >>> safe_key("../../etc/passwd")
        'etc_passwd'
        >>> safe_key("Résumé 2024.pdf")
        'Résumé_2024.pdf'
    """
    if max_bytes < 2 * _HASH_LEN:
        raise ValueError(f"max_bytes must be at least {2 * _HASH_LEN}")
    normalized = unicodedata.normalize("NFC", name)
    cleaned = _clean(normalized)
    if not cleaned:
        return f"unnamed-{_digest(normalized)}"
    stem, ext = _split_ext(cleaned)
    if stem.lower() in _RESERVED:
        cleaned = f"{stem}_{ext}"
    if len(cleaned.encode("utf-8")) <= max_bytes:
        return cleaned
    stem, ext = _split_ext(cleaned)
    room = max_bytes - len(ext.encode("utf-8")) - _HASH_LEN - 1
    head = _truncate_utf8(stem, room).rstrip("._-")
    return f"{head}-{_digest(normalized)}{ext}"


def _basename(uri: str) -> str:
    """Last path segment of a local path or URI, query and fragment left alone."""
    return uri.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]


def doc_slug(source_uri: str, doc_id: str) -> str:
    """The per-document output folder name: ``{safe stem}-{doc_id[:12]}``.

    The stem keeps folders recognisable; the id keeps two documents with one file name
    (or one name sanitised alike) apart, and makes the folder the same on every run.

    Example:
        >>> doc_slug("s3://bucket/in/Annual Report.PDF", "0123456789abcdef0123")
        'Annual_Report-0123456789ab'
    """
    ident = safe_key(doc_id)[:12] if doc_id else ""
    if not ident or ident.startswith("unnamed-"):
        raise ValueError("doc_slug needs a doc_id (the document's content hash)")
    stem, ext = _split_ext(_basename(source_uri))
    if ext.lower() != ".pdf":
        stem = _basename(source_uri)
    return f"{safe_key(stem, max_bytes=_SLUG_STEM_BYTES)}-{ident}"


def check_relpath(relpath: str) -> str:
    """Validate a sink-relative path built by folio (``slug/document.md``) and return it.

    Relative paths are composed from sanitised parts, so anything dangerous here is a bug
    upstream: refuse it rather than silently rewriting where data lands.

    Raises:
        ValueError: empty, absolute, backslashes, ``.``/``..`` segments, control chars.
    """
    if not relpath or relpath.startswith("/") or "\\" in relpath:
        raise ValueError(f"unsafe relative path: {relpath!r}")
    for part in relpath.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"unsafe relative path: {relpath!r}")
        if any(unicodedata.category(ch)[0] == "C" for ch in part):
            raise ValueError(f"control character in relative path: {relpath!r}")
    return relpath
