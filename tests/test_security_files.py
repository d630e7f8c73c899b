"""Untrusted names shown safely, no writes through links, whole reports (docs/security.md;
issue 44 item 9)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.errors import StorageError
from folio.io.sinks import LocalSink
from folio.output.report import build_report, markdown_summary
from tests.doc_factory import report_document

HOSTILE_NAME = "/in/evil\x1b]0;owned\x07\x1b[2J|row\nnext.pdf"


def test_a_hostile_file_name_cannot_drive_the_terminal_or_break_the_table() -> None:
    """Before: the name was printed raw: the escape sequences reached the terminal, and
    the newline and "|" broke the summary table (the CLI's and the Prefect artifact's)."""
    doc = report_document()
    doc.source = HOSTILE_NAME
    doc.reason = "malformed: bad\nthing | here"
    table = markdown_summary(build_report([doc], seconds=1.0, out="/out"), links=True)
    assert "\x1b" not in table and "\x07" not in table
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(rows) == 2, table  # the header and one document, whatever the name holds
    header_cells = rows[0].count(" | ")
    assert rows[1].replace("\\|", "").count(" | ") == header_cells
    assert "\\x1b]0;owned\\x07" in rows[1] and "\\nnext.pdf" in rows[1]


def test_the_cli_progress_line_escapes_the_name(capsys: pytest.CaptureFixture[str]) -> None:
    from folio import progress
    from folio.cli import progress_lines

    with progress_lines(True):
        progress.emit(progress.ProgressEvent(kind="document-done", source=HOSTILE_NAME,
                                             outcome="ok", pages=1, seconds=1.0))
    err = capsys.readouterr().err
    assert "\x1b" not in err and err.count("\n") == 1, err


def test_a_link_planted_inside_the_output_folder_is_not_written_through(tmp_path: Path) -> None:
    """Before: ``out/docs -> elsewhere`` took the document's outputs outside --out."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "docs").symlink_to(elsewhere, target_is_directory=True)
    sink = LocalSink(out)
    with pytest.raises(StorageError, match="symbolic link inside the output folder"):
        sink.write_text("docs/abc/document.md", "text")
    with pytest.raises(StorageError, match="symbolic link"):
        sink.write_if_absent("docs/abc/claim.json", b"{}")
    assert list(elsewhere.iterdir()) == []
    sink.write_text("other/abc/document.md", "text")  # no link on the way: written
    assert (out / "other" / "abc" / "document.md").read_text() == "text"


def test_the_report_is_replaced_whole_and_a_link_there_is_not_followed(tmp_path: Path) -> None:
    """Before: ``--report`` was written in place: a reader could see half of it, and a
    link at its path was followed."""
    from folio_prefect.flows.ingest import write_report

    target = tmp_path / "someone-elses.txt"
    target.write_text("keep me")
    report = tmp_path / "report.json"
    report.symlink_to(target)
    write_report({"documents": [], "totals": {}}, str(report))
    assert target.read_text() == "keep me"
    assert not report.is_symlink() and json.loads(report.read_text())["documents"] == []
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
