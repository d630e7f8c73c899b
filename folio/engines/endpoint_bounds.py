"""How many requests and connections an OpenAI-protocol endpoint gets from this process.

Every engine that talks to one endpoint shares one in-flight bound (two bounds for one
server would make neither true), and the connections are spread over several HTTP
clients, because one client's pool costs more GIL per request the more connections it
holds. Split from :mod:`folio.engines.openai_engine`, which keeps the requests themselves.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)

__all__ = ["CONNECTIONS_PER_CLIENT", "client_count", "endpoint_semaphore"]


#: connections one ``httpx.Client`` holds at most before the engine opens another: httpcore's
#: pool walks every connection it holds on each request's start and end (polling the
#: idle ones' sockets), so its GIL cost a request grows with the connections, and a GPU
#: run keeps hundreds open (bench/http_pool.py measures it)
CONNECTIONS_PER_CLIENT = 32


def client_count(connections: int) -> int:
    """HTTP clients for ``connections`` requests at once, each holding about
    :data:`CONNECTIONS_PER_CLIENT` of them."""
    return max(1, -(-connections // CONNECTIONS_PER_CLIENT))


_SEMAPHORES: dict[str, threading.BoundedSemaphore] = {}
_SEMAPHORE_LIMITS: dict[str, int] = {}
_SEMAPHORE_LOCK = threading.Lock()


def endpoint_semaphore(base_url: str, limit: int) -> threading.BoundedSemaphore:
    """The in-flight bound of ``base_url``, shared by every engine in this process.

    The first caller sets the limit; a later, different limit is ignored with a
    warning (two limits for one server would make neither true).
    """
    key = base_url.rstrip("/")
    with _SEMAPHORE_LOCK:
        if key not in _SEMAPHORES:
            _SEMAPHORES[key] = threading.BoundedSemaphore(limit)
            _SEMAPHORE_LIMITS[key] = limit
        elif _SEMAPHORE_LIMITS[key] != limit:
            log.warning("in-flight limit for %s stays %d (asked %d)", key, _SEMAPHORE_LIMITS[key], limit)
        return _SEMAPHORES[key]
