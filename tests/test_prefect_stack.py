"""The test stacks' own helper (tests/prefect_stack.py): what its processes inherit.

Why: Prefect's worker stops on SIGTERM by sending itself SIGINT. A suite started in the
background of a shell runs with SIGINT ignored, and a worker that inherited that never
stopped on SIGTERM (the GPU pool's worker sat out its minute before SIGKILL in every such
full run). The stack starts its processes with SIGINT at its default, as a service
manager does.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from tests.prefect_stack import PrefectStack, _spawn


def test_stack_processes_start_with_sigint_at_its_default_though_the_suite_ignores_it(
        tmp_path: Path) -> None:
    stack = PrefectStack(api_url="", ui_url="", home=tmp_path, env=dict(os.environ))
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under `make test &`
    try:
        ignored = _spawn(stack, "ignored", sys.executable, "-c", probe)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert ignored.wait(timeout=60) == 0
    assert (tmp_path / "ignored.log").read_text().strip() == "True"
