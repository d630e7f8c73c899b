"""How much of each kind of work the page scheduler runs at once, from the configuration.

Why: :class:`~folio.pipeline.scheduler.PageScheduler` only enforces these numbers; how
they follow from a :class:`~folio.settings.config.PipelineConfig` (an engine's in-flight budget
times its servers, the extra ladder pages, the render and prepare bursts, the
watermark) is a decision of its own, read by tests and reports without a scheduler.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, Field

from folio.engines.base import GENERATIVE_ENGINES
from folio.gpu.vllm_server import configured_endpoints
from folio.settings.config import PipelineConfig

__all__ = ["SchedulerLimits", "ghostscript_workers", "ocr_concurrency", "ocr_threads", "server_count"]


class SchedulerLimits(BaseModel):
    """How much of each kind of work runs at once (derived from the configuration)."""

    ocr_concurrency: int = Field(ge=1, description="requests at the engine at once (its "
                                 "in-flight budget; a CPU engine's pages at once)")
    ocr_threads: int = Field(ge=1, description="pages in the engine ladder at once: the "
                             "budget and the pages encoded or parsed outside a request")
    render_workers: int = Field(ge=1, description="page-worker children at once")
    render_burst: int = Field(ge=1, description="page-worker children at once while the "
                              "engine is short of pages")
    prepare_workers: int = Field(ge=1, description="documents being prepared at once")
    prepare_burst: int = Field(ge=1, description="documents being prepared at once while "
                               "the engine is short of pages (no page waiting, the ladder "
                               "below its budget)")
    pages_per_worker: int = Field(ge=1)
    image_budget_bytes: int = Field(ge=1, description="rendered images waiting on disk")
    watermark_pages: int = Field(ge=1, description="pages waiting or rendering before render "
                                 "pauses; admit documents below this many near pages")
    max_documents: int = Field(ge=1, description="documents admitted and not finished")

    @classmethod
    def from_config(cls, config: PipelineConfig) -> SchedulerLimits:
        limits = config.limits
        ocr = ocr_concurrency(config)
        return cls(
            ocr_concurrency=ocr,
            ocr_threads=ocr_threads(config),
            render_workers=limits.render_workers,
            render_burst=max(limits.render_workers, limits.render_burst_workers),
            prepare_workers=limits.document_concurrency,
            # preparing is mostly child processes (probe, Ghostscript): when many short
            # documents come first, it is what the engine waits on; like rendering, it
            # may then take the cores a served engine leaves idle
            prepare_burst=max(2 * limits.document_concurrency, limits.render_burst_workers),
            pages_per_worker=limits.pages_per_worker,
            image_budget_bytes=limits.prepared_image_mb * 1024 * 1024,
            # enough ready pages to refill the engine twice over while more render
            watermark_pages=max(2 * ocr, 4 * limits.pages_per_worker),
            max_documents=max(8, 2 * ocr, 4 * limits.document_concurrency),
        )


def ocr_concurrency(config: PipelineConfig) -> int:
    """Pages in the ladder at once: a generative engine's in-flight budget (the requests
    it keeps at each server, times its servers), else the CPU page concurrency."""
    if config.ocr.engine in GENERATIVE_ENGINES:
        return max(config.ocr.in_flight, 1) * server_count(config)
    return max(config.limits.page_concurrency, 1)


def ocr_threads(config: PipelineConfig) -> int:
    """Pages in the ladder at once. A generative engine's request slots are taken inside
    the engine (a semaphore per server, or the dispatcher's per-engine budgets), so the
    ladder keeps a quarter more pages (at least two): those are encoded and waiting for a
    slot, or parsing an answer that already gave its slot back. With exactly one thread
    per slot, a page's client-side time (reading and encoding its image, parsing the
    answer, and waiting for the GIL while documents are validated and loaded) left a slot
    empty at the server for as long. ``limits.ocr_extra_pages`` sets the extra pages."""
    budget = ocr_concurrency(config)
    if config.ocr.engine not in GENERATIVE_ENGINES:
        return budget
    extra = config.limits.ocr_extra_pages
    return budget + (max(2, budget // 4) if extra is None else extra)


def server_count(config: PipelineConfig) -> int:
    """The servers a generative engine spreads pages over (at least one)."""
    return max(1, len(configured_endpoints(config.ocr)))


def ghostscript_workers(config: PipelineConfig) -> int:
    """Ghostscript compressions at once across the run's documents:
    ``limits.ghostscript_workers`` when set, else a quarter of the cores, at least two (at
    a GPU run's start the prepare burst had fourteen running, and the vLLM server on the
    same host took in its first requests 4-5x slower meanwhile:
    bench/results/engine_limit_issue29.json, ``ramp_note``)."""
    return config.limits.ghostscript_workers or max(2, (os.cpu_count() or 1) // 4)
