"""The page workers' nice value follows the engine: they yield the CPU beside a served
engine (its front end feeds the GPU) and keep their priority on the CPU path, where they
are the run's work. (That the value reaches the children: tests/test_zygote.py.)"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from folio.config import PipelineConfig
from folio.models import DocumentResult
from folio.pipeline.limits import SERVED_WORKER_NICE, worker_nice
from folio.pipeline.page_jobs import worker_jobs
from folio.pipeline.prepare import PreparedDocument


@pytest.mark.parametrize(("engine", "expected"), [
    ("tesseract", 0), ("rapidocr", 0), ("vllm", SERVED_WORKER_NICE), ("openai", SERVED_WORKER_NICE),
])
def test_default_nice_follows_the_engine(engine: str, expected: int) -> None:
    assert worker_nice(PipelineConfig.model_validate({"ocr": {"engine": engine}})) == expected


def test_a_set_nice_value_wins_either_way() -> None:
    served = PipelineConfig.model_validate({"ocr": {"engine": "vllm"}, "limits": {"worker_nice": 0}})
    cpu = PipelineConfig.model_validate({"ocr": {"engine": "tesseract"}, "limits": {"worker_nice": 5}})
    assert (worker_nice(served), worker_nice(cpu)) == (0, 5)


def test_out_of_range_nice_is_refused() -> None:
    with pytest.raises(ValueError):
        PipelineConfig.model_validate({"limits": {"worker_nice": 20}})


def test_every_batch_of_a_document_carries_it(tmp_path: Path) -> None:
    config = PipelineConfig.model_validate({"ocr": {"engine": "openai"}, "work_dir": str(tmp_path),
                                            "limits": {"pages_per_worker": 4}})
    prep = PreparedDocument(result=DocumentResult(source="x.pdf", page_count=10), pdf=tmp_path / "x.pdf",
                            work_dir=tmp_path, started=time.monotonic())
    jobs = worker_jobs(prep, config)
    assert [len(job.pages) for job in jobs] == [4, 4, 2]
    assert {job.nice for job in jobs} == {SERVED_WORKER_NICE}


def test_a_run_starts_its_page_workers_zygote_before_its_first_document(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zygote's imports (half a second or more) overlap the run's start instead of
    delaying the first probe; at the nice value the run's page workers will ask for."""
    from folio.pdf import zygote
    from folio.pipeline.services import Services

    monkeypatch.setenv(zygote.MODE_ENV, "fork")
    zygote.shutdown()
    config = PipelineConfig.model_validate({"ocr": {"engine": "openai"}, "work_dir": str(tmp_path),
                                            "store": {"kind": "none"}})
    services = Services(config, str(tmp_path / "out"))
    try:
        started = zygote.current(SERVED_WORKER_NICE)
        assert started is not None and started.alive() and started.nice == SERVED_WORKER_NICE
        assert zygote.current(0) is None
    finally:
        services.close()
        zygote.shutdown()
