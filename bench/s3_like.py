"""moto's S3 server with S3's costs where the benchmarks meet moto's own.

    .venv/bin/python -m bench.s3_like PORT      # serve on 127.0.0.1:PORT

moto 5.2 is a functional double of S3, not a performance one, in three places a benchmark
at 1M rows or keys hits; this server changes exactly those and is moto otherwise:

- **Ranged GETs** read the whole object (``FakeKey.value``) and slice it, so one ranged
  read of a 1.8 GB LanceDB data file costs seconds. A LanceDB search fetches its 10
  result rows with two such reads: at 100k rows (one 180 MB data file) that was 700 ms of
  a 710 ms search, while the ANN search itself took 3 ms (``analyze_plan``). Here a range
  reads only the range, as S3, MinIO and R2 do.
- **Every request** costs about 3.5 ms of moto's Python, and one process runs one
  request's Python at a time, so reads sent together come back one after another; S3
  serves them side by side. A plain ranged GET (the reads of LanceDB's searches and
  scans) is answered here from the key's bytes, without that handling (``_ranged_get_app``).
- **ListObjectsV2** collects and sorts every key of the bucket for each page of 1000, so
  listing 1M keys is 1000 sorts of 1M keys. Here a page is a binary search into a sorted
  list of the bucket's keys (sorted again only after a write), as S3's is an index seek.

``BENCH_S3_LOG=PATH`` logs every request (start, end, method, path, range);
``BENCH_S3_MOTO_RANGES=1`` leaves ranged GETs to moto (bench/search_requests.py compares
the two). Plus one
endpoint only benchmarks use: ``POST /_bench/fill`` with a JSON body
``{"bucket": ..., "objects": [[key, text], ...]}`` puts the objects through moto's own
``put_object`` in the server process, without an HTTP request each, to create 1M
objects in minutes rather than hours (the measured code never calls it).
``start_s3_like_server`` starts it as ``tests.s3_server.start_s3_server`` does moto.
"""

from __future__ import annotations

import contextvars
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.s3_server import S3Server

__all__ = ["serve", "start_s3_like_server"]

_RANGED: contextvars.ContextVar[bool] = contextvars.ContextVar("ranged", default=False)


class _RangedBody:
    """An object's body that reads only the slice asked for (moto's range handler takes
    ``len`` and one slice of it)."""

    def __init__(self, key: Any) -> None:
        self._key = key

    def __len__(self) -> int:
        return int(self._key.size)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        with self._key.lock:
            self._key._value_buffer.seek(start)
            return bytes(self._key._value_buffer.read(max(0, stop - start)))

    def __iter__(self) -> Any:  # a range moto serves whole (say, several ranges)
        yield self[0 : len(self)]


def _patch() -> None:
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    whole: Any = vars(FakeKey)["value"]  # the property object

    def value(key: Any) -> Any:
        return _RangedBody(key) if _RANGED.get() else whole.fget(key)

    FakeKey.value = property(value, whole.fset)  # type: ignore[method-assign,assignment,unused-ignore]
    original = S3Response.get_object

    def get_object(self: Any) -> Any:
        ranged = bool(self.headers.get("range")) and not self._get_int_param("partNumber")
        token = _RANGED.set(ranged)
        try:
            return original(self)
        finally:
            _RANGED.reset(token)

    S3Response.get_object = get_object  # type: ignore[method-assign]
    _patch_listing()


def _patch_listing() -> None:
    import bisect

    from moto.s3 import utils
    from moto.s3.models import FakeDeleteMarker, FakeTableStorageBucket, S3Backend

    generation = [0]  # bumped by every write or delete of any key
    store = utils._VersionedKeyStore
    for name in ("__setitem__", "__delitem__", "pop", "setlist"):
        method = getattr(store, name)

        def bumped(self: Any, *args: Any, _method: Any = method, **kwargs: Any) -> Any:
            generation[0] += 1
            return _method(self, *args, **kwargs)

        setattr(store, name, bumped)
    sorted_names: dict[int, tuple[int, list[str]]] = {}
    original = S3Backend.list_objects_v2

    def list_objects_v2(self: Any, bucket: Any, prefix: str | None, delimiter: str | None,
                        continuation_token: str | None, start_after: str | None,
                        max_keys: int) -> Any:  # fmt: skip
        if delimiter or isinstance(bucket, FakeTableStorageBucket):
            return original(self, bucket, prefix, delimiter, continuation_token, start_after,
                            max_keys)  # fmt: skip
        cached = sorted_names.get(id(bucket.keys))
        if cached is None or cached[0] != generation[0]:
            cached = (generation[0], sorted(bucket.keys.keys()))
            sorted_names[id(bucket.keys)] = cached
        names = cached[1]
        after = self._pagination_tokens.get(continuation_token) if continuation_token else start_after
        at = max(bisect.bisect_right(names, after) if after else 0,
                 bisect.bisect_left(names, prefix or ""))  # fmt: skip
        page: list[Any] = []
        while at < len(names) and len(page) <= max_keys:
            name = names[at]
            at += 1
            if prefix and not name.startswith(prefix):
                break
            key = bucket.keys.get(name)
            if key is not None and not isinstance(key, FakeDeleteMarker):
                page.append(key)
        return self._truncate_result(page, max_keys)

    S3Backend.list_objects_v2 = list_objects_v2  # type: ignore[method-assign]


def _fill_app(app: Any) -> Any:
    """``app`` with the ``/_bench/fill`` endpoint in front (see the module doc)."""
    import json

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("PATH_INFO") != "/_bench/fill" or environ.get("REQUEST_METHOD") != "POST":
            return app(environ, start_response)
        size = int(environ.get("CONTENT_LENGTH") or 0)
        body = json.loads(environ["wsgi.input"].read(size))
        backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
        for key, text in body["objects"]:
            backend.put_object(body["bucket"], key, text.encode())
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [str(len(body["objects"])).encode()]

    return wrapped


_RANGE = re.compile(r"bytes=(\d+)-(\d*)")


def _ranged_get_app(app: Any) -> Any:
    """``app`` with plain ranged GETs (one range, no query, no condition) answered from the
    key's bytes directly; anything else, or a key it does not find, goes to moto.

    Why: moto spends about 3.5 ms of Python on each GET (routing across its backends,
    request parsing, response headers), and one server process runs one request's Python
    at a time. LanceDB's search at 1M rows sends about 18 ranged reads over 13 ms; moto
    held each one 25 ms (8 at the server at once, waiting their turn) and answered the
    last 54 ms after the first was sent, and the search took 78 ms p50; with this path
    each read takes 0.35 ms and the search 34 ms (bench/search_requests.py, side by side).
    S3 serves such reads side by side. Here a read costs what finding the key and copying
    the range cost.
    """
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import FakeKey, s3_backends

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        wanted = _RANGE.fullmatch(environ.get("HTTP_RANGE") or "")
        if (environ.get("REQUEST_METHOD") != "GET" or wanted is None
                or environ.get("QUERY_STRING")
                or any(name.startswith(("HTTP_IF_", "HTTP_X_AMZ_SERVER_SIDE_ENCRYPTION_CUSTOMER",
                                         "HTTP_X_AMZ_CHECKSUM")) for name in environ)):
            return app(environ, start_response)
        bucket_name, _, key_name = environ.get("PATH_INFO", "").lstrip("/").partition("/")
        bucket = s3_backends[DEFAULT_ACCOUNT_ID]["aws"].buckets.get(bucket_name)
        key = bucket.keys.get(key_name) if bucket is not None and key_name else None
        size = key.size if isinstance(key, FakeKey) else 0
        begin = int(wanted[1])
        end = min(int(wanted[2]) if wanted[2] else size - 1, size - 1)
        if not isinstance(key, FakeKey) or begin > end:
            return app(environ, start_response)  # moto's own answer (404, 416, ...)
        with key.lock:
            key._value_buffer.seek(begin)
            data = bytes(key._value_buffer.read(end - begin + 1))
        headers = [("Content-Type", "binary/octet-stream"), ("Content-Length", str(len(data))),
                   ("Content-Range", f"bytes {begin}-{end}/{size}"), ("ETag", key.etag),
                   ("Last-Modified", key.last_modified_RFC1123), ("Accept-Ranges", "bytes")]
        if key.version_id != "null":
            headers.append(("x-amz-version-id", str(key.version_id)))
        start_response("206 Partial Content", headers)
        return [data]

    return wrapped


def _logging_app(app: Any, path: str) -> Any:
    """``app`` writing one line per request to ``path`` (``BENCH_S3_LOG``): start and end
    (monotonic seconds), method, path, Range; how many requests a measured operation makes
    and whether they overlap."""
    import threading
    import time

    lock = threading.Lock()
    out = open(path, "a", buffering=1)

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        started = time.monotonic()
        try:
            return list(app(environ, start_response))
        finally:
            line = (f"{started:.6f} {time.monotonic():.6f} {environ.get('REQUEST_METHOD')} "
                    f"{environ.get('PATH_INFO')} {environ.get('HTTP_RANGE', '-')}\n")
            with lock:
                out.write(line)

    return wrapped


def serve(port: int) -> None:
    """moto's standalone server (as ``python -m moto.server``) with the changes above."""
    _patch()
    import os

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    app = _fill_app(DomainDispatcherApplication(create_backend_app))
    if os.environ.get("BENCH_S3_MOTO_RANGES") != "1":  # 1: moto answers them (a comparison)
        app = _ranged_get_app(app)
    if os.environ.get("BENCH_S3_LOG"):
        app = _logging_app(app, os.environ["BENCH_S3_LOG"])
    run_simple("127.0.0.1", port, app, threaded=True, request_handler=MotoRequestHandler)


def start_s3_like_server() -> S3Server:
    """Start this server on a free port (:func:`tests.s3_server.start_s3_server`)."""
    from tests.s3_server import start_s3_server

    return start_s3_server(lambda port: [sys.executable, "-m", "bench.s3_like", str(port)],
                           probe="/moto-api/", what="s3_like server")


if __name__ == "__main__":
    serve(int(sys.argv[1]))
