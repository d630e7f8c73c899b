"""A rerun over an S3 prefix answers unchanged, finished objects from the listing: their
ETag, size and time match what an earlier run recorded (``_sources/``), so they are not
downloaded again to be hashed; a changed object (new bytes, or the same bytes uploaded
again) is downloaded and hashed. GETs of the source keys are counted on the wire, through
a proxy in front of the test S3 server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from folio.io.sinks import open_sink
from folio.io.source_index import known_sha256, record_sha256, version_path
from folio.io.sources import discover
from folio.models import DocumentOutcome
from folio.samples import report_pages, write_text_pdf
from folio.settings.config import PipelineConfig
from tests.s3_fault_proxy import FaultProxy
from tests.s3_server import S3Server, run_prefix


def _config(tmp_path: Path, endpoint: str) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "route": {"mode": "text-layer"}, "compress": False, "work_dir": str(tmp_path / "w"),
        "validation": {"enabled": False}, "store": {"kind": "none"},
        "s3": {"endpoint_url": endpoint, "region": "us-east-1", "access_key_id": "test",
               "secret_access_key": "test"}})


def _upload(s3: Any, bucket: str, key: str, path: Path) -> None:
    s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())


def test_rerun_downloads_only_changed_objects(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, source_gets: FaultProxy
) -> None:
    s3 = s3_server.client
    pdfs = [write_text_pdf(tmp_path / f"d{i}.pdf", report_pages(seed=70 + i, n=1))
            for i in range(3)]
    for path in pdfs:
        _upload(s3, s3_bucket, f"in/{path.name}", path)
    config = _config(tmp_path, source_gets.url)

    first = run_prefix(config, s3_bucket)
    assert {d.outcome for d in first.values()} == {DocumentOutcome.OK}
    assert source_gets.seen == 3  # each source downloaded once to be hashed

    source_gets.seen = 0
    again = run_prefix(config, s3_bucket)
    assert all(d.cached for d in again.values())
    assert {n: d.sha256 for n, d in again.items()} == {n: d.sha256 for n, d in first.items()}
    assert source_gets.seen == 0, "an unchanged, done object was downloaded again"

    time.sleep(1.1)  # a new LastModified, whatever the server's time resolution
    changed = write_text_pdf(tmp_path / "new.pdf", report_pages(seed=99, n=1))
    _upload(s3, s3_bucket, "in/d1.pdf", changed)  # new bytes
    _upload(s3, s3_bucket, "in/d2.pdf", pdfs[2])  # the same bytes uploaded again
    source_gets.seen = 0
    third = run_prefix(config, s3_bucket)
    assert source_gets.seen == 2  # d1 and d2, never d0
    assert third["d0.pdf"].cached and third["d2.pdf"].cached
    assert not third["d1.pdf"].cached and third["d1.pdf"].outcome is DocumentOutcome.OK
    assert third["d1.pdf"].sha256 != first["d1.pdf"].sha256

    source_gets.seen = 0
    assert all(d.cached for d in run_prefix(config, s3_bucket).values())
    assert source_gets.seen == 0  # the new versions were recorded too


def test_a_version_replaced_after_its_listing_is_not_recorded(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    """The recorded hash is the listed version's: an object overwritten between the
    listing and the record could have been downloaded in either version."""
    s3 = s3_server.client
    old = write_text_pdf(tmp_path / "old.pdf", report_pages(seed=1, n=1))
    _upload(s3, s3_bucket, "in/a.pdf", old)
    config = _config(tmp_path, s3_server.endpoint_url)
    sink = open_sink(f"s3://{s3_bucket}/out", config.s3)
    (listed,) = discover([f"s3://{s3_bucket}/in/"], config.s3)
    _upload(s3, s3_bucket, "in/a.pdf", write_text_pdf(tmp_path / "n.pdf",
                                                      report_pages(seed=2, n=1)))
    assert not record_sha256(sink, listed, "0" * 64, config.s3)
    assert not sink.exists(version_path(listed.uri))

    (now,) = discover([f"s3://{s3_bucket}/in/"], config.s3)
    assert record_sha256(sink, now, "1" * 64, config.s3)
    assert known_sha256(sink, now) == "1" * 64
    assert known_sha256(sink, listed) is None  # the older listing's version: no answer
