"""A bound on the page threads doing Python work on a vision model's answers at once.

Why: a GPU run keeps hundreds of requests in flight, one page thread each. When a batch of
answers arrives together (pages of one length end in the same engine step), every one of
those threads parses and checks its answer at the same time, all holding or waiting for
the GIL. The threads that should be sending the next pages then wait their turn behind
hundreds of others, each turn a 5 ms GIL slice: on the H200 the server went from 256
running requests to none for 10-15 s after each such wave (olmOCR 2's shape,
bench/results/engine_limit.json's series). Parsing is GIL-bound, so two at a time parse
as fast as two hundred; the rest wait blocked, off the GIL's queue, and sending goes first.
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
