"""Progress events, so a CLI bar, a Prefect artifact or a log can follow long work.

Listeners are process-wide because Prefect runs tasks in threads of the same process; a
listener must be cheap and thread-safe.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel


class ProgressEvent(BaseModel):
    kind: Literal["document-start", "pages-known", "page-done", "document-done"]
    source: str
    pages: int = 0  # pages-known: how many; page-done: 1; document-done: the document's
    outcome: str = ""
    seconds: float = 0.0  # document-done: from start to done


Listener = Callable[[ProgressEvent], None]

_listeners: list[Listener] = []
_lock = threading.Lock()


def add_listener(listener: Listener) -> None:
    with _lock:
        _listeners.append(listener)


def remove_listener(listener: Listener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)


def emit(event: ProgressEvent) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(event)
