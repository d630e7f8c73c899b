"""The test server's GPU-like behaviours that the benchmarks rely on."""

from __future__ import annotations

import threading
import time

import httpx

from tests.openai_fake import FakeServer


def test_lockstep_answers_leave_together() -> None:
    """Requests sent apart are answered in the same step, as a batch engine ends
    requests of one output length together (the end of a GPU run)."""
    ended: list[float] = []
    with FakeServer(lockstep_s=1.5) as fake:  # the server in this process
        def ask() -> None:
            body = {"model": "fake-ocr", "messages": [{"role": "user", "content": "page"}]}
            httpx.post(f"{fake.url}/chat/completions", json=body, timeout=10).raise_for_status()
            ended.append(time.monotonic())

        step = 1.5
        time.sleep(step - time.monotonic() % step + 0.05)  # just after a step (one clock)
        first = threading.Thread(target=ask)
        first.start()
        time.sleep(0.4)
        ask()
        first.join()
    assert len(ended) == 2 and abs(ended[0] - ended[1]) < 0.3
    assert min(ended) % 1.5 < 0.3  # both left at the next step, not as they came
