"""folio.output.report: what a run report tells a person about pages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from folio.output.report import (
    ALL_QUARANTINED,
    build_report,
    document_summary,
    markdown_summary,
    nothing_processed,
)
from tests.doc_factory import report_document


def test_quarantined_pages_are_numbered_from_1_as_in_document_md() -> None:
    doc = report_document()  # its third page (index 2) is quarantined
    summary = document_summary(doc)
    assert [p["page"] for p in summary["quarantined_pages"]] == [3]


def _line(source: str, outcome: str, cached: bool = False, reason: str = "") -> dict[str, Any]:
    return {"source": source, "outcome": outcome, "cached": cached, "reason": reason}


def test_a_run_that_quarantined_every_document_it_processed_says_so() -> None:
    bad = _line("a.pdf", "quarantined", reason="encrypted: a password is needed")
    worse = _line("b.pdf", "quarantined", reason="not-a-pdf: no %PDF header")
    why = nothing_processed({"documents": [bad, worse]})
    assert why is not None and why.startswith(ALL_QUARANTINED) and "(2)" in why
    assert "encrypted" in why and "not-a-pdf" in why
    # one document done, or nothing new to do (cached), is no failure
    assert nothing_processed({"documents": [bad, _line("c.pdf", "ok")]}) is None
    assert nothing_processed({"documents": [bad, _line("c.pdf", "partial")]}) is None
    assert nothing_processed({"documents": [_line("a.pdf", "quarantined", cached=True)]}) is None
    assert nothing_processed({"documents": []}) is None
    # ... but a document quarantined for good before does not save this run's
    assert nothing_processed({"documents": [_line("a.pdf", "ok", cached=True), bad]})


def _summary(out: str, outputs: dict[str, str]) -> str:
    doc = report_document()
    line = document_summary(doc)
    line["outputs"] = outputs
    report = build_report([doc], seconds=2.0, out=out)
    report["documents"] = [line]
    return markdown_summary(report, links=True)


def test_the_summary_names_outputs_a_person_can_open_anywhere(tmp_path: Path) -> None:
    """Each document by its output folder relative to the output folder (the worker's
    file:// paths opened nothing in a browser elsewhere), for local and S3 outputs."""
    out = tmp_path / "out"
    local = {name: str(out / "Annual_Report-ab12" / f"document.{ext}")
             for name, ext in (("markdown", "md"), ("json", "json"))}
    text = _summary(str(out), local)
    assert "file://" not in text and "| `Annual_Report-ab12/` | partial | 3/4 |" in text
    assert f"Outputs: `{out}`" in text and "document.md, document.json" in text
    s3 = {"markdown": "s3://docs/out/Annual_Report-ab12/document.md"}
    text = _summary("s3://docs/out", s3)
    assert "| `Annual_Report-ab12/` |" in text and "Outputs: `s3://docs/out`" in text


def test_the_summary_table_is_narrow_and_reasons_go_under_it() -> None:
    """Four short columns (the Prefect UI does not wrap table cells: eleven columns,
    whole URIs and reasons were cut off at 1400 px); the reasons, long text, in a list
    under the table, with the page counts."""
    doc = report_document()
    line = document_summary(doc)
    line["reason"] = "page 3: " + "a long reason " * 20
    report = build_report([doc], seconds=2.0, out="out")
    report["documents"] = [line]
    text = markdown_summary(report)
    header, _, row = text.splitlines()[2:5]
    assert header.count("|") == 5 and row.count("|") == 5, header
    assert row == "| Annual Report.pdf | partial | 3/4 | 0.0 |"
    assert "tesseract" in text.splitlines()[0]
    reasons = text.split("Reasons:")[1]
    assert "- Annual Report.pdf (partial; 1 quarantined of 4 pages): page 3: a long" in reasons
def test_skipped_entries_are_listed_counted_and_do_not_fail_the_run() -> None:
    import argparse

    from folio.cli import report_ingest
    from folio.models import DocumentOutcome, DocumentResult
    from folio.output.report import build_report, markdown_summary

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
    assert "| x.zip | skipped |" in text and "application/zip" in text
    assert report_ingest(argparse.Namespace(report=None), report) == 0
    quarantined = zipped.model_copy(update={"outcome": DocumentOutcome.QUARANTINED})
    failing = build_report([quarantined], seconds=1.0, out="out")
    assert report_ingest(argparse.Namespace(report=None), failing) == 3
