"""The layout model in the CPU pipeline, end to end on a real corpus page: a running head
that no repetition can find (the document has one page) is labelled from the model and
left out of the markdown and the chunks; with layout off the page comes out as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.io.sources import discover
from folio.models import DocumentResult, Label
from folio.output.outputs import render_markdown
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig

PDF = "docling/2305.03393v1-pg9.pdf"
HEADS = {Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value}


def _ground_truth_heads(corpus: Path) -> list[str]:
    """docling's page_header/page_footer texts of the page (its ground truth, not ours)."""
    truth = json.loads((corpus / "docling" / "groundtruth" /
                        f"{Path(PDF).stem}.json").read_text())
    return [t["text"] for t in truth["texts"] if t["label"] in ("page_header", "page_footer")]


def _ingest(corpus: Path, tmp_path: Path, *, enabled: bool) -> DocumentResult:
    config = PipelineConfig.model_validate({
        "store": {"kind": "none"}, "work_dir": str(tmp_path / "work"),
        "layout": {"enabled": enabled}})
    services = Services(config, str(tmp_path / "out"))
    try:
        return process_document(discover([str(corpus / PDF)], config.s3)[0], services)
    finally:
        services.close()


@pytest.mark.corpus
def test_model_labels_running_heads_and_keeps_them_out_of_the_markdown(
        corpus: Path, layout_model: Path, tmp_path: Path) -> None:
    heads = _ground_truth_heads(corpus)
    title = max(heads, key=len)
    assert len(title.split()) > 3  # a running title, not a lone page number

    doc = _ingest(corpus, tmp_path, enabled=True)
    (page,) = doc.pages
    assert page.engine == "text-layer"
    labelled = " ".join(b.content for b in page.blocks if b.label in HEADS)
    for text in heads:
        assert text in labelled, (text, [(b.label, b.content[:40]) for b in page.blocks])
        assert text not in page.markdown.split("\n\n")  # no paragraph of its own
    assert title not in page.markdown
    assert title not in render_markdown(doc)  # the document's markdown file
    tables = [b for b in page.blocks if b.label == Label.TABLE.value]
    assert len(tables) == 1 and "OTSL" in tables[0].content  # the page's table, one block


@pytest.mark.corpus
def test_with_layout_disabled_the_page_is_labelled_as_before(
        corpus: Path, tmp_path: Path) -> None:
    title = max(_ground_truth_heads(corpus), key=len)
    doc = _ingest(corpus, tmp_path, enabled=False)
    (page,) = doc.pages
    assert {b.label for b in page.blocks} <= {Label.TEXT.value, Label.SECTION_HEADER.value,
                                              *HEADS}
    assert title in page.markdown  # one page: nothing repeats, so only a model finds it
    assert all(b.content != title for b in page.blocks if b.label in HEADS)
