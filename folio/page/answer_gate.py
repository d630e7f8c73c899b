"""A bound on the page threads doing Python work on a vision model's answers at once.

Why: a GPU run keeps hundreds of requests in flight, one page thread each. Pages of one
answer length end in the same engine step, so answers arrive in waves, and every thread of
a wave then parses and checks its answer at the same time, all holding or waiting for the
GIL; the threads that should send the next pages wait their turn behind hundreds of others,
each turn a 5 ms GIL slice. On the H200 (olmOCR 2's shape, fixed-length answers, the
series in bench/results/engine_limit.json) the server went from 256 running requests to
none for 10-15 s after each wave under folio, where the benchmark's own client refilled it
in about 6 s; this contention is the suspected cause, not yet measured apart. Parsing is
GIL-bound, so two at a time parse about as fast as two hundred; the rest wait blocked, off
the GIL's queue, and sending goes first.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: answers worked on at once: one parsing while another is between GIL slices
WORKERS = 2

_gate = threading.BoundedSemaphore(WORKERS)


@contextmanager
def answer_work() -> Iterator[None]:
    """Hold one of the :data:`WORKERS` places while parsing or checking an answer."""
    with _gate:
        yield
