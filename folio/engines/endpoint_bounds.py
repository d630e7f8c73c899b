"""How many requests and connections an OpenAI-protocol endpoint gets from this process.

Every engine that talks to one endpoint shares one in-flight bound (two bounds for one
server would make neither true), and the connections are spread over several HTTP
clients, because one client's pool costs more GIL per request the more connections it
holds. Split from :mod:`folio.engines.openai_engine`, which keeps the requests themselves.
"""

from __future__ import annotations

import logging
import threading
import weakref

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


class _EndpointBound(threading.BoundedSemaphore):
    """A bound that remembers its limit (to warn when another caller asks for a different one)."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


#: weak values: a URL's bound lives while some engine holds it. A later server on the same
#: URL (a restarted server, a port the OS hands out again) starts with its own limit
#: instead of inheriting one set for a server that is gone.
_SEMAPHORES: weakref.WeakValueDictionary[str, _EndpointBound] = weakref.WeakValueDictionary()
_SEMAPHORE_LOCK = threading.Lock()


def endpoint_semaphore(base_url: str, limit: int) -> threading.BoundedSemaphore:
    """The in-flight bound of ``base_url``, shared by every engine in this process that
    holds it.

    The first caller sets the limit; a later, different limit is ignored with a
    warning (two limits for one server would make neither true).
    """
    key = base_url.rstrip("/")
    with _SEMAPHORE_LOCK:
        bound = _SEMAPHORES.get(key)
        if bound is None:
            bound = _SEMAPHORES[key] = _EndpointBound(limit)
        elif bound.limit != limit:
            log.warning("in-flight limit for %s stays %d (asked %d)", key, bound.limit, limit)
        return bound
