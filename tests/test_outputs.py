"""folio.output.outputs: files per document, the done-index, quarantine records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.io.sinks import LocalSink, Sink, open_sink
from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.output import outputs
from folio.settings.config import S3Settings
from tests.doc_factory import report_document
from tests.s3_server import S3Server


@pytest.fixture(params=["local", "s3"])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Sink:
    if request.param == "local":
        return open_sink(str(tmp_path / "out"), S3Settings())
    server: S3Server = request.getfixturevalue("s3_server")
    return open_sink(f"s3://{server.create_bucket()}/out", server.settings)


def test_write_document_files(sink: Sink) -> None:
    doc = report_document()
    uris = outputs.write_document(sink, doc)
    slug = "Annual_Report-" + doc.doc_id[:12]
    assert uris == {
        "markdown": sink.uri(f"{slug}/document.md"),
        "json": sink.uri(f"{slug}/document.json"),
        "pages": sink.uri(f"{slug}/pages.jsonl"),
    }
    md = sink.read_text(f"{slug}/document.md")
    assert md is not None
    assert md.startswith("<!-- page 1 -->\n\nACME Corp")
    assert "<!-- page 3 -->\n<!-- quarantined: validation: repeat ratio 0.9 -->" in md
    assert md.index("<!-- page 2 -->") < md.index("Costs fell") < md.index("<!-- page 4 -->")

    body = sink.read_text(f"{slug}/document.json") or ""
    # one page convention for people: page 1 is the first, as in document.md and citations
    assert [p["page"] for p in json.loads(body)["pages"]] == [1, 2, 3, 4]
    assert all("index" not in p for p in json.loads(body)["pages"])
    stored = outputs.read_document_json(body)
    assert [p.index for p in stored.pages] == [0, 1, 2, 3]  # the pipeline's own count
    assert stored.pages[0].blocks[1].content == "# Annual Report 2024"
    assert stored.outputs == uris

    lines = (sink.read_text(f"{slug}/pages.jsonl") or "").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["page"] for r in records] == [1, 2, 3, 4]
    assert [r["page_number"] for r in records] == [1, 2, 3, 4]  # older readers' name
    assert records[2]["outcome"] == "quarantined" and records[2]["reason"].startswith("validation")
    assert records[0]["doc_id"] == doc.doc_id and records[0]["engine"] == "tesseract"
    assert records[0]["blocks"][5]["label"] == "Table"


def test_markdown_comment_cannot_be_broken() -> None:
    doc = report_document()
    doc.pages[2].reason = "bad --> <script>\nnext line"
    md = outputs.render_markdown(doc)
    line = next(ln for ln in md.splitlines() if ln.startswith("<!-- quarantined"))
    assert line.count("-->") == 1 and line.endswith("-->")


def test_done_index_roundtrip(sink: Sink) -> None:
    doc = report_document()
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is None
    doc.outputs = outputs.write_document(sink, doc)
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is None  # not done yet
    doc.chunks, doc.vector_table = 6, "lancedb:/x"
    index_uri = outputs.mark_done(sink, doc)
    assert index_uri.endswith(f"_index/{doc.sha256}-{doc.config_hash}.json")

    found = outputs.find_done(sink, doc.sha256, doc.config_hash)
    assert found is not None and found.cached is True
    assert found.outputs == doc.outputs and found.chunks == 6 and found.vector_table == "lancedb:/x"
    assert found.pages == doc.pages and found.outcome == doc.outcome
    assert outputs.find_done(sink, doc.sha256, "other-config") is None


def test_a_document_json_written_before_pages_counted_from_1_is_still_found(
    tmp_path: Path,
) -> None:
    """Older outputs hold the DocumentResult as is (``index`` from 0): a rerun still finds
    them done rather than processing every document again."""
    sink = LocalSink(tmp_path)
    doc = report_document()
    doc.outputs = outputs.write_document(sink, doc)
    outputs.mark_done(sink, doc)
    (tmp_path / outputs.document_folder(doc) / "document.json").write_text(
        doc.model_dump_json(indent=1))
    found = outputs.find_done(sink, doc.sha256, doc.config_hash)
    assert found is not None and found.pages == doc.pages


def test_index_written_last_and_unreadable_means_redo(tmp_path: Path) -> None:
    sink = LocalSink(tmp_path)
    doc = report_document()
    doc.outputs = outputs.write_document(sink, doc)
    outputs.mark_done(sink, doc)
    index = tmp_path / "_index" / f"{doc.sha256}-{doc.config_hash}.json"
    assert index.stat().st_mtime_ns >= max(
        (tmp_path / outputs.document_folder(doc) / name).stat().st_mtime_ns
        for name in ("document.md", "document.json", "pages.jsonl")
    )
    (tmp_path / outputs.document_folder(doc) / "document.json").unlink()
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is None
    index.write_text("{not json")
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is None


def test_quarantined_document(sink: Sink) -> None:
    doc = report_document()
    doc.outcome, doc.reason = DocumentOutcome.QUARANTINED, "malformed: no xref"
    uris = outputs.write_document(sink, doc)
    assert uris["quarantine"] == sink.uri(f"_quarantine/{doc.sha256}.json")
    record = outputs.read_quarantine(sink, doc)
    assert record is not None and record["reason"] == "malformed: no xref"
    with pytest.raises(ValueError):
        outputs.mark_done(sink, doc)
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is None

    # a later run succeeds: done, and the quarantine record is cleared
    doc.outcome = DocumentOutcome.OK
    doc.outputs = outputs.write_document(sink, doc)
    outputs.mark_done(sink, doc)
    assert outputs.read_quarantine(sink, doc) is None
    assert outputs.find_done(sink, doc.sha256, doc.config_hash) is not None


def test_unreadable_source_gets_only_a_quarantine_record(tmp_path: Path) -> None:
    sink = LocalSink(tmp_path)
    doc = DocumentResult(source="s3://b/x.pdf", reason="storage: download failed", retryable=True)
    uris = outputs.write_document(sink, doc)
    assert list(uris) == ["quarantine"]
    assert Path(uris["quarantine"]).parent == tmp_path / "_quarantine"
    assert [p.name for p in tmp_path.iterdir()] == ["_quarantine"]
    record = outputs.read_quarantine(sink, doc)
    assert record is not None and record["retryable"] is True


def test_retryable_failure_is_not_done(tmp_path: Path) -> None:
    doc = report_document()
    doc.retryable = True
    with pytest.raises(ValueError):
        outputs.mark_done(LocalSink(tmp_path), doc)


def test_quarantined_page_has_no_markdown_leak() -> None:
    doc = report_document()
    doc.pages[2].markdown = "junk that failed validation"
    assert doc.pages[2].outcome == PageOutcome.QUARANTINED
    assert "junk" not in outputs.render_markdown(doc)
