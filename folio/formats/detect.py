"""Which kind of input a file is, from its first bytes (and a container's entries).

Why by content: a bucket's names lie (a phone photo saved as ``scan.pdf``, a DOCX without
an extension), and the name decides nothing a reader can check. The rules:

- ``%PDF-`` in the first KiB (as PDF readers accept it) is a PDF;
- an image signature (PNG, JPEG, TIFF, WebP, BMP, GIF, JPEG 2000) is an image when the
  installed Pillow decodes that format, else unsupported;
- a ZIP is told apart by its entries: ``[Content_Types].xml`` with ``word/``, ``ppt/`` or
  ``xl/`` is DOCX, PPTX or XLSX; a ``mimetype`` entry naming an OpenDocument type is ODT,
  ODP or ODS; any other ZIP is ``application/zip``;
- an OLE2 compound file (the CFB header) is DOC, PPT or XLS by the stream its directory
  holds (``WordDocument``, ``PowerPoint Document``, ``Workbook``/``Book``);
- ``{\\rtf`` is RTF; HTML, markdown and plain text are ``text``;
- anything else is unsupported with a mime-like name, except that a file *named* ``.pdf``
  stays a PDF, so random bytes under that name still end as ``not-a-pdf``, as before.
"""

from __future__ import annotations

import os
import struct
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from folio.formats.cfb import CfbError, CompoundFile, is_cfb
from folio.formats.zip_directory import ZipError, central_directory, read_member

__all__ = ["Format", "FormatKind", "detect_bytes", "detect_file"]

FormatKind = Literal["pdf", "image", "office", "text", "unsupported"]

#: bytes read to decide (a PDF header may sit anywhere in the first KiB)
HEAD_BYTES = 8192
_PDF_WINDOW = 1024


class Format(BaseModel, frozen=True):
    """What a file is: its kind (what folio does with it), a short name and a mime type."""

    kind: FormatKind
    name: str  # "pdf", "jpeg", "tiff", "docx", "zip", ...
    mime: str  # "application/pdf", "image/jpeg", "application/zip", ...


_IMAGE_SIGNATURES: tuple[tuple[bytes, int, str, str, str], ...] = (
    # (signature, offset, name, mime, Pillow's format id)
    (b"\x89PNG\r\n\x1a\n", 0, "png", "image/png", "PNG"),
    (b"\xff\xd8\xff", 0, "jpeg", "image/jpeg", "JPEG"),
    (b"II*\x00", 0, "tiff", "image/tiff", "TIFF"),
    (b"MM\x00*", 0, "tiff", "image/tiff", "TIFF"),
    (b"II+\x00", 0, "tiff", "image/tiff", "TIFF"),  # BigTIFF
    (b"GIF87a", 0, "gif", "image/gif", "GIF"),
    (b"GIF89a", 0, "gif", "image/gif", "GIF"),
    (b"BM", 0, "bmp", "image/bmp", "BMP"),
    (b"\x00\x00\x00\x0cjP  \r\n\x87\n", 0, "jpeg2000", "image/jp2", "JPEG2000"),
    (b"\xff\x4f\xff\x51", 0, "jpeg2000", "image/jp2", "JPEG2000"),
)

_OTHER_SIGNATURES: tuple[tuple[bytes, str], ...] = (
    (b"\x1f\x8b", "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"\x7fELF", "application/x-executable"),
    (b"MZ", "application/x-msdownload"),
    (b"BZh", "application/x-bzip2"),
    (b"\xfd7zXZ\x00", "application/x-xz"),
    (b"%!PS", "application/postscript"),
    (b"OggS", "audio/ogg"),
    (b"ID3", "audio/mpeg"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
)

_OOXML = {"word/": ("docx", "application/vnd.openxmlformats-officedocument."
                    "wordprocessingml.document"),
          "ppt/": ("pptx", "application/vnd.openxmlformats-officedocument."
                   "presentationml.presentation"),
          "xl/": ("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")}
_ODF = {"application/vnd.oasis.opendocument.text": "odt",
        "application/vnd.oasis.opendocument.presentation": "odp",
        "application/vnd.oasis.opendocument.spreadsheet": "ods"}
_OLE = (("WordDocument", "doc", "application/msword"),
        ("PowerPoint Document", "ppt", "application/vnd.ms-powerpoint"),
        ("Workbook", "xls", "application/vnd.ms-excel"),
        ("Book", "xls", "application/vnd.ms-excel"),
        # an OOXML package sealed with a password (Office's "Encrypt with password"):
        # read by the Office path, which ends it ``encrypted`` (or opens it, when it is
        # Excel's published default password), never skipped as an unknown container
        ("EncryptedPackage", "ooxml-encrypted", "application/x-ole-storage"))


@cache
def _pillow_reads(pillow_id: str) -> bool:
    """Whether the installed Pillow decodes this format (WebP and JPEG 2000 need
    libraries Pillow may have been built without)."""
    from PIL import features

    if pillow_id == "WEBP":
        return bool(features.check_module("webp"))
    if pillow_id == "JPEG2000":
        return bool(features.check_codec("jpg_2000"))
    return True


def _image(name: str, mime: str, pillow_id: str) -> Format:
    if _pillow_reads(pillow_id):
        return Format(kind="image", name=name, mime=mime)
    return Format(kind="unsupported", name=name, mime=f"{mime} (this Pillow cannot decode it)")


def detect_file(path: Path, name: str | None = None) -> Format:
    """The format of the file at ``path``; ``name`` (the source's name, default the
    path's) only keeps a ``.pdf`` of unknown content a PDF and names text files.

    Raises:
        OSError: the file cannot be read.
    """
    with path.open("rb") as handle:
        head = handle.read(HEAD_BYTES)
    shown = name if name is not None else path.name
    if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
        return _zip_format(path)
    if is_cfb(head):
        return _ole_format(path)
    return detect_bytes(head, shown)


def detect_bytes(head: bytes, name: str = "") -> Format:
    """The format from a file's first bytes (containers: see :func:`detect_file`, which
    opens them; here a ZIP is ``application/zip`` and an OLE2 file unspecified)."""
    if b"%PDF-" in head[:_PDF_WINDOW]:
        return Format(kind="pdf", name="pdf", mime="application/pdf")
    for signature, offset, short, mime, pillow_id in _IMAGE_SIGNATURES:
        if head[offset:offset + len(signature)] == signature:
            return _image(short, mime, pillow_id)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _image("webp", "image/webp", "WEBP")
    if head.startswith(b"{\\rtf"):
        return Format(kind="office", name="rtf", mime="application/rtf")
    if head.startswith(b"PK\x03\x04"):
        return Format(kind="unsupported", name="zip", mime="application/zip")
    if is_cfb(head):
        return Format(kind="unsupported", name="ole2", mime="application/x-ole-storage")
    for signature, mime in _OTHER_SIGNATURES:
        if head.startswith(signature):
            return Format(kind="unsupported", name=mime.rsplit("/", 1)[-1], mime=mime)
    lower = name.lower()
    if lower.endswith(".pdf"):  # unknown bytes under a PDF's name: pdfium says not-a-pdf
        return Format(kind="pdf", name="pdf", mime="application/pdf")
    text = _text_format(head, lower)
    if text is not None:
        return text
    if not head:
        return Format(kind="unsupported", name="empty", mime="application/x-empty")
    return Format(kind="unsupported", name="octet-stream", mime="application/octet-stream")


def _text_format(head: bytes, lower_name: str) -> Format | None:
    """HTML, markdown or plain text: UTF-8 (or UTF-16 with a BOM) without control bytes."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            sample = head.decode("utf-16", errors="strict")
        except UnicodeDecodeError:
            return None
    else:
        sample = head.removeprefix(b"\xef\xbb\xbf").decode("utf-8", errors="ignore")
        # a cut multi-byte character at the end is fine; other bad bytes are not text
        if len(head) - len(sample.encode()) > 4 or b"\x00" in head:
            return None
    if not sample.strip():
        return None
    controls = sum(1 for c in sample if ord(c) < 32 and c not in "\t\n\r\f\v")
    if controls > len(sample) // 100:
        return None
    start = sample.lstrip().lower()
    if start.startswith(("<!doctype html", "<html")) or "<html" in start[:512]:
        return Format(kind="text", name="html", mime="text/html")
    if lower_name.endswith((".md", ".markdown")):
        return Format(kind="text", name="markdown", mime="text/markdown")
    return Format(kind="text", name="text", mime="text/plain")


def _zip_format(path: Path) -> Format:
    """OOXML by ``[Content_Types].xml`` and its part folder, ODF by ``mimetype``, else ZIP.
    The central directory is read within bounds (:mod:`folio.formats.zip_directory`):
    this runs in the main process, which has no memory cap."""
    plain = Format(kind="unsupported", name="zip", mime="application/zip")
    try:
        with path.open("rb") as handle:
            entries = central_directory(handle, os.fstat(handle.fileno()).st_size)
            names = {entry.name: entry for entry in entries}
            if "[Content_Types].xml" in names:
                for folder, (short, mime) in _OOXML.items():
                    if any(n.startswith(folder) for n in names):
                        return Format(kind="office", name=short, mime=mime)
            mimetype = names.get("mimetype")
            if mimetype is not None and mimetype.size <= 256:
                declared = read_member(handle, mimetype, 256).decode(
                    "ascii", errors="replace").strip()
                if declared in _ODF:
                    return Format(kind="office", name=_ODF[declared], mime=declared)
                if declared:
                    return Format(kind="unsupported", name=declared.rsplit("/", 1)[-1],
                                  mime=declared)
    except (ZipError, OSError):
        return plain  # a damaged, encrypted or huge ZIP is still a ZIP
    return plain


def _ole_format(path: Path) -> Format:
    """DOC, PPT or XLS by the streams of the compound file's directory. A container too
    damaged to list is still handed to the Office path, whose reader ends it
    ``office-conversion`` with what is broken (a skip would hide a damaged DOC)."""
    try:
        with path.open("rb") as handle:
            names = CompoundFile(handle, path.stat().st_size).names()
    except (CfbError, struct.error):
        return Format(kind="office", name="ole2", mime="application/x-ole-storage")
    for stream, short, mime in _OLE:
        if stream in names:
            return Format(kind="office", name=short, mime=mime)
    return Format(kind="unsupported", name="ole2", mime="application/x-ole-storage")
