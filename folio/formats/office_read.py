"""An Office document read from its own structure into the document's pages.

DOCX, XLSX and PPTX (and their macro and template variants) are parsed as they are;
DOC, RTF, ODT, XLS, ODS, PPT, ODP and encrypted OOXML packages are first converted by
LibreOffice into the matching OOXML format (:func:`folio.formats.office.convert_to_ooxml`:
its own profile, macros off, a memory cap, its process group killed on timeout), then
parsed the same way. An OOXML file a reader refuses (a PowerPoint template python-pptx
does not open, a part it cannot parse) gets one LibreOffice round trip before it is
called corrupt. Every package is held to :func:`folio.formats.office_zip.check_package`
before a reader opens it, LibreOffice's output as well.
"""

from __future__ import annotations

import importlib
import logging
import zipfile
from collections.abc import Callable
from pathlib import Path

from folio.errors import BadInputError, ConfigError, FolioError, OfficeConversionError
from folio.formats.office_blocks import NativeRead, native_page
from folio.formats.office_kind import OfficeKind, sniff_office
from folio.formats.office_zip import check_package
from folio.models import DocumentResult
from folio.settings.config import PipelineConfig

__all__ = ["fill_document", "read_office", "read_package"]

log = logging.getLogger(__name__)

#: OOXML extensions read as they are (not the encrypted ones: a CFB container)
_NATIVE = {"writer": {"docx", "docm", "dotx", "dotm"},
           "calc": {"xlsx", "xlsm", "xltx", "xltm"},
           "impress": {"pptx", "pptm", "potx", "potm", "ppsx", "ppsm"}}


def read_package(path: Path, app: str, config: PipelineConfig) -> NativeRead:
    """``path``, an OOXML package of ``app`` (writer, calc, impress), read natively.

    Raises:
        BadInputError: over the package limits (too-large, zip-bomb).
        OfficeConversionError: not a readable package of that kind.
    """
    office = config.office
    check_package(path, max_unpacked_mb=office.max_unpacked_mb, max_ratio=office.max_ratio,
                  max_part_mb=office.max_part_mb)
    reader = _reader(app, config)
    try:
        return reader(path)
    except FolioError:
        raise
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, AttributeError,
            IndexError, OSError, SyntaxError) as err:  # the libraries' ways of saying corrupt
        raise OfficeConversionError(
            f"the {path.suffix.lstrip('.').upper() or app} package could not be read: "
            f"{type(err).__name__}: {err}") from None


def _reader(app: str, config: PipelineConfig) -> Callable[[Path], NativeRead]:
    if app == "writer":
        from folio.formats.docx_reader import read_docx
        from folio.formats.ooxml_parts import Package

        def docx(path: Path) -> NativeRead:
            with Package(zipfile.ZipFile(path)) as package:
                return read_docx(package)
        return docx
    if app == "calc":
        from folio.formats.xlsx_reader import read_xlsx

        return lambda path: read_xlsx(path, max_rows=config.office.max_rows,
                                      max_cells=config.office.max_cells)
    from folio.formats.pptx_reader import read_pptx

    return lambda path: read_pptx(path, speaker_notes=config.office.speaker_notes)


def _convert(src: Path, work_dir: Path, config: PipelineConfig, kind: OfficeKind) -> Path:
    """LibreOffice's OOXML of ``src``; ConfigError where the converter is missing here."""
    try:  # imported here: a checkout without the converter still reads DOCX, XLSX, PPTX
        office = importlib.import_module("folio.formats.office")
    except ImportError as err:
        raise ConfigError("this Office document needs folio.formats.office (LibreOffice's "
                          "conversion), which this installation lacks") from err
    return office.convert_to_ooxml(src, work_dir / "office", timeout_s=config.office.timeout_s,
                                   memory_mb=config.office.memory_mb, kind=kind)


def read_office(src: Path, work_dir: Path, config: PipelineConfig) -> NativeRead:
    """The document's pages: see the module's docstring.

    Raises:
        BadInputError: corrupt, encrypted or over a limit (typed by its code).
        ConfigError: LibreOffice is needed and missing.
        TransientError: LibreOffice ran out of time.
    """
    kind: OfficeKind = sniff_office(src)
    if kind.cfb or kind.extension not in _NATIVE[kind.app]:
        return read_package(_convert(src, work_dir, config, kind), kind.app, config)
    try:
        return read_package(src, kind.app, config)
    except OfficeConversionError as first:
        log.info("%s: native read failed (%s); trying LibreOffice's OOXML", src, first)
        try:
            converted = _convert(src, work_dir, config, kind)
        except BadInputError:
            raise first from None
        return read_package(converted, kind.app, config)


def fill_document(doc: DocumentResult, read: NativeRead, config: PipelineConfig) -> None:
    """``doc``'s pages from ``read``: every page ok, in reading order, engine ``office``
    (the caller has held their number to ``limits.max_pages``)."""
    drafts = read.pages
    keep = config.chunk.keep_headers_footers
    doc.pages = [native_page(n, draft, keep_heads=keep, why=read.why)
                 for n, draft in enumerate(drafts)]
    doc.page_count = len(doc.pages)
    doc.engine = "office"
