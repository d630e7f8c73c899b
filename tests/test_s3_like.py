"""bench/s3_like: the benchmarks' S3 server answers ranged reads as moto (and S3) would,
through its own fast path, and leaves every other request to moto."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from botocore.exceptions import ClientError

from bench.s3_like import start_s3_like_server
from tests.s3_server import S3Server


@pytest.fixture(scope="module")
def s3_like() -> Iterator[S3Server]:
    with start_s3_like_server() as server:
        yield server


def test_ranged_reads_give_the_bytes_and_headers_of_the_range(s3_like: S3Server) -> None:
    bucket, client = s3_like.create_bucket("like"), s3_like.client
    body = os.urandom(300_000)
    put = client.put_object(Bucket=bucket, Key="dir/a b+c.lance", Body=body)
    whole = client.head_object(Bucket=bucket, Key="dir/a b+c.lance")
    n = len(body)
    for header, first, last in (("bytes=100-199", 100, 199), ("bytes=299990-", 299990, n - 1),
                                ("bytes=299990-400000", 299990, n - 1),
                                ("bytes=-10", n - 10, n - 1)):  # a suffix range: moto's path
        got = client.get_object(Bucket=bucket, Key="dir/a b+c.lance", Range=header)
        assert got["Body"].read() == body[first : last + 1], header
        assert got["ContentLength"] == last + 1 - first
        assert got["ContentRange"] == f"bytes {first}-{last}/{n}"
        assert got["ETag"] == put["ETag"] and got["LastModified"] == whole["LastModified"]
    assert client.get_object(Bucket=bucket, Key="dir/a b+c.lance")["Body"].read() == body


def test_what_the_fast_path_does_not_serve_gets_moto_s_answer(s3_like: S3Server) -> None:
    bucket, client = s3_like.create_bucket("like"), s3_like.client
    client.put_object(Bucket=bucket, Key="k", Body=b"0123456789")
    with pytest.raises(ClientError) as missing:
        client.get_object(Bucket=bucket, Key="absent", Range="bytes=0-3")
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    with pytest.raises(ClientError) as beyond:
        client.get_object(Bucket=bucket, Key="k", Range="bytes=50-60")
    assert beyond.value.response["Error"]["Code"] == "InvalidRange"
    etag = client.head_object(Bucket=bucket, Key="k")["ETag"]
    with pytest.raises(ClientError) as changed:  # a condition: moto decides
        client.get_object(Bucket=bucket, Key="k", Range="bytes=0-3", IfMatch='"not-it"')
    assert changed.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=bucket, Key="k", Range="bytes=0-3",
                             IfMatch=etag)["Body"].read() == b"0123"
