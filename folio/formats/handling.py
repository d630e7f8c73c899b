"""What a detected format becomes in a run when it is not read: the reason it is skipped.

Plain text, markdown and HTML are skipped, not read: folio turns paged documents into
text with page numbers and boxes for citations, and a text file has neither; a RAG
team's text splitter indexes such files directly and better (headings and links kept),
and reading them here would put a second, different chunking of the same text in the
store. The reason says so, so nothing is dropped silently (docs/inputs.md).
"""

from __future__ import annotations

from folio.formats.detect import Format

__all__ = ["TEXT_REASON", "skip_reason"]

TEXT_REASON = ("text format not read: {mime} (folio reads paged documents: PDF, images, "
               "Office files; index text with your text splitter)")


def skip_reason(fmt: Format) -> str:
    """The report's reason for a format folio does not read."""
    if fmt.kind == "text":
        return TEXT_REASON.format(mime=fmt.mime)
    return f"unsupported format: {fmt.mime}"
