"""The page workers' nice value is a setting that reaches every page worker of a run:
off (0) by default, and when set the run's zygote starts early at that value. (That the
value reaches the children and their session: tests/test_zygote.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from folio.models import DocumentResult
from folio.pipeline.page_jobs import worker_jobs
from folio.pipeline.prepare import PreparedDocument
from folio.settings.config import PipelineConfig


@pytest.mark.parametrize("engine", ["tesseract", "rapidocr", "vllm", "openai"])
def test_off_by_default_whatever_the_engine(engine: str) -> None:
    assert PipelineConfig.model_validate({"ocr": {"engine": engine}}).limits.worker_nice == 0


def test_out_of_range_nice_is_refused() -> None:
    with pytest.raises(ValueError):
        PipelineConfig.model_validate({"limits": {"worker_nice": 20}})


def test_every_batch_of_a_document_carries_it(tmp_path: Path) -> None:
    config = PipelineConfig.model_validate({"ocr": {"engine": "openai"}, "work_dir": str(tmp_path),
                                            "limits": {"pages_per_worker": 4, "worker_nice": 7}})
    prep = PreparedDocument(result=DocumentResult(source="x.pdf", page_count=10), pdf=tmp_path / "x.pdf",
                            work_dir=tmp_path, started=time.monotonic())
    jobs = worker_jobs(prep, config)
    assert [len(job.pages) for job in jobs] == [4, 4, 2]
    assert {job.nice for job in jobs} == {7}


@pytest.mark.parametrize("nice", [0, 7])
def test_a_run_starts_its_page_workers_zygote_before_its_first_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nice: int
) -> None:
    """The zygote's imports (half a second or more) overlap the run's start instead of
    delaying the first probe; at the nice value the run's page workers will ask for."""
    from folio.pdf import zygote
    from folio.pipeline.services import Services

    monkeypatch.setenv(zygote.MODE_ENV, "fork")
    zygote.shutdown()
    config = PipelineConfig.model_validate({"work_dir": str(tmp_path), "store": {"kind": "none"},
                                            "limits": {"worker_nice": nice}})
    services = Services(config, str(tmp_path / "out"))
    try:
        started = zygote.current(nice)
        assert started is not None and started.alive() and started.nice == nice
        assert zygote.current(7 - nice) is None
    finally:
        services.close()
        zygote.shutdown()
