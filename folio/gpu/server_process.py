"""Process plumbing of a supervised server (:class:`folio.gpu.vllm_server.VLLMServer`):
the parent-death launcher, whether the process is gone, signalling its group, its log.

Why a module of its own: these are the operating system's side of a server's life,
apart from the supervisor's states and probes.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
from pathlib import Path
from typing import IO

__all__ = ["LAUNCHER", "gone", "kill_group", "open_log", "signal_group"]

log = logging.getLogger("folio.gpu.vllm_server")

# Sets the parent-death signal, checks the parent did not die before that, then execs.
LAUNCHER = (
    "import ctypes,os,signal,sys\n"
    "try:\n ctypes.CDLL(None,use_errno=True).prctl(1,int(signal.SIGKILL))\n"
    "except Exception:\n pass\n"
    "if os.getppid()!=int(sys.argv[1]):\n sys.exit(70)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])\n"
)


def open_log(path: Path) -> IO[bytes]:
    """The server's log, appended to, created 0600, never through a link planted under its
    name (another user may write where the log lives)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    return os.fdopen(fd, "ab")


def gone(proc: subprocess.Popen[bytes]) -> bool:
    """Exited (or a zombie not yet reaped)? ``Popen.poll`` alone can answer None while
    another thread holds its wait lock."""
    if proc.poll() is not None:
        return True
    try:
        with open(f"/proc/{proc.pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except (OSError, IndexError):
        return False


def signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_group(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """SIGTERM the process group ``proc`` leads, wait, SIGKILL the group."""
    pgid = proc.pid  # session leader: its pid is the group id
    if proc.poll() is None:
        signal_group(pgid, signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("vLLM server pid %d ignored SIGTERM for %.0f s: SIGKILL", pgid, timeout_s)
    signal_group(pgid, signal.SIGKILL)  # stragglers of the group, if any
    try:
        proc.wait(timeout=10.0)
    except subprocess.TimeoutExpired:
        log.error("vLLM server pid %d survived SIGKILL", pgid)
