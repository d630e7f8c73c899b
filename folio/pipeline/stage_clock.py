"""When each document's finishing stages ran, so a run can say where its last seconds went.

Why: a GPU run's figure counts the seconds between the engine's last page and the end of
the flow, and those seconds are spent in stages that run in many threads at once
(validation, embeddings, outputs, the vector write, the done marker). A profile of one
document does not show what the last dozens do together on another machine; these spans,
summarised in the run report (``timing.finishing``), do. Recording one costs two clock
reads and an append under a lock.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    stage: str
    start: float  # time.monotonic()
    end: float


class StageClock:
    """Spans of named stages, from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spans: list[Span] = []

    @contextmanager
    def span(self, stage: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(stage, start, time.monotonic())

    def add(self, stage: str, start: float, end: float) -> None:
        with self._lock:
            self._spans.append(Span(stage, start, end))

    def spans(self) -> list[Span]:
        with self._lock:
            return list(self._spans)

    def summary(self, *, origin: float, after: float | None = None
                ) -> dict[str, dict[str, float | int]]:
        """Per stage: how many spans, their median and longest seconds, and when the last
        one ended (seconds from ``origin``); only spans that ended after ``after`` when it
        is given (the engine's last page: what the run's tail was made of)."""
        by_stage: dict[str, list[Span]] = {}
        for span in self.spans():
            if after is None or span.end > after:
                by_stage.setdefault(span.stage, []).append(span)
        out: dict[str, dict[str, float | int]] = {}
        for stage, spans in by_stage.items():
            seconds = [s.end - s.start for s in spans]
            out[stage] = {"n": len(spans), "median_s": round(statistics.median(seconds), 3),
                          "max_s": round(max(seconds), 3),
                          "first_start_s": round(min(s.start for s in spans) - origin, 3),
                          "last_end_s": round(max(s.end for s in spans) - origin, 3)}
        return out
