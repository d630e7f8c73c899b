"""Which test files pytest-xdist hands to one worker together under ``--dist loadfile``.

``prefect_stack_server`` (tests/prefect_stack.py) is a session fixture, and under xdist a
session is one worker's: every worker that ran a file using it started a stack of its own
(a Prefect server on PostgreSQL, two pools, two ``prefect deploy`` runs and a process
worker: one to one and a half minutes on the 2-core machine) and kept it running, its
worker polling every second, until that worker's session ended. The files that use it go
to one worker as one unit of work instead, so the session starts one stack; each file's
tests still run in their order, one file after the other, as when two of them happened to
land on one worker before.

Use from conftest.py::

    pytest_plugins = ["tests.xdist_groups"]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

__all__ = ["STACK_FILES", "pytest_xdist_make_scheduler"]

#: the files whose tests use ``prefect_stack`` / ``prefect_stack_server``
STACK_FILES = frozenset({"test_trigger", "test_ui", "test_gpu_deployments", "test_work_pools"})
#: the work unit they make (any name that is not a file's)
STACK_GROUP = "prefect_stack_server-group"


def unit_of(nodeid: str) -> str:
    """The unit of work of a test: its file, or :data:`STACK_GROUP` for
    :data:`STACK_FILES`."""
    path = nodeid.split("::", 1)[0]
    return STACK_GROUP if Path(path).stem in STACK_FILES else path


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's own ``loadfile`` scheduling with :func:`unit_of` as the unit; any other
    ``--dist`` is left to xdist (None)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFileScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return GroupedFileScheduling(config, log)
