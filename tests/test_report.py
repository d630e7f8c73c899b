"""folio.report: what a run report tells a person about pages."""

from __future__ import annotations

from folio.report import document_summary
from tests.doc_factory import report_document


def test_quarantined_pages_are_numbered_from_1_as_in_document_md() -> None:
    doc = report_document()  # its third page (index 2) is quarantined
    summary = document_summary(doc)
    assert [p["page"] for p in summary["quarantined_pages"]] == [3]


def test_skipped_entries_are_listed_counted_and_do_not_fail_the_run() -> None:
    import argparse

    from folio.cli import report_ingest
    from folio.models import DocumentOutcome, DocumentResult
    from folio.report import build_report, markdown_summary

    done = report_document()
    zipped = DocumentResult(source="s3://b/in/x.zip", outcome=DocumentOutcome.SKIPPED,
                            reason="unsupported format: application/zip", format="zip")
    report = build_report([done.model_copy(update={"outcome": DocumentOutcome.OK}), zipped],
                          seconds=1.0, out="out", excluded=4)
    assert report["totals"]["skipped"] == 1 and report["totals"]["excluded"] == 4
    line = report["documents"][1]
    assert (line["outcome"], line["format"]) == ("skipped", "zip")
    text = markdown_summary(report)
    assert "1 skipped" in text and "4 excluded by --include/--exclude" in text
    assert "| s3://b/in/x.zip | skipped |" in text and "application/zip" in text
    assert report_ingest(argparse.Namespace(report=None), report) == 0
    quarantined = zipped.model_copy(update={"outcome": DocumentOutcome.QUARANTINED})
    failing = build_report([quarantined], seconds=1.0, out="out")
    assert report_ingest(argparse.Namespace(report=None), failing) == 3
