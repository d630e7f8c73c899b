"""A counter of callers inside a block at once, for tests that bound concurrency."""

from __future__ import annotations

import threading


class Peak:
    """``with peak:`` around the work; ``peak.most`` is the most callers inside at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0

    def __enter__(self) -> Peak:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.now -= 1
