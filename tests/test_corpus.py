"""Every PDF of the shared corpus (real files by others, malformed ones included) ends in a
typed outcome through the real flow: no crash, no hang, no internal error, nothing dropped.

The sweep is about outcomes, not text: pages without a trustworthy text layer go to the
text-layer engine (no OCR model), which quarantines scans with a reason, so the whole
corpus (331 pages) runs in a few minutes on two cores while every page is still opened,
judged, planned and rendered. OCR quality is tested on the linn scans separately.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.corpus, pytest.mark.usefixtures("prefect_api")]


def manifest(corpus: Path) -> dict[str, dict[str, str]]:
    with (corpus / "MANIFEST.tsv").open() as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return {str((corpus / r["local_path"]).resolve()): r for r in rows}


@pytest.fixture(scope="module")
def sweep(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from folio_prefect.flows.ingest import ingest

    out = tmp_path_factory.mktemp("corpus-out")
    report = ingest(
        sources=[str(corpus)],
        out=str(out),
        engine="text-layer",
        route="auto",
        settings={
            "render.longest_side_px": 768,
            "limits.document_timeout_s": 240,
            "store.kind": "none",
            # outcomes, not labels: the layout model (half the sweep's CPU: 190 against 98
            # CPU-s alone here) only reads an image the render step has made, and a failure
            # of it costs a page its labels, never the page (folio.pdf.page_layout); its
            # labels are tested on pages with ground truth in test_layout_pipeline
            "layout.enabled": False,
            # every document is still validated; the Data Docs site (HTML built per
            # document: 30 of the sweep's 186 CPU seconds, outcomes the same without it)
            # is tested in test_validation, as test_scheduler leaves it off too
            "validation.data_docs": False,
        },
    )
    return {"report": report, "manifest": manifest(corpus)}


def test_every_corpus_pdf_has_one_typed_outcome(sweep: dict[str, Any]) -> None:
    docs = {str(Path(d["source"]).resolve()): d for d in sweep["report"]["documents"]}
    assert set(sweep["manifest"]) <= set(docs), "a corpus PDF is missing from the report"
    # every other entry (the ground truth's markdown, JSON, qpdf's .out files) has a line
    # too: skipped with its reason, or read when its content is a PDF whatever its name
    others = {s: d for s, d in docs.items() if s not in sweep["manifest"]}
    assert others and all(d["outcome"] in ("skipped", "ok", "partial", "quarantined")
                          and (d["outcome"] == "ok" or d["reason"]) for d in others.values())
    assert any(d["outcome"] == "skipped" for d in others.values())
    for source, doc in docs.items():
        if source not in sweep["manifest"]:
            continue
        assert doc["outcome"] in ("ok", "partial", "quarantined"), source
        assert doc["pages_ok"] + doc["pages_fallback"] + doc["pages_quarantined"] == doc["pages"]
        if doc["outcome"] != "ok":
            assert doc["reason"], f"{source}: {doc['outcome']} without a reason"
        reasons = [doc["reason"]] + [p["reason"] for p in doc["quarantined_pages"]]
        assert not [r for r in reasons if r.startswith("internal")], (source, reasons)


def test_born_digital_pages_are_read(sweep: dict[str, Any]) -> None:
    rows = sweep["manifest"]
    docs = {str(Path(d["source"]).resolve()): d for d in sweep["report"]["documents"]}
    born = [
        s
        for s, r in rows.items()
        if r["kind"].startswith("born-digital")
        and "RTL" not in r["kind"]
        and "Arabic" not in r["kind"]
    ]
    assert len(born) >= 15
    read = [s for s in born if docs[s]["outcome"] in ("ok", "partial")]
    assert len(read) / len(born) >= 0.9, [Path(s).name for s in born if s not in read]


def test_encrypted_and_unreadable_files_are_quarantined_with_reasons(sweep: dict[str, Any]) -> None:
    docs = {Path(d["source"]).name: d for d in sweep["report"]["documents"]}
    enc = docs["2206.01062_pg3_password.pdf"]
    assert enc["outcome"] == "quarantined" and enc["reason"].startswith("encrypted")
    for name in ("invalid.pdf", "bad1.pdf"):
        assert docs[name]["outcome"] == "quarantined" or docs[name]["repaired"], docs[name]
