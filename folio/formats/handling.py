"""What a detected format becomes in a run: a reason to skip it, or a PDF to read.

Plain text, markdown and HTML are skipped, not read: folio turns paged documents into
text with page numbers and boxes for citations, and a text file has neither; a RAG
team's text splitter indexes such files directly and better (headings and links kept),
and reading them here would put a second, different chunking of the same text in the
store. The reason says so, so nothing is dropped silently (docs/inputs.md).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from folio.errors import ConfigError
from folio.formats.detect import Format
from folio.settings.config import PipelineConfig

__all__ = ["TEXT_REASON", "office_pdf", "skip_reason"]

TEXT_REASON = ("text format not read: {mime} (folio reads paged documents: PDF, images, "
               "Office files; index text with your text splitter)")


def skip_reason(fmt: Format) -> str:
    """The report's reason for a format folio does not read."""
    if fmt.kind == "text":
        return TEXT_REASON.format(mime=fmt.mime)
    return f"unsupported format: {fmt.mime}"


def office_pdf(src: Path, work_dir: Path, config: PipelineConfig) -> Path:
    """An Office document converted to PDF by LibreOffice (``folio.formats.office``),
    inside ``work_dir``; the document keeps the original's identity and hash.

    Raises:
        BadInputError: a corrupt or password-protected document (from the converter).
        ConfigError: LibreOffice (or the converter) is missing here.
        TransientError: the conversion ran out of time.
    """
    try:  # imported here: a checkout without the converter still reads the rest
        office = importlib.import_module("folio.formats.office")
    except ImportError as err:
        raise ConfigError("Office documents need folio.formats.office, which this "
                          "installation lacks") from err
    settings = getattr(config, "office", None)
    timeout_s = float(getattr(settings, "timeout_s", 120.0))
    memory_mb = int(getattr(settings, "memory_mb", 2048))
    out_dir = work_dir / "office"
    out_dir.mkdir(parents=True, exist_ok=True)
    return Path(office.convert_to_pdf(src, out_dir, timeout_s=timeout_s,
                                      memory_mb=memory_mb))
