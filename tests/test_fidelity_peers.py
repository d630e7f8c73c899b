"""bench/fidelity.py's peers: converters scored beside folio by the same scorers.

Why tested: the side-by-side table is only worth its numbers if each peer's pages reach
the scorers as folio's do (page numbers, markdown, labelled blocks), if a peer that
cannot run is said to be skipped instead of scoring zero, and if the AGPL peer stays in
its own interpreter (folio never imports PyMuPDF). The pdfium peer runs the real
subprocess plumbing on small corpus PDFs; the pymupdf4llm peer runs only when
$FOLIO_PEER_PYTHON names an interpreter that has it (bench/requirements-peers.txt).
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

import pypdfium2
import pytest

from bench.fidelity import Row, peer_documents, score_olmocr, summarise
from bench.fidelity_peers import (
    PEER_PYTHON_ENV,
    PEERS,
    peer_output,
    run_peer,
    side_by_side,
)

REPO = Path(__file__).resolve().parents[1]
SMALL = ["olmocr/bench/discoverworld_crazy_table4.pdf", "docling/code_and_formula.pdf"]


def _pdfium_pages(path: Path) -> list[str]:
    pdf = pypdfium2.PdfDocument(str(path))
    try:
        return [pdf[i].get_textpage().get_text_range() for i in range(len(pdf))]
    finally:
        pdf.close()


def test_pdfium_peer_runs_in_a_child_and_keeps_pages_apart(corpus: Path, tmp_path: Path) -> None:
    pdfs = [corpus / p for p in SMALL]
    run = run_peer(PEERS["pdfium"], pdfs, python=None, workdir=tmp_path, warm_up=pdfs[0])
    assert run.status == "ran" and run.exit_code == 0 and not run.reason, run.log_tail
    assert run.python == sys.executable  # pdfium needs no peer interpreter
    assert run.description["package"] == "pypdfium2"
    assert run.warm_up["warm_up"] == str(pdfs[0]) and run.warm_up["cpu_seconds"] > 0
    assert set(run.records) == {str(p) for p in pdfs}
    for pdf in pdfs:
        record = run.records[str(pdf)]
        assert record["error"] is None and record["cpu_seconds"] >= 0
        expected = _pdfium_pages(pdf)
        assert [p["page"] for p in record["pages"]] == list(range(1, len(expected) + 1))
        assert [p["markdown"] for p in record["pages"]] == [t.replace("\r\n", "\n")
                                                          for t in expected]
    two_pages = peer_output(run.records[str(pdfs[1])])
    assert two_pages is not None and two_pages.page_count == 2
    assert two_pages.full_text() == "\n\n".join(two_pages.pages[n] or "" for n in (1, 2))
    assert "JavaScript" in (two_pages.pages[1] or "")


def test_peer_rows_are_scored_like_folio(corpus: Path, tmp_path: Path) -> None:
    """A peer's olmOCR tests read its own page; a document it never reached fails its
    tests instead of vanishing from the rate."""
    table = corpus / SMALL[0]
    run = run_peer(PEERS["pdfium"], [table], python=None, workdir=tmp_path)
    rows = [Row("olmocr", SMALL[0], "born-digital", ["olmocr/bench/discoverworld_crazy_table4.tests.jsonl"]),
            Row("olmocr", "olmocr/bench/olmo2-pg4.pdf", "born-digital",
                ["olmocr/bench/olmo2-pg4.tests.jsonl"])]
    docs = peer_documents(rows, corpus, run)
    assert [d["outcome"] for d in docs] == ["ok", "not run"]
    ok, missing = docs[0]["scores"], docs[1]["scores"]
    # raw text has no table: every table test fails, the text tests can pass
    assert all(not t["passed"] for t in ok["tests"] if t["type"] == "table")
    assert any(t["passed"] for t in ok["tests"] if t["type"] != "table")
    assert missing["passed"] == 0 and missing["counted"] > 0
    assert summarise(docs)["documents_failed"] == ["olmocr/bench/olmo2-pg4.pdf"]


def test_a_crashed_document_fails_every_test(corpus: Path) -> None:
    row = Row("olmocr", SMALL[0], "born-digital", ["olmocr/bench/discoverworld_crazy_table4.tests.jsonl"])
    assert peer_output({"source": "x", "pages": [], "error": "RuntimeError: boom"}) is None
    scores = score_olmocr(row, corpus, None)
    assert scores["passed"] == 0
    assert all(not t["passed"] for t in scores["tests"])  # absent tests too


def test_a_peer_without_its_interpreter_is_skipped_and_said_so(tmp_path: Path) -> None:
    spec = PEERS["pymupdf4llm"]
    run = run_peer(spec, [], python=None, workdir=tmp_path)
    assert run.status == "skipped" and PEER_PYTHON_ENV in run.reason
    run = run_peer(spec, [], python=str(tmp_path / "no-python"), workdir=tmp_path)
    assert run.status == "skipped" and "does not exist" in run.reason


def test_folio_interpreter_has_no_pymupdf(tmp_path: Path) -> None:
    """The AGPL peer cannot run in folio's own virtualenv: it is skipped, with why."""
    run = run_peer(PEERS["pymupdf4llm"], [], python=sys.executable, workdir=tmp_path)
    assert run.status == "skipped"
    assert "exit 3" in run.reason and "pymupdf" in run.reason.lower()


def test_folio_never_imports_the_agpl_peer() -> None:
    banned = {"pymupdf", "fitz", "pymupdf4llm", "pymupdf_layout"}
    offenders = []
    for path in [*(REPO / "folio").rglob("*.py"), *(REPO / "folio_prefect").rglob("*.py"),
                 REPO / "bench" / "fidelity.py", REPO / "bench" / "fidelity_peers.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path}: {n}" for n in names if n.split(".")[0] in banned]
    assert not offenders


def _summary(median: float, by_type: dict[str, tuple[int, int]]) -> dict[str, object]:
    return {"cpu_seconds_per_page": {"median": median},
            "olmocr_by_type": {t: {"passed": p, "tests": n} for t, (p, n) in by_type.items()},
            "header_footer_recall": 0.5}


def test_side_by_side_leaves_math_out_and_gives_the_cpu_ratio() -> None:
    table = side_by_side({"folio": _summary(1.5, {"table": (16, 16), "math": (0, 8)}),
                          "pymupdf4llm": _summary(1.0, {"table": (4, 16), "math": (3, 8)})})
    figures = {r["figure"]: r for r in table["rows"]}
    assert figures["olmOCR table tests passed"]["folio"] == "16/16"
    assert figures["olmOCR table tests passed"]["pymupdf4llm"] == "4/16"
    assert "olmOCR math tests passed" not in figures
    assert figures["header/footer recall (labelled as such)"]["folio"] == 0.5
    assert table["median_cpu_per_page_ratio"] == {"folio / pymupdf4llm": 1.5}


@pytest.mark.skipif(not os.environ.get(PEER_PYTHON_ENV),
                    reason=f"{PEER_PYTHON_ENV} unset: no interpreter with pymupdf4llm")
def test_pymupdf4llm_peer(corpus: Path, tmp_path: Path) -> None:
    pdf = corpus / "docling/code_and_formula.pdf"
    run = run_peer(PEERS["pymupdf4llm"], [pdf], python=os.environ[PEER_PYTHON_ENV],
                   workdir=tmp_path)
    assert run.status == "ran" and run.exit_code == 0, run.reason + run.log_tail
    assert run.description["layout_active"] is True
    assert run.description["to_markdown"]["header"] is False
    out = peer_output(run.records[str(pdf)])
    assert out is not None and out.page_count == 2 and sorted(out.pages) == [1, 2]
    assert "JavaScript" in (out.pages[1] or "")
    labels = {label for blocks in out.blocks.values() for label, _ in blocks}
    assert labels <= {"Page-Header", "Page-Footer"}
    json.dumps(run.records)  # the records are plain JSON, as the result file stores them
