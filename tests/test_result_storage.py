"""The S3 result-storage block: ``apply_result_storage`` saves it and makes it the
server's default, a flow's persisted result lands in the bucket, and the block loaded
back by name reads it (tests/test_hosts.py runs it across two workers)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from folio.settings.config import S3Settings
from folio_prefect.deployments.result_storage import (
    BLOCK_NAME,
    S3ResultStorage,
    apply_result_storage,
)
from tests.s3_server import S3Server


@pytest.fixture()
def server_default_cleared(prefect_api: None) -> Iterator[None]:
    """The session's test server gets its local default back afterwards."""
    from prefect.client.orchestration import get_client

    yield
    with get_client(sync_client=True) as client:
        client.clear_server_default_result_storage()


def test_from_uri_splits_bucket_and_prefix() -> None:
    block = S3ResultStorage.from_uri("s3://bkt/a/b/", S3Settings(endpoint_url="http://x"))
    assert (block.bucket, block.prefix, block.endpoint_url) == ("bkt", "a/b", "http://x")
    assert block._key("/k") == "a/b/k"
    with pytest.raises(ValueError, match="s3://"):
        S3ResultStorage.from_uri("/tmp/results", S3Settings())


def test_applied_block_is_where_flow_results_go(
    server_default_cleared: None, s3_server: S3Server,
) -> None:
    from prefect import flow
    from prefect.serializers import PickleSerializer

    bucket = s3_server.create_bucket()
    lines = asyncio.run(apply_result_storage(f"s3://{bucket}/results", s3_server.settings))
    assert "set it as the server's default result storage" in lines

    @flow(persist_result=True)
    def answer() -> dict[str, Any]:
        return {"n": 42}

    state = answer(return_state=True)
    assert state.is_completed()
    listed = s3_server.client.list_objects_v2(Bucket=bucket, Prefix="results/")
    keys = [obj["Key"] for obj in listed.get("Contents", [])]
    assert len(keys) == 1
    loaded = S3ResultStorage.load(BLOCK_NAME)
    assert isinstance(loaded, S3ResultStorage)
    content = asyncio.run(loaded.aread_path(keys[0].removeprefix("results/")))
    assert PickleSerializer().loads(content) == {"n": 42}  # the flow's own serializer
