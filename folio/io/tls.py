"""One TLS context per process for every HTTP client folio makes.

Why: ``httpx.Client()`` builds a fresh SSL context each time and loads the CA bundle into
it (about 25 ms of CPU, the GIL held throughout). A GPU run makes a client per 32
connections when its first page arrives, and a server probe makes one per probe, so
at a run's start the page threads waited a quarter of a second on CA bundles. The
context is built the way httpx builds its own (certifi, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` from the environment), once, and then shared (an ``SSLContext`` is safe
to share between clients and threads).
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def ssl_context() -> ssl.SSLContext:
    """The process's TLS context for HTTP clients (verification on, as httpx's default)."""
    import httpx

    return httpx.create_ssl_context(trust_env=True)
