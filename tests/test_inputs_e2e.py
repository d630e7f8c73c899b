"""Every entry of a real-looking bucket ends in a typed outcome, through the CLI (a local
folder) and on S3 (moto's server): PDFs and images are read, the rest skipped with its
reason, the team's globs count what they leave out, and a rerun reads nothing again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult
from folio.page.quality import word_recall
from folio.pipeline import Services, process_documents
from folio.settings.config import PipelineConfig
from tests.mixed_folder import write_docx, write_mixed_folder
from tests.s3_fault_proxy import FaultProxy
from tests.s3_server import S3Server, run_prefix


def _folio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli", *args],
                          capture_output=True, text=True, timeout=600)


@pytest.mark.usefixtures("folio_prefect_server")
def test_a_mixed_folder_through_the_cli(tmp_path: Path) -> None:
    texts = write_mixed_folder(tmp_path, dpi=150, scan_pages=1)  # S3 test: two pages
    ignored = tmp_path / "in" / "drafts"
    ignored.mkdir()
    (ignored / "old.pdf").write_bytes((tmp_path / "in" / "report.pdf").read_bytes())
    out, report = tmp_path / "out", tmp_path / "report.json"
    args = ["ingest", str(tmp_path / "in"), "--out", str(out), "--report", str(report),
            "--exclude", "drafts/*", "--quiet"]
    run = _folio(*args)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    lines = {Path(d["source"]).name: d for d in json.loads(report.read_text())["documents"]}
    assert set(lines) == set(texts)  # every entry, none silently dropped; drafts/ counted
    assert json.loads(report.read_text())["totals"]["excluded"] == 1
    zipped, link = lines["bundle.zip"], lines["elsewhere.pdf"]
    assert (zipped["outcome"], zipped["reason"]) == ("skipped", "unsupported format: "
                                                                "application/zip")
    assert (link["outcome"], link["reason"]) == ("skipped", "symlink to a file outside "
                                                            "the source")
    for name, fmt, pages in [("scan.tif", "tiff", 1), ("photo.jpg", "jpeg", 1),
                             ("report.pdf", "pdf", 1)]:
        line = lines[name]
        assert (line["outcome"], line["format"], line["pages"]) == ("ok", fmt, pages), line
        assert line["chunks"] > 0
        document = json.loads(Path(line["outputs"]["json"]).read_text())
        markdown = "\n".join(p["markdown"] for p in document["pages"])
        assert word_recall(texts[name], markdown) > 0.9, (name, markdown[:300])
    photo = json.loads(Path(lines["photo.jpg"]["outputs"]["json"]).read_text())["pages"][0]
    # upright after its EXIF turn: a letter page of 1275x1650 px, taken for 150 dpi
    assert (photo["width_pt"], photo["height_pt"]) == pytest.approx((612.0, 792.0), rel=0.01)
    assert "skipped" in run.stdout and "1 excluded" in run.stdout
    assert "unsupported format: application/zip" in run.stdout

    again = _folio(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    rerun = {Path(d["source"]).name: d for d in json.loads(report.read_text())["documents"]}
    assert all(rerun[n]["cached"] for n in ("scan.tif", "photo.jpg", "report.pdf", "bundle.zip"))
    assert rerun["bundle.zip"]["outcome"] == "skipped"


def test_a_mixed_prefix_on_s3_and_a_rerun_that_reads_nothing_again(
        tmp_path: Path, s3_server: S3Server, s3_bucket: str, source_gets: FaultProxy) -> None:
    texts = write_mixed_folder(tmp_path, dpi=150)
    for path in sorted((tmp_path / "in").iterdir()):
        if not path.is_symlink():  # S3 has no symlinks
            s3_server.client.put_object(Bucket=s3_bucket, Key=f"in/{path.name}",
                                        Body=path.read_bytes())
    config = PipelineConfig.model_validate({
        "work_dir": str(tmp_path / "w"), "validation": {"enabled": False},
        "store": {"kind": "none"}, "layout": {"enabled": False},
        "s3": {"endpoint_url": source_gets.url, "region": "us-east-1",
               "access_key_id": "test", "secret_access_key": "test"}})
    first = run_prefix(config, s3_bucket)
    assert {n: d.outcome for n, d in first.items()} == {
        "bundle.zip": DocumentOutcome.SKIPPED, "photo.jpg": DocumentOutcome.OK,
        "report.pdf": DocumentOutcome.OK, "scan.tif": DocumentOutcome.OK}
    assert word_recall(texts["scan.tif"], "\n".join(p.markdown for p in first["scan.tif"].pages)
                       ) > 0.9
    assert source_gets.seen == 4

    source_gets.seen = 0
    again = run_prefix(config, s3_bucket)
    assert all(d.cached for d in again.values())
    assert {n: d.outcome for n, d in again.items()} == {n: d.outcome for n, d in first.items()}
    assert source_gets.seen == 0, "an unchanged object was downloaded again"


@pytest.mark.usefixtures("folio_prefect_server")
def test_office_files_on_a_host_without_libreoffice_stop_the_run_in_one_line(
        tmp_path: Path) -> None:
    """Before any work (issues 43 and 49): a folder holding an RTF (which LibreOffice
    converts before it is read; a DOCX is read without it, issue 54) on a host without
    LibreOffice is exit 2 with how to install it, not a quarantined document."""
    src = tmp_path / "in"
    src.mkdir()
    write_rtf(src / "memo.rtf", "a memo")
    bare = tmp_path / "bin"  # no soffice on PATH (nor Ghostscript: compression off)
    bare.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(src), "--out",
         str(tmp_path / "out"), "--engine", "text-layer", "--set", "compress=false",
         "--quiet"], capture_output=True, text=True, timeout=600,
        env={**os.environ, "PATH": str(bare)})
    assert run.returncode == 2, run.stdout[-2000:] + run.stderr[-3000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "apt-get install" in lines[0], run.stderr
    assert not (tmp_path / "out" / "_index").exists()


def test_an_office_file_without_its_converter_waits_for_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An RTF where folio.formats.office (LibreOffice's conversion) cannot be imported:
    quarantined with the reason, retryable (no verdict on its bytes), so a run after the
    install reads it; a DOCX needs no conversion and is read all the same."""
    monkeypatch.setitem(sys.modules, "folio.formats.office", None)  # import fails
    rtf = write_rtf(tmp_path / "memo.rtf", "a memo")
    doc = _local_run(tmp_path, rtf)
    assert doc.outcome is DocumentOutcome.QUARANTINED and doc.retryable
    assert doc.format == "rtf" and "folio.formats.office" in doc.reason
    docx = write_docx(tmp_path / "memo.docx", ["a memo"])
    doc = _local_run(tmp_path, docx)
    assert doc.outcome is DocumentOutcome.OK and "a memo" in doc.pages[0].markdown


def write_rtf(path: Path, text: str) -> Path:
    path.write_bytes(b"{\\rtf1\\ansi\\deff0{\\fonttbl{\\f0 Times New Roman;}}\\f0 "
                     + text.encode() + b"\\par}")
    return path


def _local_run(tmp_path: Path, path: Path, **settings: Any) -> DocumentResult:
    config = PipelineConfig.model_validate({
        "work_dir": str(tmp_path / "w"), "validation": {"enabled": False},
        "store": {"kind": "none"}, **settings})
    services = Services(config, str(tmp_path / "out"))
    try:
        (doc,) = process_documents(discover([str(path)], config.s3), services)
    finally:
        services.close()
    return doc


def test_an_office_file_is_read_and_keeps_its_own_identity(tmp_path: Path) -> None:
    """The DOCX's text comes out (read from its XML), the document's hash is its own."""
    import hashlib

    docx = write_docx(tmp_path / "memo.docx", ["Folio reads office documents"])
    doc = _local_run(tmp_path, docx)
    assert doc.outcome is DocumentOutcome.OK, doc.reason
    assert doc.format == "docx" and doc.sha256 == hashlib.sha256(docx.read_bytes()).hexdigest()
    assert "office documents" in doc.pages[0].markdown
