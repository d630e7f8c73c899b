"""What SIGTERM does to a run: its report written at once, and an end within seconds.

Why: SIGTERM (``docker stop``, an evicted pod, ``kill``) is turned into an exception in the
main thread (:class:`folio.cli.Terminated`), but a run's body may be on another thread or
deep in Prefect's engine when it lands, and the orderly stop then waits for whatever that
thread is doing: a run stopped so wrote no ``--report`` and went on for minutes. So the
signal handler first runs the hooks of the run in progress (the ingest flow registers the
one that writes its report), then gives the orderly stop :data:`GRACE_S` seconds before
the process ends itself with the signal's exit code.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

__all__ = ["GRACE_S", "add", "end_after_sigterm", "end_within", "on_sigterm_first", "remove",
           "run_stop_hooks"]

log = logging.getLogger(__name__)

#: seconds an orderly stop may take after SIGTERM before the process ends itself
GRACE_S = 10.0

#: ``hook(how)``, ``how`` being "SIGTERM" or "SIGINT"
StopHook = Callable[[str], None]

_hooks: list[StopHook] = []
_lock = threading.Lock()


def add(hook: StopHook) -> None:
    """Run ``hook`` if the process is stopped before :func:`remove`."""
    with _lock:
        _hooks.append(hook)


def remove(hook: StopHook) -> None:
    with _lock:
        if hook in _hooks:
            _hooks.remove(hook)


def run_stop_hooks(how: str) -> None:
    """Every registered hook, once each (a hook that fails is logged: the stop goes on)."""
    with _lock:
        hooks = list(_hooks)
        _hooks.clear()
    for hook in hooks:
        try:
            hook(how)
        except Exception:
            log.exception("a stop hook failed")


def end_within(seconds: float, code: int, message: str) -> None:
    """End the process with ``code`` after ``seconds`` unless it has ended by then."""
    def end() -> None:
        print(message, file=sys.stderr, flush=True)
        os._exit(code)

    timer = threading.Timer(seconds, end)
    timer.daemon = True
    timer.start()


_sigterm_bounded = threading.Event()


def end_after_sigterm() -> None:
    """The bound on a run SIGTERM stopped: :data:`GRACE_S` for the orderly stop, then 143.
    Once a process: the handlers that meet one SIGTERM (folio's own ahead of Prefect's,
    the CLI's, the flow's) all call it, and one timer is the bound."""
    with _lock:
        if _sigterm_bounded.is_set():
            return
        _sigterm_bounded.set()
    end_within(GRACE_S, 143, f"folio: stopped by SIGTERM (the orderly stop took over "
                             f"{GRACE_S:g} s: cut short); a rerun resumes with the documents "
                             "not yet done")


def on_sigterm_first() -> Callable[[], None]:
    """Run the stop hooks and bound the stop (:func:`end_after_sigterm`) on SIGTERM before
    the handler in place now (Prefect's flow engine puts its own in place for a flow run,
    and the exception it raises reaches folio's code only after every ``finally`` below
    it, a thread join that waits for a hung request among them). Returns what puts the
    handler back; does nothing off the main thread, where signals cannot be handled."""
    try:
        previous: Any = signal.getsignal(signal.SIGTERM)

        def handler(signum: int, frame: FrameType | None) -> None:
            run_stop_hooks("SIGTERM")
            end_after_sigterm()
            if callable(previous):
                previous(signum, frame)
            else:
                raise SystemExit(143)

        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        return lambda: None

    def restore() -> None:
        try:
            signal.signal(signal.SIGTERM, previous)
        except (ValueError, TypeError):
            pass

    return restore
