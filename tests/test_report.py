"""folio.output.report: what a run report tells a person about pages."""

from __future__ import annotations

from folio.output.report import document_summary
from tests.doc_factory import report_document


def test_quarantined_pages_are_numbered_from_1_as_in_document_md() -> None:
    doc = report_document()  # its third page (index 2) is quarantined
    summary = document_summary(doc)
    assert [p["page"] for p in summary["quarantined_pages"]] == [3]
