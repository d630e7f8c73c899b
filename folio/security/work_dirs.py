"""A document's scratch folder: private while it lives, gone after its run even a killed one.

Why: the scratch folder holds what folio makes of a document on the way, the decrypted
Ghostscript copy of a password-protected PDF included (it has no /Encrypt any more). A run
removes its folders as documents finish, but a run that is killed (SIGKILL, an OOM kill,
a power cut) cannot, and nothing did afterwards. So each folder is made 0700 and named
after the process that owns it (pid and start time); the next run in the same work folder
removes the folders of processes that are gone (:func:`sweep`).

The work folder itself (``.folio/work`` under the current folder by default) is checked on
every use like folio's state folders (:func:`ensure_root`): another user who made it
first in a shared folder, or who may write to a folder above it, could swap a document's
scratch folder for one of theirs and read the renders of a password-protected PDF.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import time
from pathlib import Path

from folio.process_files import pid_alive, proc_start_time
from folio.security.private_dir import check_path_to, ensure_private_dir

__all__ = ["ensure_root", "make", "sweep"]

log = logging.getLogger(__name__)


def ensure_root(root: Path) -> Path:
    """The work folder, made 0700 if absent, then checked: this user's, not a link, no
    folder above it another user can change (:func:`folio.security.private_dir.check_path_to`).
    One folio made before it was checked (0755: readable, never writable by others) is
    closed to them (0700).

    Raises:
        InsecureLocationError: it, or a folder above it, is not this user's alone.
    """
    root = Path(root).absolute()
    check_path_to(root)
    try:
        root.mkdir(parents=True, mode=0o700)
    except FileExistsError:
        info = os.lstat(root)
        if (stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
                and not info.st_mode & 0o022 and info.st_mode & 0o077):
            os.chmod(root, 0o700, follow_symlinks=False)
    return ensure_private_dir(root)


def make(root: Path) -> Path:
    """A new private folder under ``root`` (checked on every call: :func:`ensure_root`)
    for one document."""
    pid = os.getpid()
    path = ensure_root(root) / f"{pid}.{proc_start_time(pid) or 0}-{time.time_ns()}-{threading.get_ident()}"
    path.mkdir(mode=0o700)
    return path


def sweep(root: Path) -> int:
    """Remove the folders under ``root`` whose owning process is gone; returns how many.
    Folders of live processes (another run in the same work folder) stay."""
    removed = 0
    if not os.path.lexists(root):
        return 0
    ensure_root(root)  # nothing is removed under a folder another user controls
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
