"""Background CPU work that yields to the work a run is waiting on.

Why: on a GPU host folio's embeddings (about 0.15 core-seconds a chunk, some 2,000 chunks
in a 1,200-page run) came in bursts that took 12-15 of the 16 cores
(`bench/host_cpu.py` beside `bench/gpu_user_path_device.sh profile`), while the vLLM server
that folio feeds needs a few cores of its own to decode images and schedule the GPU. Capping
the embedding to fewer threads would also slow it when the cores are idle (the end of a
run, a CPU-only run). A higher nice value on the threads that do it costs nothing when
cores are free and lets the kernel give them to everything else when they are not.

Linux schedules threads individually, so ``setpriority`` on a thread id lowers that thread
only; elsewhere this is a no-op.

Nice values only order threads of one scheduler autogroup. Where autogroups are on (most
distributions: ``/proc/sys/kernel/sched_autogroup_enabled``), each session is one group and
groups share a busy CPU equally, whatever their threads' nice values. A process that must
yield to another session (the page workers to a co-located vLLM server's front end) runs
in a session of its own and lowers that session's autogroup (:func:`lower_this_session`).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)


def lower_this_thread(nice: int) -> None:
    """Raise the calling thread's nice value by ``nice`` (0: leave it). Never raises:
    a platform or sandbox that refuses only loses the courtesy."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + nice))
    except OSError as err:
        log.debug("thread priority left as it was: %s", err)


def lower_this_process(nice: int) -> None:
    """Raise the calling process's nice value to at least ``nice`` (0: leave it); children
    forked or started after inherit it. Never raises, as :func:`lower_this_thread`."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) < nice:
            os.setpriority(os.PRIO_PROCESS, 0, min(19, nice))
    except OSError as err:
        log.debug("process priority left as it was: %s", err)


def lower_this_session(nice: int) -> None:
    """Set the scheduler autogroup of the calling process's session to ``nice`` (0: leave
    it). Only for a process that leads a session of its own: the autogroup is the whole
    session's, a login shell's included. Raising a nice value needs no privilege; without
    autogroups (the file is absent, or writes to it are refused) this is a no-op."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write(str(min(19, nice)))
    except OSError as err:
        log.debug("autogroup priority left as it was: %s", err)


def background_pool(workers: int, *, name: str, nice: int) -> ThreadPoolExecutor:
    """A thread pool whose threads run at ``nice`` above the process's priority."""
    return ThreadPoolExecutor(max(1, workers), thread_name_prefix=name,
                              initializer=lower_this_thread, initargs=(nice,))
