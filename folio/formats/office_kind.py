"""What kind of Office document a file is, told from its content, not its name.

LibreOffice guesses a format when it is not told one, and its last guess is plain text:
random bytes named ``.docx`` came out as a PDF of garbage. So folio reads the container
(ZIP for OOXML and ODF, CFB for the legacy binary formats and for encrypted OOXML, the
``{\\rtf`` header for RTF), picks LibreOffice's import filter from it, and passes that
filter: a file that is not what its content says ends in a typed error, not in pages.

Encryption: an ODF document with ``manifest:encryption-data`` needs its owner's password
and is refused here, before LibreOffice runs. Encrypted CFB files (OOXML in an
``EncryptionInfo`` container, DOC, XLS, PPT) are handed to LibreOffice all the same and
only classified when it fails (:func:`cfb_encryption`): Excel encrypts write-protected
workbooks with its published default password ("VelvetSweatshop"), which LibreOffice
opens, and refusing those up front would lose readable spreadsheets.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from folio.errors import EncryptedDocumentError, OfficeConversionError
from folio.formats.cfb import CfbError, CompoundFile, is_cfb
from folio.formats.zip_directory import ZipError, central_directory, read_member

App = Literal["writer", "calc", "impress"]

#: the most of a ZIP member (manifest, [Content_Types].xml, mimetype) read to tell the kind
_MEMBER_LIMIT = 1 << 20

#: ODF ``mimetype`` (templates included) -> (application, LibreOffice filter, extension)
_ODF = {
    "application/vnd.oasis.opendocument.text": ("writer", "writer8", "odt"),
    "application/vnd.oasis.opendocument.text-template": ("writer", "writer8_template", "ott"),
    "application/vnd.oasis.opendocument.spreadsheet": ("calc", "calc8", "ods"),
    "application/vnd.oasis.opendocument.spreadsheet-template":
        ("calc", "calc8_template", "ots"),
    "application/vnd.oasis.opendocument.presentation": ("impress", "impress8", "odp"),
    "application/vnd.oasis.opendocument.presentation-template":
        ("impress", "impress8_template", "otp"),
}

#: the main part's content type in an OOXML package (its ``*.main+xml`` override) names
#: the application; macro-enabled and template variants included (macros never run)
_OOXML = (
    (re.compile(rb"wordprocessingml\.[a-z]+\.main\+xml|ms-word\.[a-z.]+\.main\+xml", re.I),
     ("writer", "MS Word 2007 XML", "docx")),
    (re.compile(rb"spreadsheetml\.[a-z]+\.main\+xml|ms-excel\.[a-z.]+\.main\+xml", re.I),
     ("calc", "Calc MS Excel 2007 XML", "xlsx")),
    (re.compile(rb"presentationml\.[a-z]+\.main\+xml|ms-powerpoint\.[a-z.]+\.main\+xml",
                re.I),
     ("impress", "Impress MS PowerPoint 2007 XML", "pptx")),
)

_OOXML_EXTENSIONS = frozenset({"docx", "docm", "dotx", "dotm", "xlsx", "xlsm", "xltx",
                               "xltm", "pptx", "pptm", "potx", "potm", "ppsx", "ppsm"})

#: Word's FIB version from which the file is Word 97 or later (older: Word 6/95)
_NFIB_WORD97 = 0x00C1


@dataclass(frozen=True)
class OfficeKind:
    """What LibreOffice is told about a file: which application, which import filter,
    and the extension the copy it reads is given."""

    app: App
    infilter: str
    extension: str
    cfb: bool = False


def sniff_office(path: Path) -> OfficeKind:
    """The kind of Office document at ``path``, from its content.

    Raises:
        EncryptedDocumentError: an ODF document encrypted with a password.
        OfficeConversionError: the file is none of the formats folio converts, or its
            container is broken (a truncated ZIP or CFB).
    """
    with path.open("rb") as handle:
        head = handle.read(8)
    if head.startswith(b"PK\x03\x04"):
        return _sniff_zip(path)
    if is_cfb(head):
        return _sniff_cfb(path)
    if head.startswith(b"{\\rtf"):
        return OfficeKind("writer", "Rich Text Format", "rtf")
    raise OfficeConversionError(
        "not an Office document: neither a ZIP (OOXML, ODF), a compound file (DOC, XLS, "
        f"PPT) nor RTF (starts with {head[:8]!r})")


def _sniff_zip(path: Path) -> OfficeKind:
    try:
        with path.open("rb") as handle:
            entries = central_directory(handle, os.fstat(handle.fileno()).st_size)
            names = {entry.name: entry for entry in entries}
            if "mimetype" in names:
                mimetype = read_member(handle, names["mimetype"], _MEMBER_LIMIT).decode(
                    "ascii", "replace").strip()
                if mimetype in _ODF:
                    manifest = names.get("META-INF/manifest.xml")
                    if manifest is not None and b"encryption-data" in read_member(
                            handle, manifest, _MEMBER_LIMIT):
                        raise EncryptedDocumentError(
                            "the document is encrypted with a password (ODF "
                            "manifest:encryption-data); folio cannot open it")
                    app, infilter, ext = _ODF[mimetype]
                    return OfficeKind(app, infilter, ext)  # type: ignore[arg-type]
            if "[Content_Types].xml" in names:
                types = read_member(handle, names["[Content_Types].xml"], _MEMBER_LIMIT)
                for pattern, (app, infilter, ext) in _OOXML:
                    if pattern.search(types):
                        return OfficeKind(app, infilter, ext)  # type: ignore[arg-type]
    except ZipError as err:  # damaged, or over the bounds of a document's directory
        raise OfficeConversionError(f"corrupt ZIP container: {err}") from None
    raise OfficeConversionError(
        "a ZIP archive, but not an Office document (no ODF mimetype, no OOXML main part)")


def _sniff_cfb(path: Path) -> OfficeKind:
    try:
        with path.open("rb") as handle:
            cfb = CompoundFile(handle, path.stat().st_size)
            names = cfb.names()
            if "EncryptedPackage" in names:
                # encrypted OOXML: which application is inside is sealed; LibreOffice
                # detects it (no filter given) and the name keeps the user's extension
                ext = path.suffix.lower().lstrip(".")
                return OfficeKind("writer", "", ext if ext in _OOXML_EXTENSIONS else "docx",
                                  cfb=True)
            if "WordDocument" in names:
                fib = cfb.read_stream("WordDocument", 16)
                old = len(fib) >= 4 and struct.unpack_from("<H", fib, 2)[0] < _NFIB_WORD97
                return OfficeKind("writer", "MS Word 95" if old else "MS Word 97", "doc",
                                  cfb=True)
            if "Workbook" in names:
                return OfficeKind("calc", "MS Excel 97", "xls", cfb=True)
            if "Book" in names:
                return OfficeKind("calc", "MS Excel 95", "xls", cfb=True)
            if "PowerPoint Document" in names:
                return OfficeKind("impress", "MS PowerPoint 97", "ppt", cfb=True)
    except (CfbError, struct.error) as err:
        raise OfficeConversionError(f"corrupt compound file: {err}") from None
    raise OfficeConversionError(
        "a compound file, but not a Word, Excel or PowerPoint document (streams: "
        f"{', '.join(sorted(names)[:8])})")


def cfb_encryption(path: Path) -> str | None:
    """Why a CFB Office file LibreOffice could not open is encrypted, or None: read after
    a failed conversion only (module docstring)."""
    try:
        with path.open("rb") as handle:
            cfb = CompoundFile(handle, path.stat().st_size)
            names = cfb.names()
            if "EncryptionInfo" in names or "EncryptedPackage" in names:
                return "an encrypted OOXML package (EncryptionInfo)"
            if "WordDocument" in names:
                fib = cfb.read_stream("WordDocument", 16)
                flags = struct.unpack_from("<H", fib, 0x0A)[0] if len(fib) >= 12 else 0
                if flags & 0x0100 or flags & 0x8000:
                    return "a Word document with fEncrypted set"
            for book in ("Workbook", "Book"):
                if book in names and _biff_filepass(cfb.read_stream(book, 4096)):
                    return "an Excel workbook with a FILEPASS record"
            if "Current User" in names:
                atom = cfb.read_stream("Current User", 16)
                if len(atom) >= 16 and struct.unpack_from("<I", atom, 12)[0] == 0xF3D1C4DF:
                    return "a PowerPoint presentation with an encrypted CurrentUserAtom"
    except (CfbError, struct.error, OSError):
        return None
    return None


def _biff_filepass(data: bytes) -> bool:
    """Whether a FILEPASS record (0x002F) sits among the first records of a BIFF stream:
    it follows the globals' BOF at once when the workbook is encrypted."""
    offset = 0
    for _ in range(8):
        if offset + 4 > len(data):
            return False
        record, length = struct.unpack_from("<HH", data, offset)
        if record == 0x002F:
            return True
        offset += 4 + length
    return False
