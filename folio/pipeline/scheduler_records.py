"""What the page scheduler (:mod:`folio.pipeline.scheduler`) keeps: an admitted
document's page accounting, a rendered page waiting for the engine, and the samples of
the queue in front of the engine that make its timeline.

Why a module of their own: :mod:`folio.pipeline.scheduler` passed 500 lines (issue 46);
these are plain records, without the scheduler's threads and lock (it holds that lock
whenever it reads or changes them), and :class:`QueueSample` is also what a run's
timeline reports to benchmarks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel

from folio.models import PagePrep, PageResult
from folio.pipeline.prepare import PreparedDocument

if TYPE_CHECKING:
    from folio.pdf.page_worker import WorkerJob

__all__ = ["QueueSample"]


class QueueSample(BaseModel):
    """What stood in front of the engine ``t`` seconds after the scheduler started:
    pages rendered and waiting for a ladder slot, pages in the ladder (at the engine),
    pages being rendered, documents being prepared and admitted. A GPU run whose engine
    went short shows it here: ``in_ladder`` under the budget while ``ready`` is 0.
    ``at_server``: requests sent and not yet answered (generative engines; None else)."""

    t: float
    ready: int
    in_ladder: int
    rendering: int
    preparing: int
    documents: int
    at_server: int | None = None


@dataclass
class _Document:
    """One admitted document's page accounting."""

    prep: PreparedDocument
    jobs: deque[WorkerJob]
    deadline: float
    results: dict[int, PageResult] = field(default_factory=dict)
    running_jobs: int = 0
    last_done: int = -1  # the highest page index with a result

    @property
    def source(self) -> str:
        return self.prep.result.source

    @property
    def outstanding(self) -> int:
        return self.prep.result.page_count - len(self.results)


@dataclass
class _Ready:
    doc: _Document
    page: PagePrep
    size: int
