"""Processes and state files shared between processes: is a pid still the process we
knew, an exclusive lock the kernel drops when its holder dies, atomic writes. Used by the
shared vLLM server and the local Prefect server."""

from __future__ import annotations

import fcntl
import os
import random
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from folio.errors import TransientError

#: a lock is held for milliseconds; a minute means something is wrong
LOCK_TIMEOUT_S = 60.0


def proc_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22),
    which tells a live process from a later one that reused its pid; None off Linux."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def pid_alive(pid: int | None, start: int | None = None) -> bool:
    """Running (not a zombie) and, when ``start`` is given, the same process as then."""
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    if fields and fields[0] in ("Z", "X"):
        return False
    return start is None or len(fields) < 20 or int(fields[19]) == start


def pid_owned(pid: int) -> bool:
    """Whether ``pid`` runs as this process's user: a pid in a state file another user
    could have written is never taken for one of ours (docs/security.md)."""
    try:
        return os.stat(f"/proc/{pid}").st_uid == os.geteuid()
    except OSError:
        return False


@contextmanager
def flocked(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Exclusive ``flock`` on ``path`` (a fresh open file description, so threads of one
    process exclude each other too); the kernel drops it if the holder dies."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TransientError(f"{path} stayed locked for {timeout_s:.0f} s") from None
                time.sleep(random.uniform(0.002, 0.01))
        yield
    finally:
        os.close(fd)  # releases the lock


def write_atomic(path: Path, text: str, *, mode: int = 0o666) -> None:
    """Write then ``os.replace``: readers see the old file or the new one, never half.

    The temporary file beside ``path`` has a random name and is created exclusively,
    never through a link (``O_EXCL | O_NOFOLLOW``), with ``mode`` (less the umask): a
    predictable name (``.{name}.{pid}.tmp``) let another user who may write to the
    folder plant a link there and have folio overwrite a file of the user's (issue 58
    finding 7). A link at ``path`` itself is replaced, never followed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:  # a name another writer drew (or planted): draw again
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
