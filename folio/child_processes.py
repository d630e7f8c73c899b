"""Reaping the children a forking server has started.

Both forking servers (the warm server, :mod:`folio.warm.server`, and the page workers'
zygote, :mod:`folio.pdf.zygote`) learn of ended children from SIGCHLD and must collect
every one that has ended at that moment: signals of the same kind coalesce, so one SIGCHLD
may stand for several children.
"""

from __future__ import annotations

import os
from collections.abc import Iterator


def exited_children() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of every child that has ended, without waiting for more."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status
