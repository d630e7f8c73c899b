"""Per-document progress artifacts in the Prefect UI, fed by folio.progress events.

One board per process serves every open bar: one listener, one ticker thread and one
Prefect client. A thread, a listener and a new client per document (each update built
its own) cost 8% of a GPU run's flow process with ~130 documents open at once
(bench/results/earlier/gpu_profile_r1_8222cd1.json), and every page event went through
every document's listener.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType
from typing import Any, Self
from uuid import UUID

from folio import progress

log = logging.getLogger(__name__)

#: an artifact is updated at most this often, or when another step is crossed
UPDATE_EVERY_S = 2.0
UPDATE_STEP = 0.05
#: steps crossed within this long go out as one update
COALESCE_S = 0.2


class PageProgress:
    """A Prefect progress artifact for one document, counting ``folio.progress``
    page-done events for its source.

    The board's listener runs in the page threads, so it only counts; the board's ticker
    talks to the API (throttled), and any API failure is logged, never raised: progress
    is for people watching, not part of the document's outcome.
    """

    def __init__(self, source: str, pages: int) -> None:
        self.source, self.pages = source, max(pages, 1)
        self.done = 0
        self.shown = -1  # pages the artifact shows (the ticker's)
        self.crossed = False  # a step crossed since the last update (board lock held)
        self.sent_at = 0.0  # time.monotonic() of the last update
        self.name = source.rsplit("/", 1)[-1]
        self.artifact: UUID | None = None
        self.client: Any = None  # the process's client for the caller's API
        self.api_url = ""

    def __enter__(self) -> Self:
        from prefect.artifacts import create_progress_artifact

        try:  # in the caller's thread: the artifact belongs to its flow run, and the
            # client is made from the caller's settings (the ticker thread has none)
            self.artifact = create_progress_artifact(  # type: ignore[assignment]  # sync call
                0.0, description=f"OCR of {self.name}: 0 of {self.pages} pages")
            self.api_url = _api_url()
            self.client = _client(self.api_url)
        except Exception:
            log.warning("no progress artifact for %s", self.source, exc_info=True)
            return self
        _BOARD.add(self)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.artifact is None:
            return
        _BOARD.remove(self)
        _send(self, final=True)

    def count(self, pages: int) -> bool:
        """Add ``pages``; whether an update step was crossed (board lock held)."""
        before = self.done
        self.done += pages
        if int(self.done / self.pages / UPDATE_STEP) > int(before / self.pages / UPDATE_STEP):
            self.crossed = True
        return self.crossed


class _Board:
    """The open bars of this process, their listener and their ticker."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._bars: dict[str, list[PageProgress]] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, bar: PageProgress) -> None:
        with self._lock:
            if not self._bars:
                progress.add_listener(self._on_event)
            self._bars.setdefault(bar.source, []).append(bar)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="folio-progress",
                                                daemon=True)
                self._thread.start()

    def remove(self, bar: PageProgress) -> None:
        """Take ``bar`` off the board; it counts no more events."""
        with self._lock:
            bars = self._bars.get(bar.source, [])
            if bar in bars:
                bars.remove(bar)
            if not bars:
                self._bars.pop(bar.source, None)
            if not self._bars:
                progress.remove_listener(self._on_event)
        self._wake.set()  # an empty board lets its ticker end

    def _on_event(self, event: progress.ProgressEvent) -> None:
        if event.kind != "page-done":
            return
        with self._lock:
            crossed = [bar.count(event.pages) for bar in self._bars.get(event.source, ())]
        if any(crossed):
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(UPDATE_EVERY_S)
            self._wake.clear()
            now = time.monotonic()
            with self._lock:
                if not self._bars:
                    self._thread = None
                    return
                # a bar goes out when it crossed a step or its last update is old, not
                # each time another document's bar wakes the ticker
                due = [bar for bars in self._bars.values() for bar in bars
                       if bar.done != bar.shown
                       and (bar.crossed or now - bar.sent_at >= UPDATE_EVERY_S)]
                for bar in due:
                    bar.crossed = False
            for bar in due:
                _send(bar)
            self._wake.wait(COALESCE_S)  # coalesce bursts of pages


_BOARD = _Board()
_client_lock = threading.Lock()
_clients: dict[str, Any] = {}  # API URL -> client: a process may talk to more than one


def _api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    return PREFECT_API_URL.value() or ""


def _client(url: str, stale: Any = None) -> Any:
    """The process's Prefect client for the API at ``url``; ``stale``: a client found
    closed, replaced by a new one (made for ``url`` whatever the calling thread's
    settings say: the ticker thread has none)."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with _client_lock:
        if url not in _clients or (stale is not None and _clients[url] is stale):
            if url:
                with temporary_settings({PREFECT_API_URL: url}):
                    _clients[url] = get_client(sync_client=True)
            else:
                _clients[url] = get_client(sync_client=True)
        return _clients[url]


def _update(bar: PageProgress, value: float, description: str) -> None:
    from prefect.client.schemas.actions import ArtifactUpdate

    with _client_lock:  # one request at a time on the shared client
        bar.client.update_artifact(artifact_id=bar.artifact,
                                   artifact=ArtifactUpdate(data=value, description=description))


def _send(bar: PageProgress, final: bool = False) -> None:
    """One artifact update through the process's one Prefect client; failures logged."""
    assert bar.artifact is not None
    done = min(bar.done, bar.pages)
    value = 100.0 if final else 100.0 * done / bar.pages
    description = f"OCR of {bar.name}: {done} of {bar.pages} pages" + (
        ", finished" if final else "")
    try:
        try:
            _update(bar, value, description)
        except RuntimeError as exc:
            # the cached client was closed under us (seen when a run's teardown closes
            # Prefect's clients while a bar is still ticking): once more on a new one
            if "closed" not in str(exc):
                raise
            bar.client = _client(bar.api_url, stale=bar.client)
            _update(bar, value, description)
        bar.shown, bar.sent_at = done, time.monotonic()
    except Exception as exc:  # a progress bar is never worth a traceback in the run's log
        log.warning("progress artifact for %s not updated: %s: %s", bar.source,
                    type(exc).__name__, exc)
        log.debug("progress artifact update failed", exc_info=True)
