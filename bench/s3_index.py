"""A small S3-compatible server for benchmarks that list millions of keys.

    .venv/bin/python -m bench.s3_index PORT      # serve on 127.0.0.1:PORT

Why not moto (``bench/s3_like.py``) at 1M objects: moto 5.2 keeps each object as a
``FakeKey`` (a spooled temp file, a lock, a dozen attributes): about 4 KB a key, so the
2.2M keys of a 1M-object sweep (sources and their done records) took 7.9 GB, and it
renders a listing page through its generic response serializer, which parses and
re-formats each key's timestamp with dateutil: 94% of moto's time for a page of 1000,
more than the listing client itself spends (``bench/results/sweep_plan.json``,
``where_time_goes``). Neither is a cost of S3, whose listing is an index seek.

This server keeps each object as ``(body, etag, mtime)`` in a dict plus one sorted list of
the bucket's keys, so a ListObjectsV2 page is a binary search and 1000 steps, and a key
costs a few hundred bytes. It answers what S3 answers, in S3's XML, for the subset a
benchmark needs, and 501 NotImplemented for anything else so that a misuse is loud:

- CreateBucket, HeadBucket; PutObject (``If-None-Match: *`` and ``If-Match``),
  GetObject (whole objects), HeadObject, DeleteObject;
- ListObjectsV2 with ``prefix``, ``continuation-token``, ``start-after``, ``max-keys``
  and ``encoding-type=url`` (no ``delimiter``);
- ``POST /_bench/fill`` as in ``bench/s3_like.py``: ``{"bucket", "objects": [[key,
  text], ...]}`` puts the objects without a request each (creation is not measured).

No authentication is checked, as moto checks none; HTTP/1.1 keep-alive, as S3.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.s3_server import S3Server

__all__ = ["Bucket", "serve", "start_s3_index_server"]

_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_MAX_KEYS = 1000
_Object = tuple[bytes, str, float]  # body, ETag (quoted), mtime (epoch seconds)


def _etag(body: bytes) -> str:
    return '"' + hashlib.md5(body, usedforsecurity=False).hexdigest() + '"'


def _iso(mtime: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mtime))


class Bucket:
    """The objects of one bucket and their keys in S3's order (code point order equals
    UTF-8 byte order). New keys wait in ``_pending`` and are merged in once, before the
    next listing: a bulk fill costs one sort, not an insertion each."""

    def __init__(self) -> None:
        self.objects: dict[str, _Object] = {}
        self._sorted: list[str] = []
        self._pending: list[str] = []
        self.lock = threading.Lock()

    def put(self, key: str, body: bytes, *, if_none_match: bool = False,
            if_match: str | None = None) -> str | None:  # fmt: skip
        """Store ``body``; its ETag, or None when a condition failed (S3's 412)."""
        with self.lock:
            held = self.objects.get(key)
            if (if_none_match and held is not None) or (
                    if_match is not None and (held is None or held[1] != if_match)):  # fmt: skip
                return None
            if held is None:
                self._pending.append(key)
            etag = _etag(body)
            self.objects[key] = (body, etag, time.time())
            return etag

    def delete(self, key: str) -> None:
        with self.lock:
            if self.objects.pop(key, None) is None:
                return
            at = bisect.bisect_left(self._sorted, key)
            if at < len(self._sorted) and self._sorted[at] == key:
                del self._sorted[at]
            else:
                self._pending.remove(key)

    def page(self, prefix: str, after: str, max_keys: int) -> tuple[list[tuple[str, _Object]], bool]:  # fmt: skip
        """Up to ``max_keys`` objects under ``prefix`` with keys after ``after``, and
        whether more follow: one binary search, then one step per key returned."""
        with self.lock:
            if self._pending:  # two sorted runs: Timsort merges them in one pass
                self._sorted.extend(sorted(self._pending))
                self._sorted.sort()
                self._pending.clear()
            names = self._sorted
            at = max(bisect.bisect_right(names, after) if after else 0,
                     bisect.bisect_left(names, prefix))  # fmt: skip
            stop = min(len(names), at + max_keys)
            found = [(k, self.objects[k]) for k in names[at:stop] if k.startswith(prefix)]
            more = (len(found) == max_keys and stop < len(names)
                    and names[stop].startswith(prefix))  # fmt: skip
            return found, more


class _Store:
    def __init__(self) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.lock = threading.Lock()

    def create(self, name: str) -> bool:
        with self.lock:
            if name in self.buckets:
                return False
            self.buckets[name] = Bucket()
            return True


def _list_xml(bucket: str, query: dict[str, str], store: _Store) -> tuple[int, bytes]:
    found = store.buckets.get(bucket)
    if found is None:
        return _error(404, "NoSuchBucket", bucket)
    if query.get("delimiter") or query.get("list-type") != "2":
        return _error(501, "NotImplemented", "only ListObjectsV2 without a delimiter")
    prefix, token = query.get("prefix", ""), query.get("continuation-token")
    after = urllib.parse.unquote(token) if token else query.get("start-after", "")
    max_keys = min(int(query.get("max-keys", _MAX_KEYS)), _MAX_KEYS)
    url = query.get("encoding-type") == "url"

    def name(key: str) -> str:
        return urllib.parse.quote(key, safe="/~") if url else escape(key)

    objects, more = found.page(prefix, after, max_keys)
    parts = [f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_NS}">',
             f"<Name>{escape(bucket)}</Name><Prefix>{name(prefix)}</Prefix>",
             f"<KeyCount>{len(objects)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>",
             f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>"]  # fmt: skip
    if url:
        parts.append("<EncodingType>url</EncodingType>")
    if token:
        parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
    if more:  # opaque to the client, as S3's: here the last key returned
        parts.append(f"<NextContinuationToken>{urllib.parse.quote(objects[-1][0], safe='')}"
                     "</NextContinuationToken>")  # fmt: skip
    for key, (body, etag, mtime) in objects:
        parts.append(f"<Contents><Key>{name(key)}</Key><LastModified>{_iso(mtime)}</LastModified>"
                     f"<ETag>{escape(etag)}</ETag><Size>{len(body)}</Size>"
                     "<StorageClass>STANDARD</StorageClass></Contents>")  # fmt: skip
    parts.append("</ListBucketResult>")
    return 200, "".join(parts).encode()


def _error(status: int, code: str, detail: str) -> tuple[int, bytes]:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{escape(detail)}</Message></Error>")  # fmt: skip
    return status, body.encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as S3
    store: _Store  # set on the subclass ``serve`` makes

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              *, head: bool = False) -> None:  # fmt: skip
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if "Content-Length" not in (headers or {}):
            self.send_header("Content-Length", str(len(body)))
        if body and "Content-Type" not in (headers or {}):
            self.send_header("Content-Type", "application/xml")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _target(self) -> tuple[str, str, dict[str, str]]:
        parts = urllib.parse.urlsplit(self.path)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        query = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        return urllib.parse.unquote(bucket), urllib.parse.unquote(key), query

    def _body(self) -> bytes | None:
        if self.headers.get("Transfer-Encoding") or "aws-chunked" in self.headers.get(
                "Content-Encoding", ""):  # fmt: skip
            return None
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_PUT(self) -> None:
        bucket, key, query = self._target()
        body = self._body()
        if body is None or query:
            self._send(*_error(501, "NotImplemented", "chunked bodies, PUT subresources"))
        elif not key:
            created = self.store.create(bucket)
            self._send(*(_error(409, "BucketAlreadyOwnedByYou", bucket) if not created
                         else (200, b"")))  # fmt: skip
        elif (found := self.store.buckets.get(bucket)) is None:
            self._send(*_error(404, "NoSuchBucket", bucket))
        elif (match := self.headers.get("If-Match")) is not None and key not in found.objects:
            self._send(*_error(404, "NoSuchKey", key))
        else:
            etag = found.put(key, body, if_none_match=self.headers.get("If-None-Match") == "*",
                             if_match=match)  # fmt: skip
            if etag is None:
                self._send(*_error(412, "PreconditionFailed", key))
            else:
                self._send(200, b"", {"ETag": etag})

    def _get(self, *, head: bool) -> None:
        bucket, key, query = self._target()
        found = self.store.buckets.get(bucket)
        if not key and head:
            self._send(200 if found else 404, head=True)
        elif not key:
            self._send(*_list_xml(bucket, query, self.store))
        elif found is None:
            self._send(*_error(404, "NoSuchBucket", bucket), head=head)
        elif self.headers.get("Range") or query:
            self._send(*_error(501, "NotImplemented", "ranges, GET subresources"), head=head)
        elif (obj := found.objects.get(key)) is None:
            self._send(*_error(404, "NoSuchKey", key), head=head)
        else:
            body, etag, mtime = obj
            self._send(200, body, {"ETag": etag, "Content-Length": str(len(body)),
                                   "Content-Type": "application/octet-stream",
                                   "Last-Modified": time.strftime(
                                       "%a, %d %b %Y %H:%M:%S GMT", time.gmtime(mtime))},
                       head=head)  # fmt: skip

    def do_GET(self) -> None:
        self._get(head=False)

    def do_HEAD(self) -> None:
        self._get(head=True)

    def do_DELETE(self) -> None:
        bucket, key, _ = self._target()
        found = self.store.buckets.get(bucket)
        if found is None:
            self._send(*_error(404, "NoSuchBucket", bucket))
        elif not key:
            self._send(*_error(501, "NotImplemented", "DeleteBucket"))
        else:
            found.delete(key)
            self._send(204)

    def do_POST(self) -> None:
        body = self._body()
        if self.path != "/_bench/fill" or body is None:
            self._send(*_error(501, "NotImplemented", "POST other than /_bench/fill"))
            return
        fill = json.loads(body)
        found = self.store.buckets[fill["bucket"]]
        for key, text in fill["objects"]:
            found.put(key, text.encode())
        self._send(200, str(len(fill["objects"])).encode(), {"Content-Type": "text/plain"})


def serve(port: int) -> None:
    """Serve until killed, on 127.0.0.1."""
    handler = type("Handler", (_Handler,), {"store": _Store()})
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    server.serve_forever()


def start_s3_index_server() -> S3Server:
    """Start this server on a free port (:func:`tests.s3_server.start_s3_server`)."""
    from tests.s3_server import start_s3_server

    return start_s3_server(lambda port: [sys.executable, "-m", "bench.s3_index", str(port)],
                           probe="/", what="s3_index server")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
