"""A real S3 endpoint for tests: moto's standalone server over HTTP on 127.0.0.1.

Why a subprocess and not ``mock_aws`` or moto's in-process threaded server: boto3, and
LanceDB's Rust object_store, talk real HTTP to it exactly as to MinIO or R2, and its
state cannot be reset or intercepted by another test's ``mock_aws`` in the same process.

Use from conftest.py::

    pytest_plugins = ["tests.s3_server"]
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from folio.io.s3 import make_client
from folio.settings.config import S3Settings
from tests.process_guard import guard_pid, release_pid

__all__ = ["S3Server", "s3_bucket", "s3_server", "start_s3_server"]

_STARTUP_S = 30.0
REPO = Path(__file__).resolve().parent.parent


@dataclass
class S3Server:
    endpoint_url: str
    settings: S3Settings
    client: Any
    process: subprocess.Popen[bytes] = field(repr=False)
    _names: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def create_bucket(self, name: str | None = None) -> str:
        """A new empty bucket (unique name unless given); returns its name."""
        bucket = name or f"t{next(self._names)}-{uuid.uuid4().hex[:10]}"
        self.client.create_bucket(Bucket=bucket)
        return bucket

    def __enter__(self) -> S3Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        release_pid(self.process.pid)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(url: str, process: subprocess.Popen[bytes], probe: str = "/moto-api/") -> bool:
    """Whether the server at ``url`` answers ``probe`` (any HTTP status counts: it is up)
    before :data:`_STARTUP_S` pass or its process exits."""
    deadline = time.monotonic() + _STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(f"{url}{probe}", timeout=2):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            time.sleep(0.1)
    return False


def _moto(port: int) -> list[str]:
    # moto.server with S3's conditional writes atomic (tests/moto_server.py says why)
    return [sys.executable, "-m", "tests.moto_server", "-H", "127.0.0.1", "-p", str(port)]


def start_s3_server(command: Callable[[int], list[str]] = _moto, *, probe: str = "/moto-api/",
                    what: str = "moto server") -> S3Server:
    """Start ``command(port)`` (``python -m moto.server`` unless given: the benchmarks
    start their own S3 servers here too) on a free port, from the repository with it on
    ``PYTHONPATH``, and wait until it answers ``probe``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONPATH"] = str(REPO)
    for _ in range(3):  # a free port can be taken between probing and binding
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        process = subprocess.Popen(command(port), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, env=env, cwd=REPO)
        guard_pid(process.pid)  # stopped if this test process goes first (tests/process_guard.py)
        if _wait_ready(url, process, probe):
            settings = S3Settings(
                endpoint_url=url,
                region="us-east-1",
                access_key_id="test",
                secret_access_key=SecretStr("test"),
            )
            return S3Server(url, settings, make_client(settings), process)
        process.kill()
        process.wait(timeout=10)
        release_pid(process.pid)
    raise RuntimeError(f"{what} did not start")


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    with start_s3_server() as server:
        yield server


@pytest.fixture()
def s3_bucket(s3_server: S3Server) -> str:
    """A fresh bucket for one test."""
    return s3_server.create_bucket()


@pytest.fixture()
def source_gets(s3_server: S3Server, s3_bucket: str) -> Iterator[Any]:
    """A proxy (tests.s3_fault_proxy.FaultProxy) that refuses nothing and counts the GETs
    of keys under ``in/``: the sources' downloads (listings go to the bucket's root with
    a query)."""
    from tests.s3_fault_proxy import FaultProxy

    proxy = FaultProxy(s3_server.endpoint_url, match=f"/{s3_bucket}/in/",
                       methods={"GET"}).start()
    try:
        yield proxy
    finally:
        proxy.stop()


def run_prefix(config: Any, bucket: str) -> dict[str, Any]:
    """Every entry under ``s3://bucket/in/`` through the Prefect-free pipeline, outputs
    to ``s3://bucket/out``: each document's result by its file name."""
    from folio.io.sources import discover
    from folio.pipeline import Services, process_documents

    services = Services(config, f"s3://{bucket}/out")
    try:
        refs = discover([f"s3://{bucket}/in/"], config.s3)
        return {d.source.rsplit("/", 1)[-1]: d for d in process_documents(refs, services)}
    finally:
        services.close()
