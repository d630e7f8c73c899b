"""An HTTP proxy on 127.0.0.1 in front of the test S3 server that answers some requests
with S3's own throttling error (503 SlowDown), or, while it is down, with S3's own outage
error (503 ServiceUnavailable), instead of forwarding them.

Why a proxy and not a mock: boto3 and LanceDB's Rust object_store both talk HTTP to it,
so their real retry logic meets a real 503 with S3's XML body, as from AWS under load.

    proxy = FaultProxy(s3_server.endpoint_url).start()
    proxy.fail_every = 2          # every second request answered 503 ...
    proxy.budget = 20             # ... until 20 have been answered so
    proxy.down = True             # or every matching request 503 ServiceUnavailable, until
                                  # set back to False

Why two codes: they are what S3 answers to each case, and clients back off differently.
botocore's standard retries wait ``rand() * 2**i`` seconds after a throttling error and a
twentieth of that after another 5xx, so a client meeting an outage gives up after its
attempts within a second or so, and one meeting SlowDown after several seconds (test_faults'
outage test spent 15 of its 30 s in those waits while it answered SlowDown).
"""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self
from urllib.parse import urlsplit

SLOW_DOWN = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             b"<Message>Please reduce your request rate.</Message></Error>")
UNAVAILABLE = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ServiceUnavailable</Code>'
               b"<Message>Service is unable to handle request.</Message></Error>")
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}


class FaultProxy:
    """Forwards to ``upstream``; ``methods`` (None: all) on paths containing ``match``
    are the ones that may be refused."""

    def __init__(self, upstream: str, *, match: str = "", methods: set[str] | None = None) -> None:
        parts = urlsplit(upstream)
        self.upstream_host, self.upstream_port = parts.hostname or "127.0.0.1", parts.port or 80
        self.match, self.methods = match, methods
        self.fail_every = 0  # 0: refuse nothing by count
        self.budget = 0  # how many more requests may be refused by count
        self.down = False  # refuse every matching request (ServiceUnavailable, not SlowDown)
        self.seen = 0  # matching requests
        self.injected = 0  # requests answered 503
        self.forwarded = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _refuse(self, method: str, path: str) -> bool:
        if self.match not in path or (self.methods is not None and method not in self.methods):
            return False
        with self._lock:
            self.seen += 1
            refuse = self.down or (self.fail_every > 0 and self.budget > 0
                                   and self.seen % self.fail_every == 0)
            if refuse:
                self.injected += 1
                if not self.down:
                    self.budget -= 1
            else:
                self.forwarded += 1
            return refuse

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                return

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if proxy._refuse(self.command, self.path):
                    error = UNAVAILABLE if proxy.down else SLOW_DOWN
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(error)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(error)
                    return
                conn = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port,
                                                  timeout=60)
                try:
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                    self.send_response(resp.status, resp.reason)
                    # a HEAD's Content-Length is the object's size, not its empty body's
                    keep_length = self.command == "HEAD"
                    for key, value in resp.getheaders():
                        if key.lower() not in _HOP and (keep_length
                                                        or key.lower() != "content-length"):
                            self.send_header(key, value)
                    if not keep_length:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(data)
                finally:
                    conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _relay

        return Handler
