"""folio.pipeline.page_jobs: what a document's page-worker jobs ask for."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.models import DocumentResult
from folio.pipeline.page_jobs import worker_jobs
from folio.pipeline.prepare import PreparedDocument
from folio.settings.config import PipelineConfig


@pytest.mark.parametrize(("engine", "finer"), [
    ("tesseract", True), ("rapidocr", True), ("text-layer", False), ("vllm", False)])
def test_every_cpu_ocr_engine_gets_the_finer_render_for_small_text(
        tmp_path: Path, engine: str, finer: bool) -> None:
    """Small print is rendered finer for an engine that reads the image on the CPU
    (RapidOCR too, as bench/ocr_engines.py measured it), not for a vision model, whose
    image size is its preset's, nor for the text layer."""
    config = PipelineConfig.model_validate({"ocr": {"engine": engine},
                                            "limits": {"pages_per_worker": 2}})
    prep = PreparedDocument(result=DocumentResult(source="a.pdf", page_count=5),
                            pdf=tmp_path / "a.pdf", work_dir=tmp_path, started=0.0)
    jobs = worker_jobs(prep, config)
    assert [job.pages for job in jobs] == [[0, 1], [2, 3], [4]]
    assert {job.ocr_resolution for job in jobs} == {finer}
