"""A document's scratch folder: private while it lives, gone after its run even a killed one.

Why: the scratch folder holds what folio makes of a document on the way, the decrypted
Ghostscript copy of a password-protected PDF included (it has no /Encrypt any more). A run
removes its folders as documents finish, but a run that is killed (SIGKILL, an OOM kill,
a power cut) cannot, and nothing did afterwards. So each folder is made 0700 and named
after the process that owns it (pid and start time); the next run in the same work folder
removes the folders of processes that are gone (:func:`sweep`).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from pathlib import Path

from folio.process_files import pid_alive, proc_start_time

__all__ = ["make", "sweep"]

log = logging.getLogger(__name__)


def make(root: Path) -> Path:
    """A new private folder under ``root`` for one document."""
    pid = os.getpid()
    path = Path(root) / f"{pid}.{proc_start_time(pid) or 0}-{time.time_ns()}-{threading.get_ident()}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700)
    return path


def sweep(root: Path) -> int:
    """Remove the folders under ``root`` whose owning process is gone; returns how many.
    Folders of live processes (another run in the same work folder) stay."""
    removed = 0
    try:
        entries = list(Path(root).iterdir())
    except OSError:
        return 0
    for entry in entries:
        owner = _owner(entry.name)
        if owner is None or pid_alive(*owner):
            continue
        shutil.rmtree(entry, ignore_errors=True)
        removed += 1
    if removed:
        log.info("removed %d scratch folder(s) of killed runs under %s", removed, root)
    return removed


def _owner(name: str) -> tuple[int, int | None] | None:
    """(pid, start time) from a folder name :func:`make` wrote, else None (not ours)."""
    head = name.split("-", 1)[0]
    pid_text, _, start_text = head.partition(".")
    if not pid_text.isdigit() or not start_text.isdigit() or "-" not in name:
        return None
    start = int(start_text)
    return int(pid_text), start or None
