"""Prefect result storage on S3 (any S3-compatible endpoint), so that a flow run's result
written on one host is read on another: the sweep reads each batch run's report, and on
several hosts the batch ran elsewhere.

Prefect 3.9 ships no S3 block of its own: ``RemoteFileSystem("s3://...")`` needs s3fs
(with aiobotocore, which pins botocore), and ``S3Bucket`` is in prefect-aws. This block is
boto3 through :func:`folio.io.s3.make_client`, which folio already uses for its outputs.

``python -m folio_prefect.deployments.work_pools --apply --result-storage s3://bucket/prefix`` (or
``FOLIO_RESULT_STORAGE``) saves the block and makes it the server's default result
storage, so every worker on every host writes its results there with no setting of its
own. A process that reads or writes results must have imported this module (the block
class is looked up by its slug): :mod:`folio_prefect.flows.ingest` and
:mod:`folio_prefect.flows.sweep` do, and :func:`folio_prefect.deployments.runs.run_report`;
an installed folio also registers it with every Prefect process through the
``prefect.collections`` entry point (pyproject.toml).
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from prefect._internal.compatibility.async_dispatch import async_dispatch
from prefect.filesystems import WritableFileSystem
from pydantic import Field, SecretStr

from folio.io.s3 import make_client
from folio.settings.config import S3Settings

BLOCK_NAME = "folio-results"
ENV_VAR = "FOLIO_RESULT_STORAGE"


class S3ResultStorage(WritableFileSystem):
    """Results as objects under ``s3://bucket/prefix/``; credentials left empty come
    from each host's own chain (AWS_* environment, profile, instance role)."""

    _block_type_name = "Folio S3 Result Storage"
    _block_type_slug = "folio-s3-result-storage"
    _description = "Prefect results in an S3 bucket (boto3; any S3-compatible endpoint)."

    bucket: str = Field(description="bucket name")
    prefix: str = Field("", description="key prefix results go under")
    endpoint_url: str | None = Field(None, description="S3-compatible endpoint; empty: AWS")
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None

    @classmethod
    def from_uri(cls, uri: str, s3: S3Settings) -> S3ResultStorage:
        """``s3://bucket/prefix`` with the connection of ``s3`` (folio's settings)."""
        if not uri.startswith("s3://"):
            raise ValueError(f"result storage must be s3://bucket/prefix, not {uri!r}")
        bucket, _, prefix = uri[len("s3://"):].partition("/")
        if not bucket:
            raise ValueError(f"no bucket in {uri!r}")
        return cls(bucket=bucket, prefix=prefix.strip("/"), endpoint_url=s3.endpoint_url,
                   region=s3.region, access_key_id=s3.access_key_id,
                   secret_access_key=s3.secret_access_key)

    def _key(self, path: str) -> str:
        path = path.lstrip("/")
        return f"{self.prefix}/{path}" if self.prefix else path

    def _client(self) -> Any:
        return make_client(S3Settings(
            endpoint_url=self.endpoint_url, region=self.region,
            access_key_id=self.access_key_id, secret_access_key=self.secret_access_key))

    def _read(self, path: str) -> bytes:
        body = self._client().get_object(Bucket=self.bucket, Key=self._key(path))["Body"]
        data: bytes = body.read()
        return data

    def _write(self, path: str, content: bytes) -> str:
        key = self._key(path)
        self._client().put_object(Bucket=self.bucket, Key=key, Body=content)
        return f"s3://{self.bucket}/{key}"

    async def aread_path(self, path: str) -> bytes:
        return await asyncio.to_thread(self._read, path)

    @async_dispatch(aread_path)
    def read_path(self, path: str) -> bytes:  # type: ignore[override]
        return self._read(path)

    async def awrite_path(self, path: str, content: bytes) -> str:
        return await asyncio.to_thread(self._write, path, content)

    @async_dispatch(awrite_path)
    def write_path(self, path: str, content: bytes) -> str:  # type: ignore[override]
        return self._write(path, content)


async def apply_result_storage(uri: str, s3: S3Settings) -> list[str]:
    """Save the block as :data:`BLOCK_NAME` and make it the server's default result
    storage (flow runs without a storage setting of their own write there)."""
    from prefect.client.orchestration import get_client

    block = S3ResultStorage.from_uri(uri, s3)
    block_id: UUID = await block.asave(BLOCK_NAME, overwrite=True)
    async with get_client() as client:
        await client.update_server_default_result_storage(block_id)
    return [f"saved result storage {S3ResultStorage.get_block_type_slug()}/{BLOCK_NAME} "
            f"-> {uri}", "set it as the server's default result storage"]
