"""``bench/s3_index.py``, the benchmarks' S3 server for millions of keys: folio's S3 code
(boto3 with folio's client settings) reads from it what it reads from S3 and moto, so a
benchmark on it measures folio and not the server."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from bench.s3_index import Bucket, start_s3_index_server
from folio.io import s3 as s3io

ODD = ["in/a b.pdf", "in/a+b.pdf", "in/é/ü.pdf", "in/x&y<z>.pdf", "in/~t.pdf", "in2/z.pdf"]


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start_s3_index_server() as started:
        yield started


def test_listing_pages_in_key_order_with_odd_names(server: Any) -> None:
    bucket = server.create_bucket()
    etags = {}
    for key in reversed(ODD):
        server.client.put_object(Bucket=bucket, Key=key, Body=key.encode())
        etags[key] = server.client.head_object(Bucket=bucket, Key=key)["ETag"]
    listed = list(s3io.list_objects(server.client, bucket, "in/", page_size=2))
    assert [o.key for o in listed] == sorted(k for k in ODD if k.startswith("in/"))
    assert {o.key: o.etag for o in listed} == {k: etags[k] for k in etags if k.startswith("in/")}
    assert all(o.size == len(o.key.encode()) and o.last_modified is not None for o in listed)
    after = server.client.list_objects_v2(Bucket=bucket, StartAfter="in/x", MaxKeys=1)
    assert [c["Key"] for c in after["Contents"]] == ["in/x&y<z>.pdf"] and after["IsTruncated"]


def test_conditional_writes_reads_and_deletes(server: Any) -> None:
    bucket = server.create_bucket()
    assert s3io.put_if_absent(server.client, bucket, "c.json", b"1")
    assert not s3io.put_if_absent(server.client, bucket, "c.json", b"2")
    etag = s3io.head_object(server.client, bucket, "c.json").etag  # type: ignore[union-attr]
    assert not s3io.put_if_match(server.client, bucket, "c.json", b"3", '"stale"')
    assert not s3io.put_if_match(server.client, bucket, "gone.json", b"3", etag)
    assert s3io.put_if_match(server.client, bucket, "c.json", b"4", etag)
    assert s3io.get_bytes(server.client, bucket, "c.json") == b"4"
    s3io.delete_object(server.client, bucket, "c.json")
    assert s3io.get_bytes(server.client, bucket, "c.json") is None
    assert s3io.head_object(server.client, bucket, "c.json") is None
    assert list(s3io.list_objects(server.client, bucket)) == []


def test_bulk_fill_merges_into_the_listing(server: Any) -> None:
    bucket = server.create_bucket()
    server.client.put_object(Bucket=bucket, Key="k/05", Body=b"x")
    assert [o.key for o in s3io.list_objects(server.client, bucket)] == ["k/05"]
    objects = [[f"k/{i:02d}", str(i)] for i in (9, 1, 7, 3)]
    data = json.dumps({"bucket": bucket, "objects": objects}).encode()
    request = urllib.request.Request(f"{server.endpoint_url}/_bench/fill", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.read() == b"4"
    listed = list(s3io.list_objects(server.client, bucket, page_size=2))
    assert [o.key for o in listed] == ["k/01", "k/03", "k/05", "k/07", "k/09"]


def test_a_page_costs_a_binary_search_not_a_scan() -> None:
    bucket = Bucket()
    for i in range(10_000):
        bucket.put(f"b/{i:05d}", b"")
    bucket.put("a/0", b"")
    page, more = bucket.page("b/", "b/04999", 3)
    assert [k for k, _ in page] == ["b/05000", "b/05001", "b/05002"] and more
    page, more = bucket.page("b/", "b/09997", 3)
    assert [k for k, _ in page] == ["b/09998", "b/09999"] and not more
    bucket.delete("b/09998")
    assert [k for k, _ in bucket.page("b/", "b/09997", 3)[0]] == ["b/09999"]
    assert bucket.page("a/", "", 3) == ([("a/0", bucket.objects["a/0"])], False)
