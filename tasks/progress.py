"""Per-document progress artifacts in the Prefect UI, fed by folio.progress events."""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Self
from uuid import UUID

from folio import progress

log = logging.getLogger(__name__)

#: the progress artifact is updated at most this often, or when another step is crossed
UPDATE_EVERY_S = 2.0
UPDATE_STEP = 0.05


class PageProgress:
    """A Prefect progress artifact for one document, fed by ``folio.progress`` page-done
    events for its source.

    The listener runs in the page threads, so it only counts; a ticker thread talks to
    the API (throttled), and any API failure is logged, never raised: progress is for
    people watching, not part of the document's outcome.
    """

    def __init__(self, source: str, pages: int) -> None:
        self.source, self.pages = source, max(pages, 1)
        self.done = 0
        self._name = source.rsplit("/", 1)[-1]
        self._artifact: UUID | None = None
        self._wake = threading.Event()
        self._stop = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="folio-progress", daemon=True)

    def __enter__(self) -> Self:
        from prefect.artifacts import create_progress_artifact

        try:
            self._artifact = create_progress_artifact(  # type: ignore[assignment]  # sync call
                0.0, description=f"OCR of {self._name}: 0 of {self.pages} pages")
        except Exception:
            log.warning("no progress artifact for %s", self.source, exc_info=True)
            return self
        progress.add_listener(self._on_event)
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._artifact is None:
            return
        progress.remove_listener(self._on_event)
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=10)
        self._update(final=True)

    def _on_event(self, event: progress.ProgressEvent) -> None:
        if event.kind != "page-done" or event.source != self.source:
            return
        with self._lock:
            before = self.done
            self.done += event.pages
            if int(self.done / self.pages / UPDATE_STEP) > int(before / self.pages / UPDATE_STEP):
                self._wake.set()

    def _run(self) -> None:
        shown = -1
        while not self._stop:
            self._wake.wait(UPDATE_EVERY_S)
            self._wake.clear()
            if self._stop:
                return
            if self.done != shown:
                shown = self.done
                self._update()
                self._wake.wait(0.2)  # coalesce bursts of pages; a stop still ends it at once

    def _update(self, final: bool = False) -> None:
        from prefect.artifacts import update_progress_artifact

        assert self._artifact is not None
        done = min(self.done, self.pages)
        try:
            update_progress_artifact(
                self._artifact, 100.0 if final else 100.0 * done / self.pages,
                description=f"OCR of {self._name}: {done} of {self.pages} pages"
                + (", finished" if final else ""))
        except Exception:
            log.warning("progress artifact for %s not updated", self.source, exc_info=True)
