"""One PDF through folio's pipeline with the defaults and no vector store (tests that
check what a whole run makes of a corpus PDF)."""

from __future__ import annotations

from pathlib import Path

from folio.io.sources import discover
from folio.models import DocumentResult
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig


def process_pdf(pdf: Path, tmp_path: Path) -> tuple[DocumentResult, PipelineConfig]:
    """``pdf`` processed as a run does it (store none, work and output under ``tmp_path``)."""
    config = PipelineConfig.model_validate(
        {"store": {"kind": "none"}, "work_dir": str(tmp_path / "work")})
    services = Services(config, str(tmp_path / "out"))
    try:
        return process_document(discover([str(pdf)], config.s3)[0], services), config
    finally:
        services.close()
