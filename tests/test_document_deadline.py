"""One document is bounded in wall time by ``limits.document_timeout_s`` whatever its pages
(issue 58, finding 6): text-layer pages too, with the real page workers; what it did not
finish ends ``document-timeout``, not retried by the next run with the same limit, tried
again with a larger one; a batch of a many-frame image does not count every frame."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult, PagePrep
from folio.pipeline import process_documents
from folio.pipeline.services import Services
from folio.samples import report_pages, write_text_pdf
from folio.settings.config import PipelineConfig, RenderSettings, RouteSettings

pytestmark = pytest.mark.timeout(300)

LIMIT_S = 1.0


@pytest.fixture(scope="module")
def long_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight pages of born-digital text (their route: the text layer)."""
    return write_text_pdf(tmp_path_factory.mktemp("long") / "long.pdf",
                          report_pages(seed=11, n=8))


def _run(tmp_path: Path, pdf: Path, limit_s: float) -> DocumentResult:
    config = PipelineConfig.model_validate({
        "work_dir": str(tmp_path / "w"), "validation": {"enabled": False},
        "store": {"kind": "none"}, "compress": False,
        "limits": {"document_timeout_s": limit_s}})
    services = Services(config, str(tmp_path / "out"))
    try:
        (doc,) = process_documents(discover([str(pdf)], config.s3), services)
    finally:
        services.close()
    return doc


def test_a_long_text_layer_document_stops_at_its_time_limit(long_pdf: Path, tmp_path: Path) -> None:
    """Before: the deadline was looked at only for pages bound for the engine, so the
    text-layer pages all ran to the end, however long that took."""
    doc = _run(tmp_path, long_pdf, LIMIT_S)
    timed_out = [p for p in doc.pages if p.reason.startswith("document-timeout")]
    assert timed_out, "pages past the limit end document-timeout"
    assert doc.outcome in (DocumentOutcome.PARTIAL, DocumentOutcome.QUARANTINED)
    assert not doc.retryable and not any(p.retryable for p in timed_out)
    assert doc.time_limit_s == LIMIT_S
    assert "limits.document_timeout_s" in timed_out[0].reason

    again = _run(tmp_path, long_pdf, LIMIT_S)
    assert again.cached, "the same limit: the verdict stands, no work done again"
    assert again.outcome is doc.outcome

    larger = _run(tmp_path, long_pdf, 600.0)
    assert not larger.cached and larger.outcome is DocumentOutcome.OK
    assert larger.time_limit_s is None


def test_a_batch_of_a_many_frame_image_does_not_count_its_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: each 16-page batch reopened the TIFF, counted its frames and walked to its
    first page, loading the tag directory of every frame on the way (a 10,000-frame file:
    seconds per batch, every batch). The probe counts once; a batch opens at its page."""
    from PIL import TiffImagePlugin

    from folio.formats import image_pages
    from folio.pdf.worker_protocol import WorkerJob

    loads = [0]
    real_load = TiffImagePlugin.ImageFileDirectory_v2.load

    def counted(self: Any, fp: Any) -> None:
        loads[0] += 1
        real_load(self, fp)

    frames = [Image.new("L", (40, 40), 255 - i) for i in range(60)]
    tiff = tmp_path / "many.tif"
    frames[0].save(tiff, save_all=True, append_images=frames[1:], dpi=(100, 100))

    def no_count(image: Any) -> int:
        raise AssertionError("every frame counted again for one batch")

    monkeypatch.setattr(image_pages, "frame_count", no_count)
    monkeypatch.setattr(TiffImagePlugin.ImageFileDirectory_v2, "load", counted)
    job = WorkerJob(pdf=tiff, kind="image", pages=[57, 58, 59, 60], out_dir=tmp_path / "out",
                    render_settings=RenderSettings(), route_settings=RouteSettings(),
                    timeout_s=60, memory_mb=1024)
    (tmp_path / "out").mkdir()
    pages: list[PagePrep] = []

    def save(image: Image.Image, out: Path, index: int, fmt: str) -> Path:
        path = out / f"p{index}.png"
        image.save(path)
        return path

    image_pages.prepare_image_pages(
        job, lambda m: pages.append(m.page) if m.page is not None else None, save,
        lambda index: None)
    assert [p.index for p in pages] == [57, 58, 59, 60]
    assert [p.error is None for p in pages] == [True, True, True, False]
    assert pages[3].error is not None and pages[3].error.startswith("bad-image: page 61")
    assert loads[0] < 10, f"{loads[0]} frame directories read for a batch of 4 pages"
    for page in pages[:3]:  # each page is its own frame, not one counted from the batch
        assert page.image_path is not None
        with Image.open(page.image_path) as saved:
            assert saved.convert("L").getpixel((0, 0)) == 255 - page.index


def test_an_office_conversion_is_cut_at_the_documents_time(tmp_path: Path) -> None:
    """Before: the conversion had ``office.timeout_s`` (120 s) of its own whatever the
    document's limit; now it gets what is left of the document's time, and a conversion
    cut short by it ends the document as its pages would, not retried with this limit."""
    pytest.importorskip("folio.formats.office")
    # an RTF: LibreOffice converts it to DOCX first (a DOCX is read natively, no conversion)
    rtf = tmp_path / "memo.rtf"
    rtf.write_text("{\\rtf1\\ansi " + "a memo\\par " * 50 + "}")
    doc = _run(tmp_path, rtf, 0.5)  # LibreOffice alone takes longer than that to start
    assert doc.outcome is DocumentOutcome.QUARANTINED and not doc.retryable
    assert doc.reason.startswith("document-timeout") and "Office conversion" in doc.reason
    again = _run(tmp_path, rtf, 0.5)
    assert again.cached and again.outcome is DocumentOutcome.QUARANTINED
